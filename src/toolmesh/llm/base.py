"""The LLM seam: what every provider offers, the answer it gives, and the error it raises.

A provider turns ``(system, prompt)`` into text, whole (:meth:`LLMProvider.complete`) or
chunk by chunk (:meth:`LLMProvider.stream`), and answers a chat request — a conversation, the
tools the model may call, a response schema, limits (:mod:`toolmesh.llm.chat`) — with
:meth:`LLMProvider.chat`. Implementations live beside this module:
:mod:`toolmesh.llm.openai` (any OpenAI-compatible HTTP server) and
:mod:`toolmesh.llm.scripted` (answers from a script, for tests and demos).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from toolmesh.errors import ToolmeshError
from toolmesh.llm.chat import ChatRequest, ToolCall


class LLMError(ToolmeshError):
    """The LLM could not answer: unreachable, an HTTP error, a bad response, a timeout.

    The message says which, and what to check. It never contains an API key.
    """

    type = "llm-error"


class LLMRefused(LLMError):
    """The LLM's server answered, with an HTTP error: it is up, but would not do what was
    asked (a feature it lacks, a bad request, a wrong key). ``status``: the HTTP status."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """One whole answer of an LLM, with the token counts and model name when it reported them;
    the tool calls of a reply that calls tools, and why the model stopped (``"stop"``,
    ``"length"``: ``max_tokens`` cut it, ``"tool_calls"``) when known. ``token_source``: where
    the counts come from — ``"reported"`` by the server, ``"counted"`` or ``"estimated"`` by
    the provider where the server reported none (:mod:`toolmesh.llm.counting`)."""

    text: str
    in_tokens: int | None = None
    out_tokens: int | None = None
    model: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    token_source: str | None = None


#: how an agent gets tool calls out of a model (docs/tool-calling.md): OpenAI's ``tools``
#: (``native``), one JSON object per step matching a schema (``json``), or TrustGraph's text
#: protocol (``react``)
ToolCalling = Literal["native", "json", "react"]
TOOL_CALLING: tuple[str, ...] = ("native", "json", "react")


@runtime_checkable
class LLMProvider(Protocol):
    """Something that completes prompts. Close it with :meth:`close` when done."""

    #: a human-readable description for logs, e.g. ``"openai-compatible gpt-4o-mini @ URL"``
    #: (never a secret)
    name: str

    async def complete(self, *, system: str, prompt: str) -> Completion:
        """The whole answer to ``prompt`` under the instructions ``system`` ("" for none)."""
        ...

    def chat(self, request: ChatRequest) -> CompletionStream:
        """The answer to a chat request, piece by piece; once exhausted, the stream's
        ``completion`` holds the whole text, the tool calls and the token counts. A provider
        that cannot follow part of the request (tools, a response schema) ignores it: the
        agent finds out what works (:mod:`toolmesh.llm.detect`)."""
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
                    model=s.model if s else None,
                    tool_calls=s.tool_calls if s else (),
                    finish_reason=s.finish_reason if s else None,
                    token_source=s.token_source if s else None)
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
