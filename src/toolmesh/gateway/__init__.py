"""The HTTP + WebSocket gateway (TrustGraph's /api/v1)."""

from toolmesh.gateway.server import Gateway, GatewayOptions

__all__ = ["Gateway", "GatewayOptions"]
