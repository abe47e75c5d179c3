"""The ``Authorization`` of a session's HTTP requests to a server that wants OAuth.

Every request carries the caller's current access token (refreshed first when it has
expired). A 401 to a token is answered by one refresh and one retry; when that fails, the
401 goes back to the session, where it becomes "sign in" (:class:`~toolmesh.mcp_oauth.
errors.LoginRequired`). No exception is raised from here: an error inside the HTTP client
would reach the MCP SDK's transport as a broken connection, not as a refusal.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator

import httpx2

from toolmesh.mcp_oauth.errors import OAuthError
from toolmesh.mcp_oauth.logins import Logins
from toolmesh.mcp_oauth.target import LoginTarget

log = logging.getLogger("toolmesh.mcp_oauth")


class BearerAuth(httpx2.Auth):
    """httpx's auth for one ``(target, principal)``: see the module docstring."""

    def __init__(self, logins: Logins, target: LoginTarget, principal: str) -> None:
        self._logins = logins
        self._target = target
        self._principal = principal

    async def async_auth_flow(self, request: httpx2.Request
                              ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        try:
            token: str | None = await self._logins.access_token(self._target, self._principal)
        except OAuthError as e:  # no grant (any more): the server's 401 says the rest
            log.debug("no token for %s: %s", self._target.item, e.message)
            token = None
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401 or token is None:
            return
        fresh = await self._logins.after_refusal(self._target, self._principal, token)
        if fresh is None:
            return
        await response.aread()
        request.headers["Authorization"] = f"Bearer {fresh}"
        yield request
