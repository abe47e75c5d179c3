"""Connection and request quotas per token and per workspace, and the admin's reserve.

One scoped token must not be able to hold the gateway: a read-only token once held all 1,024
connections while the admin got 503; nor can anyone without a token: connections that have not
authenticated are strangers, in a pool of their own (:mod:`.strangers`), and leave it when they
authenticate (or close). What follows counts authenticated connections only: at most
``max_connections`` of them (beyond, ``503 server-busy`` and the connection is closed), and:

* a connection counts for the scoped token that last authenticated on it (a REST request's
  bearer token, a WebSocket's upgrade or ``auth`` frame) until it closes; a token may hold at
  most ``token_connections`` at once, and the tokens of one workspace together at most
  ``workspace_connections`` (a token reaching several workspaces counts in each). Beyond:
  ``429 too-many-connections`` and the connection is closed (on the WebSocket, close 1008);
* the last ``admin_share`` of ``max_connections`` is the admin's: a connection that
  authenticates while the rest are taken serves only the gateway's own token (or, with none
  set, local callers); anyone else gets ``503 server-busy`` and the connection is closed. So
  the admin always gets in, whoever holds the rest, authenticated or not;
* a scoped token may have at most ``token_requests`` requests in flight at once, REST and
  WebSocket together (beyond: ``too-many-requests``, 429).

The gateway's own token and local callers (no token set) are not counted against the token
and workspace quotas: they keep tenants from each other and from the operator, not the
operator from its gateway. All tables are bounded by the open connections and the tokens using
them.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator

from aiohttp import web

from toolmesh.errors import ToolmeshError
from toolmesh.gateway.access import IDENTITY
from toolmesh.gateway.auth import Identity
from toolmesh.gateway.bounds import Accepted, Bounds
from toolmesh.gateway.strangers import Expel, Refusal, StrangerPool

__all__ = ["ConnectionQuotas", "QuotaExceeded", "Refusal", "reserved_connections",
           "stranger_limit"]


class QuotaExceeded(ToolmeshError):
    """A token already has its quota of requests in flight (HTTP 429)."""

    type = "too-many-requests"


#: the WebSocket route: its upgrade may authenticate later, with a frame
SOCKET_PATH = "/api/v1/socket"


def reserved_connections(max_connections: int, admin_share: float) -> int:
    """How many of ``max_connections`` are kept for the admin (at least one when the share is
    not zero, and never all of them)."""
    if admin_share <= 0 or max_connections <= 1:
        return 0
    return min(max_connections - 1, max(1, math.floor(max_connections * admin_share)))


def stranger_limit(max_connections: int, stranger_share: float) -> int:
    """How many connections may wait to authenticate at once (0: no pool of their own; at
    least one when the share is not zero)."""
    if stranger_share <= 0 or max_connections <= 0:
        return 0
    return max(1, math.floor(max_connections * stranger_share))


BUSY = Refusal(503, "server-busy", "the gateway's other connections are taken and its last "
               "ones are kept for the admin (the gateway's own token); try again shortly",
               "server-busy: the remaining connections are kept for the admin")


def _full(cap: int) -> Refusal:
    return Refusal(503, "server-busy", f"all {cap} of the gateway's connections are taken "
                   "(--max-connections); try again shortly",
                   "server-busy: every connection is taken")


class _Slot:
    """One open connection: whether it authenticated (and into the admin's reserve), the
    scoped token it counts for, its requests in hand, and how it is closed."""

    __slots__ = ("accepted", "authenticated", "closer", "expelled", "holder", "requests",
                 "reserved")

    def __init__(self, accepted: Accepted | None) -> None:
        self.accepted = accepted
        self.authenticated = False
        self.reserved = False
        self.holder: Identity | None = None
        self.requests = 0
        #: the WebSocket session's own way to close it, with a reason
        self.closer: Expel | None = None
        #: why it was let go of as a stranger while it had no closer (its request in hand)
        self.expelled: Refusal | None = None


class ConnectionQuotas:
    """The quotas of the module docstring, fed by the connection cap (:meth:`opened`,
    :meth:`lost`) and asked at every authentication (:meth:`claim`) and request
    (:meth:`in_flight`). A limit of 0 means no limit."""

    def __init__(self, *, token_connections: int, workspace_connections: int,
                 token_requests: int, max_connections: int = 0, reserve: int = 0,
                 strangers: StrangerPool | None = None) -> None:
        self.token_connections = token_connections
        self.workspace_connections = workspace_connections
        self.token_requests = token_requests
        #: authenticated connections at once (0: not counted here), the last ``reserve`` of
        #: them the admin's
        self.max_connections = max_connections
        self.reserve = reserve
        self.strangers = strangers
        #: connections that authenticated and are open
        self.authenticated = 0
        self._slots: dict[object, _Slot] = {}
        self._by_token: Counter[str] = Counter()
        self._by_workspace: Counter[str] = Counter()
        self._requests: Counter[str] = Counter()

    @classmethod
    def of(cls, bounds: Bounds) -> ConnectionQuotas:
        """The quotas ``bounds`` sets."""
        pool = StrangerPool(
            limit=stranger_limit(bounds.max_connections, bounds.stranger_share),
            per_address=bounds.address_strangers, timeout=bounds.auth_timeout)
        return cls(token_connections=bounds.token_connections,
                   workspace_connections=bounds.workspace_connections,
                   token_requests=bounds.token_requests, max_connections=bounds.max_connections,
                   reserve=reserved_connections(bounds.max_connections, bounds.admin_share),
                   strangers=pool)

    @property
    def accept_cap(self) -> int:
        """Connections the listening socket may hold at once: the authenticated ones and the
        strangers' pool; without a pool, ``max_connections`` for both together."""
        limit = self.strangers.limit if self.strangers is not None else 0
        return self.max_connections + limit if limit else self.max_connections

    @web.middleware
    async def tracking(self, request: web.Request,
                       handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                       ) -> web.StreamResponse:
        """Every request, first: its connection is serving one, so a stranger pushed out or out
        of time meanwhile is closed once it is answered, not in the middle."""
        slot = self._slots.get(request.transport)
        if slot is None:
            return await handler(request)
        slot.requests += 1
        try:
            return await handler(request)
        finally:
            slot.requests -= 1

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                         ) -> web.StreamResponse:
        """Every request after the access checks: its connection counted for its caller, or
        refused and closed. A WebSocket upgrade without a token is let through: its ``auth``
        frame is claimed by the session."""
        identity = request.get(IDENTITY)
        refusal = self.claim(request.transport, identity)
        if refusal is None or (identity is None and request.path == SOCKET_PATH):
            return await handler(request)
        response = web.json_response({"error": {"type": refusal.type,
                                                "message": refusal.message}},
                                     status=refusal.status)
        response.force_close()  # the connection is what is refused
        return response

    # -- connections (CappedSite's ConnectionWatcher) ------------------------------------------

    def opened(self, connection: object, accepted: Accepted) -> None:
        slot = _Slot(accepted)
        if self.strangers is not None:
            refusal = self.strangers.admit(connection, accepted.peer,
                                           lambda refusal: self._expel(slot, refusal))
            if refusal is not None:
                accepted.refuse(refusal.status, refusal.type, refusal.message)
        self._slots[connection] = slot

    def lost(self, connection: object) -> None:
        slot = self._slots.pop(connection, None)
        if slot is None:
            return
        if slot.authenticated:
            self.authenticated -= 1
        elif self.strangers is not None:
            self.strangers.leave(connection)
        if slot.holder is not None:
            self._release(slot.holder)

    def on_expel(self, connection: object | None, closer: Expel) -> Refusal | None:
        """Close ``connection`` with ``closer`` (a WebSocket session's, which says why in its
        own frames) if it is pushed out of the strangers' pool or runs out of time; the
        refusal it already got if it was (the caller closes it)."""
        slot = self._slots.get(connection) if connection is not None else None
        if slot is None or slot.authenticated:
            return None
        if slot.expelled is None:
            slot.closer = closer
        return slot.expelled

    def holding(self, token_id: str) -> int:
        """Connections token ``token_id`` holds now."""
        return self._by_token[token_id]

    def claim(self, connection: object | None, identity: Identity | None) -> Refusal | None:
        """Count ``connection`` for ``identity`` (``None``: not authenticated); the refusal
        when it may not serve it. A connection the cap did not report is not counted."""
        slot = self._slots.get(connection) if connection is not None else None
        if slot is None:
            return None
        if identity is None:
            return BUSY if slot.reserved else None
        held = slot.holder
        if held is not None and held.id == identity.id:
            return None  # the common case: the same token again on its connection
        if not slot.authenticated:
            refusal = self._room(identity)
            if refusal is not None:
                return refusal
        elif slot.reserved and identity.scoped:
            return BUSY
        if identity.scoped:
            refusal = self._over(identity)
            if refusal is not None:
                return refusal
        if not slot.authenticated:
            self._authenticated(connection, slot)
        if not identity.scoped:
            return None
        if held is not None:
            self._release(held)
        slot.holder = identity
        self._by_token[identity.id] += 1
        for workspace in identity.workspaces or ():
            self._by_workspace[workspace] += 1
        return None

    def _room(self, identity: Identity) -> Refusal | None:
        """Whether one more authenticated connection may serve ``identity``."""
        cap = self.max_connections
        if cap <= 0:
            return None
        if identity.scoped and self.authenticated >= cap - self.reserve:
            return BUSY
        return _full(cap) if self.authenticated >= cap else None

    def _authenticated(self, connection: object, slot: _Slot) -> None:
        """A stranger no more: it counts among the authenticated (in the admin's reserve when
        it took one of its places)."""
        if self.strangers is not None:
            self.strangers.leave(connection)
        slot.reserved = bool(self.max_connections) and \
            self.authenticated >= self.max_connections - self.reserve
        slot.authenticated = True
        slot.closer = None
        self.authenticated += 1

    def _expel(self, slot: _Slot, refusal: Refusal) -> None:
        """Close a stranger pushed out or out of time (the pool has let it go): the
        WebSocket's session says why; a request in hand is answered first."""
        if slot.closer is not None:
            slot.closer(refusal)
            return
        slot.expelled = refusal
        if slot.accepted is None:
            return
        if slot.requests:
            slot.accepted.finish()
        else:
            slot.accepted.refuse(refusal.status, refusal.type, refusal.message)

    def _over(self, identity: Identity) -> Refusal | None:
        cap = self.token_connections
        if cap and self._by_token[identity.id] >= cap:
            return Refusal(429, "too-many-connections",
                           f"token {identity.id!r} already holds {cap} connections, its quota: "
                           "reuse them (keep-alive, one WebSocket for many requests) or close "
                           "some", f"too-many-connections: token over its quota of {cap}")
        cap = self.workspace_connections
        for workspace in identity.workspaces or ():
            if cap and self._by_workspace[workspace] >= cap:
                return Refusal(429, "too-many-connections",
                               f"the tokens of workspace {workspace!r} already hold {cap} "
                               "connections, its quota: reuse them or close some",
                               f"too-many-connections: workspace over its quota of {cap}")
        return None

    def _release(self, identity: Identity) -> None:
        _decrement(self._by_token, identity.id)
        for workspace in identity.workspaces or ():
            _decrement(self._by_workspace, workspace)

    # -- requests ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def in_flight(self, identity: Identity | None) -> Iterator[None]:
        """Count one request of ``identity`` while the block runs; :class:`QuotaExceeded`
        when its token already has ``token_requests`` in flight."""
        if identity is None or not identity.scoped or not self.token_requests:
            yield
            return
        if self._requests[identity.id] >= self.token_requests:
            raise QuotaExceeded(f"token {identity.id!r} already has {self.token_requests} "
                                "requests in flight, its quota: wait for some to complete")
        self._requests[identity.id] += 1
        try:
            yield
        finally:
            _decrement(self._requests, identity.id)


def _decrement(counter: Counter[str], key: str) -> None:
    """One less of ``key``; a key at zero is dropped (the tables hold only what is in use)."""
    left = counter[key] - 1
    if left > 0:
        counter[key] = left
    else:
        del counter[key]
