"""Fewer, larger stream messages: the pieces that come close together go out as one.

An LLM writes a word at a time. Sent as it comes, every word is a bus message at every hop
(text-completion → prompt → agent → client): a publish, a delivery, an encode and a decode
each, for six characters. A :class:`Coalescer` stands in front of a sender and gathers:

* a piece that comes when nothing went out for a while goes out **at once** — the first piece
  of a stream, and the first after a pause, are never held;
* a piece that comes sooner is held, and what is held goes out as one message when the gap
  since the last send went out has passed (a timer wakes it: nothing polls), or as soon as
  ``max_chars`` are held;
* :meth:`Coalescer.flush` sends what is held at once: the end of a stream is never held.

The gap starts at an eighth of ``window`` and doubles after each send up to ``window``, so the
first words after the first piece — often a label such as ``Thought:`` that a reader never
sees — are not held the whole window, while a long fast stream costs one message per
``window``. The messages join to exactly what the pieces join to, in order; with a zero
``window`` every piece is sent as it comes (:data:`OFF`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger("toolmesh.llm")

#: the first gap after a send is this fraction of the window; each send doubles it
_FIRST_GAP = 1 / 8


@dataclass(frozen=True, kw_only=True)
class Coalescing:
    """How a stream's pieces are gathered into messages (module docstring)."""

    #: the most seconds a piece is held before it goes out; 0: every piece goes out as it comes
    window: float = 0.01
    #: characters held that go out at once, however soon
    max_chars: int = 4096

    def __post_init__(self) -> None:
        if not self.window >= 0:  # also refuses NaN
            raise ValueError(f"the coalescing window must be 0 or more seconds, not {self.window!r}")
        if self.max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, not {self.max_chars!r}")

    @property
    def enabled(self) -> bool:
        return self.window > 0


#: every piece is sent as it comes
OFF = Coalescing(window=0.0)


class Coalescer:
    """Sends the pieces given to :meth:`add` through ``send``, gathered (module docstring).

    One writer: :meth:`add` and :meth:`flush` are awaited in turn by the task that produces the
    stream. A timed send runs in a task of its own; the next :meth:`flush` waits for it, so
    what the writer sends after a flush comes after every piece. :meth:`cancel` (in a
    ``finally``) drops what is held when the stream is abandoned.
    """

    __slots__ = ("_gap", "_loop", "_next_at", "_parts", "_send", "_sending", "_size", "_timer",
                 "failure", "max_chars", "messages", "window")

    def __init__(self, send: Callable[[str], Awaitable[None]],
                 coalescing: Coalescing = Coalescing()) -> None:
        self._send = send
        self.window = coalescing.window
        self.max_chars = coalescing.max_chars
        self._gap = coalescing.window * _FIRST_GAP
        self._loop = asyncio.get_running_loop()
        self._parts: list[str] = []
        self._size = 0
        #: loop time before which a piece is held
        self._next_at = float("-inf")
        self._timer: asyncio.TimerHandle | None = None
        self._sending: asyncio.Task[None] | None = None  # a timed send in flight
        #: what a timed send raised; raised again by the next add or flush
        self.failure: Exception | None = None
        #: messages sent so far
        self.messages = 0

    async def add(self, text: str) -> None:
        """Send ``text`` now, or hold it to go out with what follows (empty text: nothing)."""
        if self.failure is not None:
            raise self.failure
        if not text:
            return
        if self.window <= 0:
            self.messages += 1
            await self._send(text)
            return
        self._parts.append(text)
        self._size += len(text)
        if self._sending is not None:
            return  # the send in flight looks again when it is done
        if self._size >= self.max_chars or self._loop.time() >= self._next_at:
            await self._send_held()
        elif self._timer is None:
            self._timer = self._loop.call_at(self._next_at, self._on_timer)

    async def flush(self) -> None:
        """Send what is held now, after any send in flight: the stream ends, or something
        else is to follow the pieces."""
        text = await self.take()
        if text:
            await self._send_text(text)

    async def take(self) -> str:
        """What is held, no longer held, after any send in flight: for the caller to send
        with what must follow it (a stream's last message)."""
        self._cancel_timer()
        if self._sending is not None:
            await asyncio.wait((self._sending,))
            self._cancel_timer()  # the send in flight may have set one for what came meanwhile
        if self.failure is not None:
            raise self.failure
        return self._take_held()

    def cancel(self) -> None:
        """Drop what is held and stop a send in flight (the stream is abandoned)."""
        self._cancel_timer()
        if self._sending is not None:
            self._sending.cancel()
            self._sending = None
        self._parts = []
        self._size = 0

    def _take_held(self) -> str:
        parts = self._parts
        self._parts = []
        self._size = 0
        return parts[0] if len(parts) == 1 else "".join(parts)

    async def _send_held(self) -> None:
        self._cancel_timer()
        await self._send_text(self._take_held())

    async def _send_text(self, text: str) -> None:
        now = self._loop.time()
        if now >= self._next_at + self.window:
            self._gap = self.window * _FIRST_GAP  # after a pause, the quick start again
        else:
            self._gap = min(self._gap * 2, self.window)
        self.messages += 1
        try:
            await self._send(text)
        finally:
            # from when it is out: while sends are slow (a busy broker), more is gathered
            self._next_at = self._loop.time() + self._gap

    def _on_timer(self) -> None:
        self._timer = None
        if self._parts and self._sending is None:
            self._sending = self._loop.create_task(self._send_due())

    async def _send_due(self) -> None:
        try:
            await self._send_held()
            # what came while it was sent: a full batch goes now, the rest on time
            while self._size >= self.max_chars:
                await self._send_held()
        except Exception as e:  # the writer hears of it at its next add or flush
            self.failure = e
            log.debug("a timed send of a stream failed: %r", e)
        finally:
            self._sending = None
        if self._parts and self._timer is None and self.failure is None:
            self._timer = self._loop.call_at(self._next_at, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
