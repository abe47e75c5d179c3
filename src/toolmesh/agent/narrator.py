"""A step's thought and answer, told to the client as the model writes them.

Every strategy (:mod:`toolmesh.agent.strategies`) hands its pieces of thought and answer to a
:class:`Narrator` while the reply streams, then :meth:`Narrator.finish` with what the reply
turned out to be: the narrator sends what was not streamed yet, closes the thought, and for a
final answer sends the dialog's last message. So ``thought`` and ``answer`` messages look the
same whichever strategy produced them (and ``tg-invoke-agent`` prints them the same).

The pieces that come close together go out in one message (:mod:`toolmesh.llm.coalesce`): a
message per word would cost a publish and a delivery per word.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from toolmesh.llm.coalesce import Coalescer, Coalescing
from toolmesh.schema.agent import message, new_message_id

log = logging.getLogger("toolmesh.agent")

Emit = Callable[[dict[str, Any]], Awaitable[None]]

#: seconds a streaming dialog may keep the event loop before it lets the others run
STREAM_SLICE = 0.005


def cut_note(limit: int) -> str:
    """What ends an answer the model's limit cut short (``limit``: the agent's bound in
    tokens, 0: the model's own)."""
    bound = f"of {limit} tokens (--max-answer-tokens)" if limit else "of output tokens"
    return f"\n\n[The answer was cut short here: the model reached its limit {bound}.]"


class Narrator:
    """Tells one step's thought and answer (module docstring). ``streaming=False``: nothing
    goes out before :meth:`finish`, which sends each whole."""

    def __init__(self, emit: Emit, *, streaming: bool, coalescing: Coalescing) -> None:
        self.streaming = streaming
        self._emit = emit
        self._thought_id, self._answer_id = new_message_id(), new_message_id()
        self._thoughts = Coalescer(lambda text: emit(message(
            "thought", text, message_id=self._thought_id, end_of_message=False)), coalescing)
        self._answers = Coalescer(lambda text: emit(message(
            "answer", text, message_id=self._answer_id, end_of_message=False)), coalescing)
        self._thought: list[str] = []  # what went to the thought stream
        self._answer: list[str] = []
        self._thought_open = False
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._give_way_at = loop.time() + STREAM_SLICE

    async def give_way(self) -> None:
        """Let other dialogs run once per time slice: chunks already waiting are handed over
        without the event loop ever running anything else, so a long answer would hold up
        every other dialog of the process until it ends."""
        if self._loop.time() >= self._give_way_at:
            await asyncio.sleep(0)
            self._give_way_at = self._loop.time() + STREAM_SLICE

    async def follow(self, chunks: AsyncIterator[str],
                     split: Callable[[str], tuple[str, str]]) -> None:
        """Tell a reply as it streams: ``split`` says which text of each chunk is thought and
        which is answer. If the stream fails, what came before the failure still goes out."""
        try:
            async for chunk in chunks:
                await self.give_way()
                thought, answer = split(chunk)
                await self.thought(thought)
                await self.answer(answer)
        except Exception:
            with contextlib.suppress(Exception):
                await self.abandon()
            raise

    async def thought(self, text: str) -> None:
        """More of the thought (streamed when streaming)."""
        if not text or not self.streaming:
            return
        if self._answer:
            await self._answers.flush()  # what is out stays in order
        self._thought.append(text)
        self._thought_open = True
        await self._thoughts.add(text)

    async def answer(self, text: str) -> None:
        """More of the final answer (streamed when streaming); the thought is over."""
        if not text or not self.streaming:
            return
        if self._thought_open:
            await self._end_thought("")
        self._answer.append(text)
        await self._answers.add(text)

    async def finish(self, *, thought: str, answer: str | None,
                     cut: int | None = None) -> None:
        """The step's whole thought, and its answer if it is final (``None``: it is not):
        what was not streamed of them goes out, the thought ends, a final answer ends the
        dialog. ``cut``: the answer was cut short by the model's limit — that many tokens (0:
        the model's own): it ends with :func:`cut_note`, and the last message says
        ``"cut": true``, in every face."""
        marks: dict[str, Any] = {}
        if answer is not None and cut is not None:
            answer += cut_note(cut)
            marks["cut"] = True
        try:
            streamed = "".join(self._thought)
            rest = thought[len(streamed):] if thought.startswith(streamed) else ""
            if self.streaming:
                await self._end_thought(rest)
            elif thought:
                await self._emit(message("thought", thought, message_id=self._thought_id))
            if answer is None:
                await self._answers.flush()
                if self._answer:
                    log.warning("a streamed answer turned out not to be final")
                return
            if not self.streaming:
                await self._emit(message("answer", answer, message_id=self._answer_id,
                                         end_of_dialog=True, answer=answer, **marks))
                return
            sent = "".join(self._answer)
            await self._answers.add(answer[len(sent):] if answer.startswith(sent) else "")
            await self._answers.flush()
            await self._emit(message("answer", "", message_id=self._answer_id,
                                     end_of_dialog=True, answer=answer, **marks))
        finally:
            self.close()

    async def abandon(self) -> None:
        """The step failed: what was held of its text goes out (it came before the failure)."""
        try:
            await self._thoughts.flush()
            await self._answers.flush()
        finally:
            self.close()

    def close(self) -> None:
        self._thoughts.cancel()
        self._answers.cancel()

    async def _end_thought(self, text: str) -> None:
        """The thought's last message: what is held of it, then ``text``."""
        text = await self._thoughts.take() + text
        if text or self._thought_open:
            await self._emit(message("thought", text, message_id=self._thought_id,
                                     end_of_message=True))
        self._thought_open = False
