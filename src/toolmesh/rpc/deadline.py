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
import itertools
import math
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from types import TracebackType

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
    due = _deadline.get()
    if due is None:  # not handling a request (or one without a deadline): nearly always
        return timeout
    left = due - asyncio.get_running_loop().time()
    left -= margin(max(left, 0.0))
    return left if timeout is None else min(timeout, left)


#: timeouts as sent, by timeout: the same few are sent over and over
_texts: dict[float, str] = {}


def as_property(timeout: float) -> str:
    """``timeout`` (seconds) as the :data:`PROPERTY` value that carries it."""
    text = _texts.get(timeout)
    if text is None:
        text = f"{max(timeout, 0.001):.3f}"
        if len(_texts) < 256:  # a caller's own timeouts; ones cut by a deadline vary freely
            _texts[timeout] = text
    return text


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


def enter(due: float) -> Token[float | None]:
    """From now on (in this context) the request being handled must be answered by loop time
    ``due``; :func:`leave` with the token ends it. For callers that know ``due`` already
    (a service, per request): :class:`handling` is the ``with`` block for the rest."""
    return _deadline.set(due)


def leave(token: Token[float | None]) -> None:
    """End what :func:`enter` began."""
    _deadline.reset(token)


class handling:  # noqa: N801 - used as a function: ``with deadline.handling(timeout):``
    """Within this block, calls made for the current request end before ``timeout``.

    A class rather than a generator-based context manager: it is entered once per request
    a service handles, and costs a third as much."""

    __slots__ = ("_timeout", "_token")

    def __init__(self, timeout: float | None) -> None:
        self._timeout = timeout
        self._token: Token[float | None] | None = None

    def __enter__(self) -> None:
        if self._timeout is not None:
            self._token = _deadline.set(asyncio.get_running_loop().time() + self._timeout)

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._token is not None:
            _deadline.reset(self._token)


class Deadlines:
    """Many deadlines on one timer of the event loop: for calls, which nearly always end
    long before their deadline.

    A timer per call (``asyncio.timeout``, ``loop.call_at``) is a heap push and, once the
    call ends, a cancelled handle for the loop to pop; with hundreds of calls in flight those
    cost more than the rest of an in-process call. Here a deadline is a dict entry, and one
    timer is armed for the earliest of them. When it fires it expires every deadline that
    has passed and is armed again for the earliest left. A call that ends discards its entry
    and leaves the timer alone, which may then fire once for nothing (calls with equal
    timeouts never re-arm it early: each new deadline is later than the armed one).
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[float, Callable[[], object]]] = {}
        self._keys = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._armed_at = math.inf

    def add(self, due: float, expire: Callable[[], object]) -> int:
        """Call ``expire()`` at loop time ``due`` unless :meth:`discard` comes first; the key
        to discard it with."""
        key = next(self._keys)
        self._entries[key] = (due, expire)
        if due < self._armed_at:
            self._arm(due)
        return key

    def discard(self, key: int) -> None:
        """The deadline ``key`` no longer matters (its call ended)."""
        self._entries.pop(key, None)

    def close(self) -> None:
        """Forget every deadline and disarm the timer."""
        self._entries.clear()
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._armed_at = None, math.inf

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(when, self._fire, when)
        self._armed_at = when

    def _fire(self, armed_at: float) -> None:
        self._timer, self._armed_at = None, math.inf
        # the loop runs a timer up to a clock tick early: what it was armed for has passed
        now = max(armed_at, asyncio.get_running_loop().time())
        passed = [key for key, (due, _) in self._entries.items() if due <= now]
        expires = [self._entries.pop(key)[1] for key in passed]
        if self._entries:
            self._arm(min(due for due, _ in self._entries.values()))
        # Called now, not scheduled: until it is, a deadline's owner may still discard it
        # and count on it not being called (its call is over, its scope gone).
        for expire in expires:
            try:
                expire()
            except Exception as e:  # one failing does not keep the others from expiring
                asyncio.get_running_loop().call_exception_handler(
                    {"message": "a deadline's expiry failed", "exception": e})
