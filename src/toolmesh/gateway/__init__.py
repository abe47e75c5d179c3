"""The HTTP/WebSocket gateway (TrustGraph's ``/api/v1``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolmesh.gateway.server import Gateway, GatewayOptions

__all__ = ["Gateway", "GatewayOptions"]


def __getattr__(name: str) -> Any:
    # Lazily: the CLI reads small modules of this package (deadlines, flows) for its options,
    # and should not pay for aiohttp's import on every command.
    if name in __all__:
        from toolmesh.gateway import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
