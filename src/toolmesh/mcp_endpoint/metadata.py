"""How an MCP client learns to authenticate to ``/mcp``: the OAuth protected-resource metadata
(RFC 9728), served at ``/.well-known/oauth-protected-resource[/mcp]``, which a 401 from
``/mcp`` names in its ``WWW-Authenticate`` header (:mod:`toolmesh.gateway.access`)."""

from __future__ import annotations

from aiohttp import web


async def resource_metadata(request: web.Request) -> web.Response:
    """toolmesh's tokens are bearer tokens an admin issues (``toolmesh token create``), not
    OAuth grants: no authorization server is named, and a client is given its token by its
    user."""
    origin = str(request.url.origin())
    return web.json_response({
        "resource": f"{origin}/mcp", "resource_name": "toolmesh",
        "authorization_servers": [], "bearer_methods_supported": ["header"],
        "scopes_supported": ["tools:invoke"]})
