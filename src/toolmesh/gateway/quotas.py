"""Connection and request quotas per token and per workspace, and the admin's reserve.

One scoped token must not be able to hold the gateway: a read-only token once held all 1,024
connections while the admin got 503. So, besides the global cap (``max_connections``, counted
by :class:`~toolmesh.gateway.bounds.CappedSite`):

* a connection counts for the scoped token that last authenticated on it (a REST request's
  bearer token, a WebSocket's upgrade or ``auth`` frame) until it closes; a token may hold at
  most ``token_connections`` at once, and the tokens of one workspace together at most
  ``workspace_connections`` (a token reaching several workspaces counts in each). Beyond:
  ``429 too-many-connections`` and the connection is closed (on the WebSocket, close 1008);
* the last ``admin_share`` of ``max_connections`` is the admin's: a connection accepted while
  the rest are taken serves only the gateway's own token (or, with none set, local callers);
  anyone else gets ``503 server-busy`` and the connection is closed. So the admin always gets
  in, whoever holds the rest;
* a scoped token may have at most ``token_requests`` requests in flight at once, REST and
  WebSocket together (beyond: ``too-many-requests``, 429).

The gateway's own token and local callers (no token set) are not counted: the quotas keep
tenants from each other and from the operator, not the operator from its gateway. All tables
are bounded by the open connections (at most ``max_connections``) and the tokens using them.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from aiohttp import web

from toolmesh.errors import ToolmeshError
from toolmesh.gateway.access import IDENTITY
from toolmesh.gateway.auth import Identity
from toolmesh.gateway.bounds import Bounds

__all__ = ["ConnectionQuotas", "QuotaExceeded", "Refusal", "reserved_connections"]


class QuotaExceeded(ToolmeshError):
    """A token already has its quota of requests in flight (HTTP 429)."""

    type = "too-many-requests"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a connection may not serve a caller: answered, then the connection is closed."""

    status: int
    type: str
    message: str
    #: the WebSocket close reason (at most 123 bytes)
    reason: str


#: the WebSocket route: its upgrade may authenticate later, with a frame
SOCKET_PATH = "/api/v1/socket"


def reserved_connections(max_connections: int, admin_share: float) -> int:
    """How many of ``max_connections`` are kept for the admin (at least one when the share is
    not zero, and never all of them)."""
    if admin_share <= 0 or max_connections <= 1:
        return 0
    return min(max_connections - 1, max(1, math.floor(max_connections * admin_share)))


BUSY = Refusal(503, "server-busy", "the gateway's other connections are taken and its last "
               "ones are kept for the admin (the gateway's own token); try again shortly",
               "server-busy: the remaining connections are kept for the admin")


class _Slot:
    """One open connection: whether it was accepted into the admin's reserve, and the
    scoped token it counts for."""

    __slots__ = ("holder", "reserved")

    def __init__(self, reserved: bool) -> None:
        self.reserved = reserved
        self.holder: Identity | None = None


class ConnectionQuotas:
    """The quotas of the module docstring, fed by the connection cap (:meth:`opened`,
    :meth:`lost`) and asked at every authentication (:meth:`claim`) and request
    (:meth:`in_flight`). A limit of 0 means no limit."""

    def __init__(self, *, token_connections: int, workspace_connections: int,
                 token_requests: int) -> None:
        self.token_connections = token_connections
        self.workspace_connections = workspace_connections
        self.token_requests = token_requests
        self._slots: dict[object, _Slot] = {}
        self._by_token: Counter[str] = Counter()
        self._by_workspace: Counter[str] = Counter()
        self._requests: Counter[str] = Counter()

    @classmethod
    def of(cls, bounds: Bounds) -> ConnectionQuotas:
        """The quotas ``bounds`` sets."""
        return cls(token_connections=bounds.token_connections,
                   workspace_connections=bounds.workspace_connections,
                   token_requests=bounds.token_requests)

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

    def opened(self, connection: object, *, reserved: bool) -> None:
        self._slots[connection] = _Slot(reserved)

    def lost(self, connection: object) -> None:
        slot = self._slots.pop(connection, None)
        if slot is not None and slot.holder is not None:
            self._release(slot.holder)

    def holding(self, token_id: str) -> int:
        """Connections token ``token_id`` holds now."""
        return self._by_token[token_id]

    def claim(self, connection: object | None, identity: Identity | None) -> Refusal | None:
        """Count ``connection`` for ``identity`` (``None``: not authenticated); the refusal
        when it may not serve it. A connection the cap did not report is not counted."""
        slot = self._slots.get(connection) if connection is not None else None
        if slot is None:
            return None
        held = slot.holder
        if held is not None and identity is not None and held.id == identity.id:
            return None  # the common case: the same token again on its connection
        if slot.reserved and (identity is None or identity.scoped):
            return BUSY
        if identity is None or not identity.scoped:
            return None
        refusal = self._over(identity)
        if refusal is not None:
            return refusal
        if held is not None:
            self._release(held)
        slot.holder = identity
        self._by_token[identity.id] += 1
        for workspace in identity.workspaces or ():
            self._by_workspace[workspace] += 1
        return None

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
