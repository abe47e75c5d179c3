"""Connections that have not authenticated yet — strangers — in a pool of their own.

Anyone who reaches the port can open connections, token or not: 1,100 WebSockets that never
authenticated once took all 1,024 slots and locked out every tenant and the admin. So a
connection is a stranger from its accept until it authenticates (a REST request with a valid
token, a WebSocket's upgrade token or ``auth`` frame; without a gateway token, its first
request), and strangers are counted apart from the authenticated connections that
``max_connections``, the admin's reserve and the tenants' quotas count (:mod:`.quotas`):

* at most ``limit`` strangers at once. When the pool is full, a newcomer takes the place of
  the oldest stranger of the address that holds the most strangers — its own address's when
  none holds more, and then only one that has waited :data:`GRACE` seconds (else the newcomer
  is refused: an address that floods the pool cannot churn it). Under contention each address
  so keeps about an equal share, and an address that holds many cannot keep out one that
  holds few: a client that authenticates right after connecting (milliseconds) gets in
  whatever another address holds. Clients that share a flooding address (one NAT, one
  reverse proxy) are refused with it while it floods: let the proxy limit its clients;
* at most ``per_address`` strangers from one address (an IPv6 one by its /64, as the
  throttle counts them); beyond, the newcomer is refused. Off (0) by default: behind a reverse
  proxy or a NAT many clients are one address, and their bursts of connections are
  legitimate — the pool's fair share bounds an address while others need the room;
* a stranger that has not authenticated within ``timeout`` seconds of its accept is closed.

A stranger pushed out or out of time is told why where it can be (:class:`Refusal`: an HTTP
error, or an ``auth-failed`` frame and close 1008 on a WebSocket). The pool holds at most
``limit`` entries (all of them when ``limit`` is 0: the connection cap alone bounds them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from toolmesh.gateway.throttle import address_key

__all__ = ["GRACE", "Refusal", "StrangerPool"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a connection may not serve a caller: answered, then the connection is closed."""

    status: int
    type: str
    message: str
    #: the WebSocket close reason (at most 123 bytes)
    reason: str


#: what the pool calls to close a stranger, with why
Expel = Callable[[Refusal], None]

PUSHED_OUT = Refusal(
    503, "server-busy", "too many connections are waiting to authenticate: this one, the oldest "
    "of the address holding the most, was closed to make room; send the token at once after "
    "connecting (in the first request, or the WebSocket's first frame)",
    "server-busy: too many unauthenticated connections; authenticate at once after connecting")

CROWDED = Refusal(
    503, "server-busy", "too many connections are waiting to authenticate, this address's the "
    "most of them: authenticate those it has (the token in the first request, or the "
    "WebSocket's first frame) or try again shortly",
    "server-busy: too many unauthenticated connections from this address")

#: seconds a stranger is safe from its own address's newcomers: an address flooding the pool
#: is refused then, not let churn it (each place it frees invites the next connection)
GRACE = 0.5


class _Stranger:
    __slots__ = ("address", "expel", "since", "timer")

    def __init__(self, address: str, expel: Expel, since: float) -> None:
        self.address = address
        self.expel = expel
        self.since = since
        self.timer: asyncio.TimerHandle | None = None


class StrangerPool:
    """The strangers of the module docstring; a limit of 0 means none (``timeout``: no
    deadline)."""

    def __init__(self, *, limit: int, per_address: int, timeout: float) -> None:
        self.limit = max(0, limit)
        self.per_address = max(0, per_address)
        self.timeout = timeout
        #: address → its strangers, oldest first
        self._by_address: dict[str, dict[object, _Stranger]] = {}
        self._strangers: dict[object, _Stranger] = {}
        self.timed_out = Refusal(
            408, "auth-timeout", f"no authentication within {timeout:g} s of connecting: send the "
            "token in the first request (Authorization: Bearer <token>) or the WebSocket's "
            "first frame", f"auth-timeout: no authentication within {timeout:g} s")

    def __len__(self) -> int:
        return len(self._strangers)

    def __contains__(self, connection: object) -> bool:
        return connection in self._strangers

    def held_by(self, address: str | None) -> int:
        """Strangers ``address`` holds now."""
        return len(self._by_address.get(address_key(address) or "", ()))

    def admit(self, connection: object, address: str | None, expel: Expel) -> Refusal | None:
        """Count ``connection``, just accepted from ``address``, as a stranger until it
        :meth:`leave`\\ s; ``expel`` closes it if it is pushed out or out of time. The refusal
        of the newcomer itself when its address already holds ``per_address``; else ``None``,
        room made first if the pool was full."""
        key = address_key(address) or ""
        own = self._by_address.get(key)
        if self.per_address and own is not None and len(own) >= self.per_address:
            return Refusal(
                429, "too-many-unauthenticated", f"this address already holds {self.per_address} "
                "connections that have not authenticated, its limit: authenticate them (the "
                "token in the first request, or the WebSocket's first frame) or close some",
                "too-many-unauthenticated: this address holds its limit of unauthenticated "
                "connections")
        loop = asyncio.get_running_loop()
        if self.limit and len(self._strangers) >= self.limit and \
                not self._push_out(key, loop.time()):
            return CROWDED
        stranger = _Stranger(key, expel, loop.time())
        if self.timeout > 0:
            stranger.timer = loop.call_later(self.timeout, self._expire, connection)
        self._strangers[connection] = stranger
        self._by_address.setdefault(key, {})[connection] = stranger
        return None

    def leave(self, connection: object) -> bool:
        """``connection`` authenticated or closed: no longer a stranger. Whether it was."""
        stranger = self._strangers.pop(connection, None)
        if stranger is None:
            return False
        if stranger.timer is not None:
            stranger.timer.cancel()
        own = self._by_address[stranger.address]
        del own[connection]
        if not own:
            del self._by_address[stranger.address]
        return True

    def _push_out(self, newcomer: str, now: float) -> bool:
        """Make room for a stranger from ``newcomer``: the oldest of the address holding the
        most, the newcomer's own first when it holds as many — unless that one is still in its
        :data:`GRACE` (then ``False``: the newcomer is refused)."""
        own = self._by_address.get(newcomer)
        most = max(self._by_address.values(), key=len)
        victims = own if own is not None and len(own) >= len(most) else most
        connection = next(iter(victims))
        stranger = victims[connection]
        if victims is own and now - stranger.since < GRACE:
            return False
        self.leave(connection)
        stranger.expel(PUSHED_OUT)
        return True

    def _expire(self, connection: object) -> None:
        stranger = self._strangers.get(connection)
        if stranger is not None:
            stranger.timer = None
            self.leave(connection)
            stranger.expel(self.timed_out)
