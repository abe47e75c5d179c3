"""Token counts for the answers a server reports none for.

Budgets, the dialog journal, metrics and ``tg-invoke-agent --show-usage`` all need token
counts, and some servers give none where they stream: llama-cpp-python answers
``stream_options.include_usage`` with no ``usage`` at all. For such an answer the provider
counts them itself, and says so (:data:`COUNTED`):

* **prompt tokens**: the same request, not streamed, for one token (``max_tokens: 1``,
  without the response format, whose grammar does not change the prompt): the server reports
  the prompt tokens of a whole answer. The server's prompt cache makes it cheap — once the
  provider knows the server reports nothing in streams, it asks *before* the stream, so that the
  stream finds its prompt already evaluated;
* **completion tokens**: the pieces the stream came in (these servers send one token per
  piece).

Where even that fails (the count request is refused, or reports nothing too), the counts are
estimated from the characters (:data:`ESTIMATED`: four to a token).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from toolmesh.llm.base import Completion

#: the counts came from the server with the answer
REPORTED = "reported"
#: the provider counted them (the server reported none for the answer itself)
COUNTED = "counted"
#: the provider estimated them from the text's length
ESTIMATED = "estimated"
#: characters per token for an estimate
CHARS_PER_TOKEN = 4


def count_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """The request whose whole answer reports ``body``'s prompt tokens (module docstring)."""
    out = {k: v for k, v in body.items()
           if k not in ("stream_options", "response_format", "stop")}
    out.update(stream=False, max_tokens=1)
    return out


def estimate(body: Mapping[str, Any]) -> int:
    """The prompt tokens of ``body``, estimated from its messages' and tools' length."""
    chars = 0
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        chars += len(content) if isinstance(content, str) else 0
        chars += 8  # the role and the chat format's markers
    chars += len(str(body.get("tools") or ""))
    return math.ceil(chars / CHARS_PER_TOKEN)


async def prompt_tokens(body: Mapping[str, Any],
                        ask: Callable[[dict[str, Any]], Awaitable[Completion]]
                        ) -> tuple[int, str]:
    """The prompt tokens of ``body`` and how they were found (:data:`COUNTED` or
    :data:`ESTIMATED`); ``ask``: sends a request, returns its whole answer (raising
    :class:`~toolmesh.llm.base.LLMError` on failure)."""
    from toolmesh.llm.base import LLMError

    try:
        whole = await ask(count_request(body))
    except LLMError:
        whole = None
    if whole is not None and whole.in_tokens is not None:
        return whole.in_tokens, COUNTED
    return estimate(body), ESTIMATED


def completed(done: Completion, *, in_tokens: int, source: str, pieces: int,
              text: str) -> Completion:
    """``done`` with the counts the server left out filled in: ``in_tokens`` (found by
    ``source``) and the stream's ``pieces`` (or an estimate from ``text``)."""
    out_tokens = done.out_tokens
    if out_tokens is None:
        out_tokens = pieces if pieces else math.ceil(len(text) / CHARS_PER_TOKEN)
    return replace(done, in_tokens=done.in_tokens if done.in_tokens is not None else in_tokens,
                   out_tokens=out_tokens, token_source=source)
