"""Driving a coroutine by hand: its first step run here and now, the rest awaited.

Most handlers on the in-process bus finish without ever waiting. Run to their first wait
by hand (``coroutine.send(None)``), those cost a coroutine and nothing else — no task, no
timer — and only the ones that do wait get what waiting needs: a task of their own
(:mod:`toolmesh.bus.batch`), a deadline that can cancel them (:mod:`toolmesh.rpc.service`).
:func:`resume` then goes on with such a coroutine exactly as ``await`` would have.
"""

from __future__ import annotations

import contextvars
import functools
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any


@types.coroutine
def resume(coroutine: Coroutine[Any, Any, Any], waits_on: Any,
           context: contextvars.Context | None = None) -> Generator[Any, Any, Any]:
    """Go on running ``coroutine``, started by hand and now waiting on ``waits_on`` (what its
    ``send`` returned): ``await resume(...)`` is what ``await coroutine`` would have been from
    the start, and returns what the coroutine returns. ``context``: run each of its steps in
    that context rather than the awaiting task's."""
    send: Callable[[Any], Any]
    throw: Callable[[BaseException], Any]
    if context is None:
        send, throw = coroutine.send, coroutine.throw
    else:
        send = functools.partial(context.run, coroutine.send)
        throw = functools.partial(context.run, coroutine.throw)
    while True:
        try:
            sent = yield waits_on
        except BaseException as e:  # a cancellation, or the awaiting coroutine being closed
            try:
                waits_on = throw(e)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                waits_on = send(sent)
            except StopIteration as stop:
                return stop.value
