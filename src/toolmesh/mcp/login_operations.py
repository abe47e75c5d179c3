"""The mcp-tool service's login operations, for ``toolmesh mcp login/logout/logins``, the
Workbench's Connect button and the gateway's callback page (docs/mcp-oauth.md):

* ``{"operation": "login", "name": ITEM, "redirect-uri"?: loopback URL, "scope"?: str}`` →
  ``object`` ``{"url", "state", "expires", "item", "host", "issuer"}``: where to send the
  person. ``redirect-uri`` may only be an ``http`` loopback address (the CLI's own
  listener); without one the browser comes back to the gateway's callback.
* ``{"operation": "login-finish", "state", "code"?, "iss"?, "error"?}`` → ``{"item", "host",
  "per", "scope"}``: only the identity that started the login may finish it.
* ``{"operation": "logins"}`` → ``[{"item", "resource", "issuer", "per", "scope",
  "expires", "obtained"}]``: the caller's grants and the workspace's, never a token.
* ``{"operation": "logout", "name": ITEM}`` → ``{"removed": bool}``.

Who asks is the ``actor`` the gateway stamps on every mcp-tool request (a client's own
``actor`` is overwritten); an item signed in per workspace needs ``actor-admin`` for login
and logout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolmesh.config.admin import ACTOR_FIELD
from toolmesh.errors import ServiceError
from toolmesh.mcp.config import McpServer
from toolmesh.mcp.signin import as_caller, target_of
from toolmesh.mcp_oauth import Logins, OAuthError
from toolmesh.mcp_oauth.client_identity import is_loopback_redirect

LOGIN_OPERATIONS = frozenset({"login", "login-finish", "logins", "logout"})
#: set by the gateway beside ``actor``: whether the caller may ``admin``
ADMIN_FIELD = "actor-admin"


def actor_of(request: Mapping[str, Any]) -> str | None:
    """The identity the gateway stamped on ``request`` (``None``: it came another way)."""
    actor = request.get(ACTOR_FIELD)
    return actor if isinstance(actor, str) and actor else None


def _bad(message: str) -> ServiceError:
    return ServiceError(message, type="bad-request")


def _oauth_item(server: McpServer) -> None:
    if server.oauth is None:
        raise _bad(f"MCP item {server.id!r} does not sign in with OAuth (it has no 'auth'): "
                   "there is nothing to log in to")


def _admin_for(server: McpServer, request: Mapping[str, Any], what: str) -> None:
    if server.oauth is not None and server.oauth.per == "workspace" \
            and request.get(ADMIN_FIELD) is not True:
        raise ServiceError(f"MCP item {server.id!r} signs in once for the whole workspace: "
                           f"only an admin may {what} it", type="forbidden")


async def login(logins: Logins, server: McpServer, request: Mapping[str, Any]) -> dict[str, Any]:
    """Start a login of the caller (or, per workspace, of the workspace) for ``server``."""
    _oauth_item(server)
    _admin_for(server, request, "sign in for")
    actor = actor_of(request)
    if actor is None:
        raise _bad("a login needs a toolmesh identity: send it through the gateway")
    redirect = request.get("redirect-uri")
    if redirect is not None and not (isinstance(redirect, str) and is_loopback_redirect(redirect)):
        raise _bad("'redirect-uri' may only be an http loopback address (http://127.0.0.1:PORT/"
                   "...), where `toolmesh mcp login` listens; without one the browser comes "
                   "back to the gateway")
    scope = request.get("scope")
    if scope is not None and not isinstance(scope, str):
        raise _bad("'scope' must be a string of space-separated scopes")
    me = as_caller(server, actor)
    assert me.principal is not None
    started = await logins.start(target_of(me), me.principal, by=actor, redirect_uri=redirect,
                                 more_scope=scope or None)
    return {"url": started.url, "state": started.state, "expires": started.expires_at,
            "item": server.id, "host": started.host, "issuer": started.issuer}


async def finish(logins: Logins, request: Mapping[str, Any]) -> dict[str, Any]:
    """Finish the login the callback's ``state`` names."""
    actor = actor_of(request)
    if actor is None:
        raise _bad("finishing a login needs the toolmesh identity that started it")
    fields = {}
    for name in ("state", "code", "iss", "error"):
        value = request.get(name)
        if value is not None and not isinstance(value, str):
            raise _bad(f"{name!r} must be a string")
        fields[name] = value
    done = await logins.finish(state=fields["state"] or "", by=actor, code=fields["code"],
                               iss=fields["iss"], error=fields["error"])
    return {"item": done.item, "resource": done.resource,
            "per": "workspace" if done.principal == "workspace" else "user",
            "scope": done.scope}


async def listing(logins: Logins, servers: Mapping[str, McpServer], workspace: str,
                  request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The caller's grants and the workspace's, named by the items that use them."""
    actor = actor_of(request)
    principals = ["workspace"] + ([f"user:{actor}"] if actor else [])
    rows = await logins.list(workspace, principals)
    items: dict[str, list[str]] = {}
    for server in servers.values():
        if server.oauth is not None and server.url:
            items.setdefault(target_of(server).resource, []).append(server.id)
    return [{"items": sorted(items.get(row["resource"], [])), **row} for row in rows]


async def logout(logins: Logins, server: McpServer, request: Mapping[str, Any]
                 ) -> dict[str, Any]:
    """Forget the caller's (or the workspace's) grant for ``server``."""
    _oauth_item(server)
    _admin_for(server, request, "sign out of")
    me = as_caller(server, actor_of(request))
    assert me.principal is not None
    try:
        removed = await logins.logout(target_of(me), me.principal)
    except OAuthError as e:
        raise ServiceError(e.message, type=e.type) from None
    return {"removed": removed, "item": server.id}
