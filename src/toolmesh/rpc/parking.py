"""Requests in hand that wait only for a person: a stop lets them go at once.

A dialog whose call waits for a person's approval can hold its request for many minutes. A
stop that drained it would wait out its whole drain time for nothing: the dialog is kept in
its journal and taken up after the restart (docs/approvals.md). So the code that waits for a
person says so (:func:`for_a_person`), the parts of a handling that do work say so
(:func:`hold`, :func:`working`: a tool call, until its result is recorded), and a handling is
*parked* while each part that works waits for a person, and one does. Its owner (:class:`Parked`, one per service) hears
each change: once the owner stops, a parked handling is cancelled at once, and one that parks
later is cancelled when it parks. The others drain as before.

The handling is found through a context variable the owner sets around it
(:meth:`Parked.enter`); tasks the handler starts inherit it. Code that runs outside any
handling (a test's loop, a direct call) parks nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any

log = logging.getLogger("toolmesh.service")


class Handling:
    """One request in hand (its task), and how many of its parts wait for a person or work."""

    __slots__ = ("_changed", "_waiting", "_working", "task")

    def __init__(self, task: asyncio.Task[Any] | None,
                 changed: Callable[[Handling], None]) -> None:
        self.task = task
        self._changed = changed
        self._waiting = 0
        self._working = 0

    @property
    def parked(self) -> bool:
        """Whether something waits for a person and nothing else works."""
        return self._waiting > 0 and self._waiting >= self._working

    def _add(self, waiting: int, working: int) -> None:
        self._waiting += waiting
        self._working += working
        self._changed(self)


_current: ContextVar[Handling | None] = ContextVar("toolmesh_handling", default=None)


@contextmanager
def for_a_person() -> Iterator[None]:
    """Around a wait that only a person ends (an approval): the handling may be let go."""
    handling = _current.get()
    if handling is None:
        yield
        return
    handling._add(1, 0)
    try:
        yield
    finally:
        handling._add(-1, 0)


def hold() -> Callable[[], None]:
    """Begin a part of a handling that works (a tool call, from its start until its result is
    recorded; a wait for a person within it included); returns the call that ends it (once).
    While any part works that does not wait for a person, the handling is not parked."""
    handling = _current.get()
    if handling is None:
        return _nothing
    handling._add(0, 1)
    ended = False

    def end() -> None:
        nonlocal ended
        if not ended:
            ended = True
            handling._add(0, -1)

    return end


def _nothing() -> None:
    return None


@contextmanager
def working() -> Iterator[None]:
    """:func:`hold` around a block."""
    end = hold()
    try:
        yield
    finally:
        end()


class Parked:
    """The parked handlings of one owner, and its stop's letting go of them."""

    def __init__(self) -> None:
        self._parked: set[Handling] = set()
        #: the tasks cancelled because they were parked when (or after) the owner stopped
        self._let_go: set[asyncio.Task[Any]] = set()
        self.stopping = False

    def enter(self, task: asyncio.Task[Any] | None = None) -> Token[Handling | None]:
        """Make a handling of this owner in the current context, whose task is ``task``
        (``None``: learnt later, by :func:`own`, or the current one when it first parks —
        only its first step, before any task it starts runs, can park before then);
        :meth:`leave` with the token when it ends. Cheap: every request a service takes is
        entered."""
        return _current.set(Handling(task, self._changed))

    @staticmethod
    def own(task: asyncio.Task[Any]) -> None:
        """The handling of the current context runs as ``task`` from now on."""
        handling = _current.get()
        if handling is not None:
            handling.task = task

    def leave(self, token: Token[Handling | None]) -> None:
        handling = _current.get()
        if handling is not None and (handling._waiting or handling.task in self._let_go):
            self._parked.discard(handling)
            self._let_go.discard(handling.task)  # type: ignore[arg-type]
        _current.reset(token)

    def let_go(self, owner: str) -> int:
        """``owner`` stops: cancel every parked handling now (logged), and each that parks
        later; how many were cancelled now."""
        self.stopping = True
        parked = [h for h in self._parked if h.task not in self._let_go]
        for handling in parked:
            self._release(handling)
        if parked:
            log.info("%s: %d request(s) waiting for a person let go without draining (what "
                     "they did is kept where the service keeps it)", owner, len(parked))
        return len(parked)

    def was_let_go(self, task: asyncio.Task[Any]) -> bool:
        """Whether ``task`` was cancelled because it waited only for a person."""
        return task in self._let_go

    def _changed(self, handling: Handling) -> None:
        if handling.task is None:  # its first step: the current task is its own
            handling.task = asyncio.current_task()
        if not handling.parked:
            self._parked.discard(handling)
            return
        self._parked.add(handling)
        if self.stopping:
            self._release(handling)

    def _release(self, handling: Handling) -> None:
        if handling.task is not None and handling.task not in self._let_go \
                and not handling.task.done():
            self._let_go.add(handling.task)
            handling.task.cancel()
