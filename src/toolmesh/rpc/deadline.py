"""Deadlines that travel with requests, so every internal call ends before its caller's.

A request carries the seconds its caller will still wait in the ``timeout`` property. The
service that handles it works under that deadline (:func:`handling`), and every request it
sends on meanwhile gets the smaller of its own timeout and what is left, less a margin
(:func:`bounded`) — so the innermost call gives up first and its error, not a bare timeout,
reaches the caller. Seconds rather than a clock time, because the processes' clocks need not
agree; the time a message spends in transit is within the margin.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

#: the message property holding the seconds the sender will wait for the answer
PROPERTY = "timeout"

#: the loop time by which the request being handled must be answered
_deadline: ContextVar[float | None] = ContextVar("toolmesh_deadline", default=None)


def margin(timeout: float) -> float:
    """How much sooner than its caller a call gives up: a tenth, at most a second."""
    return min(1.0, timeout / 10)


def remaining() -> float | None:
    """Seconds left to answer the request being handled, or ``None`` outside a deadline."""
    deadline = _deadline.get()
    if deadline is None:
        return None
    return deadline - asyncio.get_running_loop().time()


def bounded(timeout: float | None) -> float | None:
    """``timeout`` shortened to end before the deadline of the request being handled."""
    left = remaining()
    if left is None:
        return timeout
    left -= margin(max(left, 0.0))
    return left if timeout is None else min(timeout, left)


def from_properties(properties: Mapping[str, str]) -> float | None:
    """The sender's timeout from a message's properties, if it sent a usable one."""
    raw = properties.get(PROPERTY)
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        return None
    return seconds if 0 < seconds < float("inf") else None


@contextlib.contextmanager
def handling(timeout: float | None) -> Iterator[None]:
    """Within this block, calls made for the current request end before ``timeout``."""
    if timeout is None:
        yield
        return
    token = _deadline.set(asyncio.get_running_loop().time() + timeout)
    try:
        yield
    finally:
        _deadline.reset(token)
