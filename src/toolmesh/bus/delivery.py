"""The acknowledgement policy shared by every backend (see :mod:`toolmesh.bus.base`)."""

from __future__ import annotations

import inspect
import logging
from contextvars import ContextVar
from typing import Literal, cast

from toolmesh.bus.base import Handler, InlineHandler, Message, Requeue
from toolmesh.telemetry.metrics import BusCounts

log = logging.getLogger("toolmesh.bus")

Outcome = Literal["ack", "requeue", "drop"]

#: how many times the message being handled has been delivered, this time included (set
#: only when more than once)
_deliveries: ContextVar[int] = ContextVar("toolmesh_deliveries", default=1)


def redelivered() -> bool:
    """Whether the broker says the message the calling handler is handling was delivered
    before, to a consumer that failed or vanished (what work recorded for it may exist)."""
    return _deliveries.get() > 1


def deliveries() -> int:
    """How many times the message the calling handler is handling has been delivered, this
    time included, as far as the bus can tell (1: the first time; a broker that only says
    "delivered before" makes it at least 2). A service answers a message delivered too often
    with an error instead of handling it again (:mod:`toolmesh.rpc.service`)."""
    return _deliveries.get()


def _count(redelivered: bool, deliveries: int | None) -> int:
    return deliveries if deliveries is not None else 2 if redelivered else 1


async def run_handler(handler: Handler, message: Message, counts: BusCounts, *,
                      redelivered: bool = False, deliveries: int | None = None) -> Outcome:
    """Run ``handler`` on ``message`` and say what to do with the message afterwards;
    ``counts``: the consuming queue's.

    ``redelivered``: the broker says the message was delivered before (to a consumer that
    failed or vanished); counted apart in the bus metrics. ``deliveries``: how many times,
    this one included, when the bus knows (else 2 if ``redelivered``, or 1)."""
    count = _count(redelivered, deliveries)
    (counts.redelivered if count > 1 else counts.consumed)()
    token = _deliveries.set(count) if count > 1 else None
    try:
        await handler(message)
    except Requeue:
        counts.requeued()
        return "requeue"
    except Exception:
        return _dropped(message, counts)
    finally:
        if token is not None:
            _deliveries.reset(token)
    return "ack"


def run_inline(handler: InlineHandler, message: Message, counts: BusCounts, *,
               redelivered: bool = False, deliveries: int | None = None) -> Outcome:
    """:func:`run_handler` for an inline handler: called, not awaited (see
    :meth:`toolmesh.bus.base.Bus.subscribe`)."""
    count = _count(redelivered, deliveries)
    (counts.redelivered if count > 1 else counts.consumed)()
    token = _deliveries.set(count) if count > 1 else None
    try:
        call_inline(handler, message)
    except Requeue:
        counts.requeued()
        return "requeue"
    except Exception:
        return _dropped(message, counts)
    finally:
        if token is not None:
            _deliveries.reset(token)
    return "ack"


def call_inline(handler: InlineHandler, message: Message) -> None:
    """Call ``handler``; :class:`TypeError` if it turns out to be async after all."""
    result = handler(message)
    if result is not None and inspect.isawaitable(result):
        # subscribe() refuses async functions; an object with an async __call__ slips by
        if inspect.iscoroutine(result):
            result.close()  # never awaited: closed, so no "never awaited" warning either
        raise TypeError(f"the inline handler {handler!r} returned an awaitable; inline "
                        "handlers are plain functions")


def _dropped(message: Message, counts: BusCounts) -> Outcome:
    # Never let one message take the consumer down; the traceback is the bug report.
    log.exception("handler failed on a message from %s (id=%s); message dropped",
                  counts.queue, message.id)
    counts.dropped()
    return "drop"


def checked_handler(handler: Handler | InlineHandler, *, inline: bool) -> Handler | InlineHandler:
    """``handler`` as subscribe() was given it, or :class:`TypeError` if ``inline`` says it is
    a plain function and it is an async one (it would never run)."""
    if inline and inspect.iscoroutinefunction(handler):
        raise TypeError(f"inline=True takes a plain function, not the async {handler!r}")
    return handler


def as_handler(handler: Handler | InlineHandler, *, inline: bool) -> Handler:
    """The async handler a backend that runs every handler as a task calls: ``handler``
    itself, or for an inline one, a coroutine function that calls it.

    For the brokers' backends: their deliveries arrive on tasks of their own anyway, so an
    inline handler saves them nothing, and they accept ``inline=True`` through this."""
    checked_handler(handler, inline=inline)
    if not inline:
        return cast(Handler, handler)
    plain = cast(InlineHandler, handler)

    async def call(message: Message) -> None:
        call_inline(plain, message)

    return call
