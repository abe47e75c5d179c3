"""What a WebSocket session needs of the gateway that serves it — the seam between
:mod:`.socket` (the sessions) and :mod:`.server` (the gateway, which provides it), so that
neither module needs the other's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from toolmesh.gateway.auth import Identity
from toolmesh.gateway.bounds import Bounds
from toolmesh.gateway.deadlines import Deadlines
from toolmesh.gateway.endpoints import Endpoint
from toolmesh.gateway.quotas import ConnectionQuotas

#: where an endpoint's responses go: ``send(response, final)``
Send = Callable[[dict[str, Any], bool], Awaitable[None]]


class HostOptions(Protocol):
    @property
    def bounds(self) -> Bounds: ...

    @property
    def deadlines(self) -> Deadlines: ...


class Identifier(Protocol):
    async def identify(self, token: str | None, *,
                       peer: str | None = None) -> Identity | None: ...


class SocketHost(Protocol):
    """The gateway, as its WebSocket sessions use it."""

    @property
    def options(self) -> HostOptions: ...

    @property
    def auth(self) -> Identifier: ...

    @property
    def endpoints(self) -> Mapping[str, Endpoint]: ...

    @property
    def quotas(self) -> ConnectionQuotas: ...

    def find(self, service: str) -> Endpoint | None:
        """The endpoint serving ``service``, if any."""

    async def forward(self, endpoint: Endpoint, request: dict[str, Any], *, workspace: str,
                      flow: str | None, timeout: float, send: Send,
                      caller: Identity | None, route: str = "rest",
                      headers: Mapping[str, str] | None = None) -> None:
        """Call ``endpoint`` with ``request``, each response to ``send``."""
