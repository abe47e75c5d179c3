"""Handlers run a batch to a task: no task per message for handlers that never wait.

A task per message costs about as much as the rest of an in-process request's handling
(its creation, a turn of the event loop to start it, its end). Most handlers on the
in-process bus finish without waiting for anything: a service that answers at once, a
response resolved for its caller. So a :class:`Batches` hands the messages that arrive
before its task starts to that one task, which runs each handler *until it first waits*:

* a handler that finishes there costs a coroutine and a context, no task;
* the first handler that waits keeps the task for the rest of its life (so
  ``asyncio.current_task()``, its cancellation and ``asyncio.timeout`` are its own from
  then on, as with a task of its own), and the messages after it move to a new task.

Every handler runs in a fresh copy of the subscriber's context, as a task of its own would:
context variables one handler sets are never seen by another. What a handler sees as its
current task before it first waits is the batch's: it is alone in it then, and no loop turn
can pass (so no timer, no cancellation) before it either finishes or waits.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

from toolmesh.coroutines import resume

Run = Callable[[Any], Coroutine[Any, Any, None]]


class Batches:
    """Runs ``run(item)`` for every :meth:`add`-ed item, a batch per task (see the module
    docstring); :meth:`wait` for every task started so far."""

    def __init__(self, run: Run) -> None:
        self._run = run
        # the subscriber's context: each handler gets a copy, not the sender's
        self._context = contextvars.copy_context()
        # the batch whose task has not started yet: items added now join it
        self._pending: list[Any] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, item: Any) -> None:
        """Run ``run(item)`` soon (on the next turn of the loop at the latest)."""
        pending = self._pending
        if pending is None:
            pending = self._pending = []
            self._start(pending)
        pending.append(item)

    def _start(self, batch: list[Any]) -> None:
        # held here while it runs (the loop keeps only a weak reference)
        self._tasks.add(asyncio.get_running_loop().create_task(self._drive(batch)))

    async def _drive(self, batch: list[Any]) -> None:
        if self._pending is batch:
            self._pending = None  # from now on items start a batch of their own
        try:
            for i, item in enumerate(batch):
                context = self._context.copy()
                coroutine = self._run(item)
                try:
                    waits_on = context.run(coroutine.send, None)
                except StopIteration:
                    continue  # finished at once: the next one, in this same task
                except BaseException:
                    self._hand_on(batch, i + 1)
                    raise
                # it waits: the task is now its own; the rest of the batch goes on elsewhere
                self._hand_on(batch, i + 1)
                await resume(coroutine, waits_on, context)
                return
        finally:
            self._tasks.discard(asyncio.current_task())  # type: ignore[arg-type]

    def _hand_on(self, batch: list[Any], start: int) -> None:
        if start < len(batch):
            self._start(batch[start:])

    async def wait(self) -> None:
        """Wait until every batch started so far (and every one it handed on to) is done."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
