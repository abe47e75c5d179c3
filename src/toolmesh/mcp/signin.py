"""Signing in during a call: an item whose server wants OAuth gets the caller's grant, and
when there is none, the person behind the dialog is asked to sign in — the call waits and
goes on once they have.

The question is a URL-mode elicitation (:meth:`~toolmesh.mcp.elicitation.Elicitor.sign_in`)
and takes the road every server question takes to the dialog's client: the WebSocket,
``toolmesh agent``, the Workbench, MCP clients through ``/mcp``. A call with nobody to ask (a
direct ``mcp-tool`` request, a caller that does not stream) fails with ``login-required``,
which says how to sign in. A person who says no gives the model a ``login-declined``
observation.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.auth.utils import extract_field_from_www_auth

from toolmesh.mcp.addresses import AddressPolicy
from toolmesh.mcp.config import McpServer
from toolmesh.mcp.elicitation import Asking, Elicitor
from toolmesh.mcp.transports import http_client
from toolmesh.mcp_oauth import (
    BearerAuth,
    LoginDeclined,
    LoginRequired,
    Logins,
    LoginTarget,
    principal_of,
)

log = logging.getLogger("toolmesh.mcp.signin")


def target_of(server: McpServer) -> LoginTarget:
    """The login target of an item that signs in with OAuth."""
    assert server.oauth is not None and server.url is not None
    return LoginTarget(workspace=server.workspace, item=server.id, url=server.url,
                       settings=server.oauth, reach=server.reach)


def http_factory(policy: AddressPolicy) -> Callable[[LoginTarget], Any]:
    """Opens the HTTP client of a sign-in: its connections checked like the session's."""

    @asynccontextmanager
    async def open_http(target: LoginTarget) -> AsyncIterator[httpx2.AsyncClient]:
        async with http_client(policy, target.reach) as http:  # type: ignore[arg-type]
            yield http

    return open_http


def as_caller(server: McpServer, actor: str | None) -> McpServer:
    """``server`` as the caller ``actor`` reaches it: with their own grant's session, or the
    workspace's. :class:`LoginRequired` for a per-user item called with no identity."""
    if server.oauth is None:
        return server
    principal = principal_of(server.oauth, actor)
    if principal is None:
        raise LoginRequired(f"MCP item {server.id!r} signs in per person, and this call names "
                            "no toolmesh identity (it came neither through the gateway nor an "
                            "agent dialog)", item=server.id)
    return server.for_principal(principal)


def wider_scope(challenge: Any) -> str | None:
    """The scopes a 403 ``insufficient_scope`` asks for (MCP's step-up), else ``None``."""
    if not isinstance(challenge, httpx2.Response) or challenge.status_code != 403:
        return None
    if extract_field_from_www_auth(challenge, "error") != "insufficient_scope":
        return None
    return extract_field_from_www_auth(challenge, "scope") or ""


class SignIn:
    """Gets a call its grant, asking its person when there is none (module docstring)."""

    def __init__(self, logins: Logins, elicitor: Elicitor) -> None:
        self.logins = logins
        self.elicitor = elicitor

    def auth_for(self, server: McpServer) -> httpx2.Auth | None:
        """What signs the requests of ``server``'s session (``None``: no OAuth)."""
        if server.oauth is None or server.principal is None:
            return None
        return BearerAuth(self.logins, target_of(server), server.principal)

    async def ensure(self, server: McpServer, asking: Asking | None, *, actor: str | None,
                     challenge: Any = None) -> None:
        """Make sure the caller has a grant for ``server``. ``challenge``: the server's
        refusal of the grant it had (a new sign-in is needed whatever is stored; a 403
        ``insufficient_scope`` asks for more scopes)."""
        if server.oauth is None:
            return
        assert server.principal is not None
        target = target_of(server)
        more = wider_scope(challenge)
        if challenge is None:
            try:
                await self.logins.access_token(target, server.principal)
                return
            except LoginRequired as e:
                needed = e
        else:
            needed = LoginRequired(
                f"MCP server {target.host} (item {server.id!r}) "
                + (f"asks for more access (scope {more!r}): sign in again with "
                   f"`toolmesh mcp login {server.id} --scope '{more}'`" if more is not None else
                   f"refused the sign-in: sign in again with `toolmesh mcp login {server.id}`"),
                item=server.id, scope=more)
        if server.principal == "workspace" or asking is None or asking.key is None \
                or asking.send is None or actor is None:
            raise needed  # nobody to ask here: the message says how
        started = await self.logins.start(
            target, server.principal, by=actor, more_scope=more or None,
            challenge=challenge if isinstance(challenge, httpx2.Response) else None)
        done = self.logins.wait(server.workspace, server.principal, target.resource)
        what = ("more access to" if more else "you to sign in to")
        outcome = await self.elicitor.sign_in(
            server, asking, url=started.url, done=done,
            message=f"The tool {server.remote_name!r} needs {what} {target.host} "
                    f"(signing in at {_host(started.url)}). Open the link to sign in; the "
                    "answer follows once you have.")
        if not done.done():
            done.cancel()
        log.info("sign-in of %s to %s asked during a call: %s", server.principal, target.host,
                 outcome)
        if outcome == "declined":
            raise LoginDeclined(f"the user declined to sign in to {target.host}, so the tool "
                                f"{server.remote_name!r} cannot be used")
        if outcome != "completed":
            raise LoginDeclined(f"the user did not sign in to {target.host} in time, so the "
                                f"tool {server.remote_name!r} could not be used")


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).hostname or url
