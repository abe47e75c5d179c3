"""A call whose question waits for a person, held between the rounds of a 2026-07-28 client.

MCP 2026-07-28 has no back channel: a server cannot ask the client during a call. It answers
the call with the question instead (``InputRequiredResult``), and the client makes the call
again carrying its person's answer and the server's ``requestState`` (multi-round-trip
requests, MRTR). Some calls cannot simply end and start again: a call whose MCP server wants
the caller to sign in goes on once the sign-in is kept, and the stdio bridge's call to the
gateway waits inside the gateway. Such a call is held here between the rounds: it runs in a
task of its own, its questions queue up, and each round waits for the next question or the
end of the call (:meth:`Held.next`).

A held call is kept under an id no one can guess (the ``requestState`` of the round that
asked names it) until its client comes back, and at most :data:`ANSWER_WINDOW` seconds (or
until the question's own limit, if sooner): a client that never comes back gets its question
answered ``cancel``, so the call ends then instead of at its deadline.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import mcp_types

log = logging.getLogger("toolmesh.mcp_endpoint")

T = TypeVar("T")

#: seconds a client has to come back with its person's answer (as long as a person has to
#: approve a call: approval.APPROVAL_TIMEOUT)
ANSWER_WINDOW = 300.0

#: gives the person's answer to the call that asked
Answerer = Callable[[mcp_types.ElicitResult], Awaitable[None]]
#: reports a call's progress (``{"progress", "total"?, "message"?}``) to the current round's
#: client
Progress = Callable[[dict[str, Any]], Awaitable[None]]

CANCEL = mcp_types.ElicitResult(action="cancel")


@dataclass(kw_only=True)
class Question:
    """What a held call asks its client's person, and where the answer goes."""

    params: mcp_types.ElicitRequestParams
    answer: Answerer
    #: seconds the call waits for the answer at most (``None``: :data:`ANSWER_WINDOW`)
    within: float | None = None
    #: anything the asker needs to know about it later
    about: dict[str, Any] = field(default_factory=dict)


class Held(Generic[T]):
    """A call under way: ``run(held)`` makes it, putting its questions to :meth:`ask`."""

    def __init__(self, run: Callable[[Held[T]], Awaitable[T]]) -> None:
        self._questions: asyncio.Queue[Question] = asyncio.Queue()
        #: the current round's progress reporter (``None`` between rounds: reports dropped)
        self.progress: Progress | None = None
        self._abandoned = False
        self.task: asyncio.Task[T] = asyncio.ensure_future(run(self))
        self.task.add_done_callback(_retrieve)

    async def ask(self, question: Question) -> None:
        """Put ``question`` to the client's person (at the next round's end); a call whose
        client is gone has it answered ``cancel`` at once."""
        if self._abandoned:
            await question.answer(CANCEL)
            return
        self._questions.put_nowait(question)

    async def report(self, report: dict[str, Any]) -> None:
        """A progress report of the call, for the client of the round under way, if any."""
        if self.progress is not None:
            await self.progress(report)

    async def next(self) -> Question | T:
        """The call's next question, or its outcome once it ends (a question that comes as
        it ends is moot). The call is cancelled when the round waiting for it is."""
        if not self._questions.empty() and not self.task.done():
            return self._questions.get_nowait()
        waiting = asyncio.ensure_future(self._questions.get())
        try:
            await asyncio.wait({waiting, self.task}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self.task.cancel()
            raise
        finally:
            if not waiting.done():
                waiting.cancel()
        if self.task.done():
            return self.task.result()
        return waiting.result()

    async def abandon(self) -> None:
        """Its client is gone: every question from now on is answered ``cancel``."""
        self._abandoned = True
        while not self._questions.empty():
            await self._questions.get_nowait().answer(CANCEL)


class HeldCalls:
    """The calls held between rounds (module docstring), each under an unguessable id."""

    def __init__(self, *, window: float = ANSWER_WINDOW) -> None:
        self.window = window
        self._held: dict[str, tuple[Held[Any], Question, asyncio.TimerHandle]] = {}
        #: what gives up on calls whose clients did not come back (kept until done)
        self._giving_up: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, held: Held[Any], question: Question) -> str:
        """Keep ``held``, asking ``question``, until its client comes back: its id."""
        id = secrets.token_urlsafe(24)
        within = self.window if question.within is None else min(self.window,
                                                                  max(question.within, 0.0))
        timer = asyncio.get_running_loop().call_later(within, self._expire, id)
        self._held[id] = (held, question, timer)
        return id

    def take(self, id: Any) -> tuple[Held[Any], Question] | None:
        """The call held under ``id`` and its question (no longer held), or ``None``: it
        was never held here, was taken, or its client came back too late."""
        found = self._held.pop(id, None) if isinstance(id, str) else None
        if found is None:
            return None
        held, question, timer = found
        timer.cancel()
        return held, question

    async def close(self) -> None:
        """Give up on every held call (the server stops)."""
        for id in list(self._held):
            self._expire(id)
        if self._giving_up:
            await asyncio.gather(*self._giving_up, return_exceptions=True)

    def _expire(self, id: str) -> None:
        found = self._held.pop(id, None)
        if found is None:
            return
        held, question, _ = found
        log.info("the MCP client did not come back with an answer within %g s: its question "
                 "is cancelled", self.window)
        task = asyncio.ensure_future(self._give_up(held, question))
        self._giving_up.add(task)
        task.add_done_callback(self._giving_up.discard)

    async def _give_up(self, held: Held[Any], question: Question) -> None:
        try:
            await question.answer(CANCEL)
            await held.abandon()
        except Exception as e:  # noqa: BLE001 - the call ends at its deadline then
            log.warning("could not cancel a question no one came back to answer: %r", e)


def answer_of(response: Any) -> mcp_types.ElicitResult | None:
    """The person's answer to a question, as a retry's ``inputResponses`` entry carries it
    (``None``: none; an answer of another kind counts as ``cancel``)."""
    if response is None or isinstance(response, mcp_types.ElicitResult):
        return response
    try:
        dumped = response if isinstance(response, dict) else response.model_dump(
            by_alias=True, exclude_none=True, mode="json")
        return mcp_types.ElicitResult.model_validate(dumped)
    except (ValueError, AttributeError):
        return CANCEL


def _retrieve(task: asyncio.Task[Any]) -> None:
    """A held call's outcome that no round took (its client left): logged, not lost."""
    if not task.cancelled() and task.exception() is not None:
        log.debug("a held MCP call failed: %r", task.exception())
