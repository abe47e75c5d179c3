"""``SteadyLLM``: a scripted LLM that writes its answers over time, as a model does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from toolmesh.llm import Completion, Rule, ScriptedLLM
from toolmesh.llm.base import CompletionStream
from toolmesh.llm.chat import ChatRequest


class SteadyLLM(ScriptedLLM):
    """A scripted LLM that writes its answers at a steady rate, as a model does: what it wrote
    while nobody read is all there at the next read, as a socket would have buffered it.

    (The plain ScriptedLLM has the whole answer ready at once; then a long answer's chunks fill
    the queues between the services ahead of every other dialog's, and what another dialog
    waits for is those queues more than the agent.)
    """

    def __init__(self, rules: Sequence[Rule], *, chars_per_second: float, chunk_size: int) -> None:
        super().__init__(rules=rules, chunk_size=chunk_size)
        self.chars_per_second = chars_per_second

    def stream(self, *, system: str, prompt: str) -> CompletionStream:
        return CompletionStream(self._steady(super().stream(system=system, prompt=prompt)))

    def chat(self, request: ChatRequest) -> CompletionStream:
        return CompletionStream(self._steady(super().chat(request)))

    async def _steady(self, chunks: CompletionStream) -> AsyncIterator[str | Completion]:
        loop = asyncio.get_running_loop()
        start, written = loop.time(), 0
        async for chunk in chunks:
            ready_at = start + written / self.chars_per_second
            if ready_at > loop.time():
                await asyncio.sleep(ready_at - loop.time())  # the model is still writing
            written += len(chunk)
            yield chunk
        assert chunks.completion is not None
        yield chunks.completion
