"""The LLM seam: what every provider offers, the answer it gives, and the error it raises.

A provider turns ``(system, prompt)`` into text, whole (:meth:`LLMProvider.complete`) or
chunk by chunk (:meth:`LLMProvider.stream`). Implementations live beside this module:
:mod:`toolmesh.llm.openai` (any OpenAI-compatible HTTP server) and
:mod:`toolmesh.llm.scripted` (answers from a script, for tests and demos).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from toolmesh.errors import ToolmeshError


class LLMError(ToolmeshError):
    """The LLM could not answer: unreachable, an HTTP error, a bad response, a timeout.

    The message says which, and what to check. It never contains an API key.
    """

    type = "llm-error"


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """One whole answer of an LLM, with the token counts and model name when it reported them."""

    text: str
    in_tokens: int | None = None
    out_tokens: int | None = None
    model: str | None = None


@runtime_checkable
class LLMProvider(Protocol):
    """Something that completes prompts. Close it with :meth:`close` when done."""

    #: a human-readable description for logs, e.g. ``"openai-compatible gpt-4o-mini @ URL"``
    #: (never a secret)
    name: str

    async def complete(self, *, system: str, prompt: str) -> Completion:
        """The whole answer to ``prompt`` under the instructions ``system`` ("" for none)."""
        ...

    def stream(self, *, system: str, prompt: str) -> AsyncIterator[str]:
        """The answer as text chunks; joined they equal what :meth:`complete` would return.

        Providers that know token counts return a :class:`CompletionStream`, whose
        ``completion`` holds them once the stream is exhausted.
        """
        ...

    async def close(self) -> None:
        """Release what the provider holds (HTTP connections); calling it twice is harmless."""
        ...


class CompletionStream(AsyncIterator[str]):
    """An answer chunk by chunk; once exhausted, :attr:`completion` holds the whole of it.

    Built from a source that yields text chunks and, at most once (usually last), a
    :class:`Completion` carrying the token counts and model; that summary's ``text`` is
    ignored — :attr:`completion` gets the chunks joined, so the two can never disagree.
    Empty chunks are skipped.
    """

    __slots__ = ("_parts", "_source", "_summary", "completion")

    def __init__(self, source: AsyncIterator[str | Completion]) -> None:
        self._source = source
        self._parts: list[str] = []
        self._summary: Completion | None = None
        #: the whole answer, set when the stream has ended normally
        self.completion: Completion | None = None

    def __aiter__(self) -> CompletionStream:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                item = await anext(self._source)
            except StopAsyncIteration:
                s = self._summary
                self.completion = Completion(
                    text="".join(self._parts),
                    in_tokens=s.in_tokens if s else None,
                    out_tokens=s.out_tokens if s else None,
                    model=s.model if s else None)
                raise
            if isinstance(item, Completion):
                self._summary = item
            elif item:
                self._parts.append(item)
                return item

    async def aclose(self) -> None:
        """Stop early: let the source release what it holds (an HTTP response, say)."""
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()
