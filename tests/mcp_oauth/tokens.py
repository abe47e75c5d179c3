"""Tokens from an :class:`~tests.mcp_oauth.authserver.AuthServer` without an MCP client: a
minimal OAuth 2.1 client (dynamic registration, authorization code with PKCE S256 and
``resource``, refresh) for tests that need a token of their own making — one for another
resource, one to revoke, one to let expire.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx2

from tests.mcp_oauth.authserver import AuthServer
from tests.mcp_oauth.browserless import log_in, redirect_params

__all__ = ["REDIRECT_URI", "Authorization", "TokenClient", "TokenError", "Tokens"]

#: a loopback callback nothing listens on (:func:`log_in` returns the redirect unrequested, a
#: browser's request is intercepted): a privileged port no test binds, and not one of
#: Chromium's "unsafe" ports (1, 7, 9, ...), which it refuses to navigate to at all
REDIRECT_URI = "http://127.0.0.1:8/callback"


@dataclass
class Tokens:
    """A token response: ``access_token``, ``refresh_token`` (or ``None``), ``scope``,
    ``expires_in``, and the whole answer in ``raw``."""

    access_token: str
    refresh_token: str | None
    scope: str
    expires_in: int | None
    raw: dict[str, Any]

    @classmethod
    def of(cls, answer: dict[str, Any]) -> Tokens:
        return cls(answer["access_token"], answer.get("refresh_token"), answer.get("scope", ""),
                   answer.get("expires_in"), answer)


@dataclass(frozen=True)
class Authorization:
    """One authorization request of a :class:`TokenClient`: the ``url`` to open, and what
    :meth:`TokenClient.finish` checks and sends."""

    url: str
    resource: str
    state: str
    verifier: str


class TokenClient:
    """A public client (``token_endpoint_auth_method: none``) registered at ``auth`` on first
    use, allowed the code and refresh-token grants."""

    def __init__(self, auth: AuthServer, *, redirect_uri: str = REDIRECT_URI) -> None:
        self.auth = auth
        self.redirect_uri = redirect_uri
        self.client_id = ""

    async def register(self) -> str:
        if not self.client_id:
            answer = await self.auth.register_client(
                client_name="tests.mcp_oauth.tokens", redirect_uris=[self.redirect_uri],
                grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                token_endpoint_auth_method="none")
            self.client_id = answer["client_id"]
        return self.client_id

    async def start(self, *, resource: str, scope: str = "mcp:tools") -> Authorization:
        """A fresh authorization request (PKCE S256, ``state``) for ``resource`` and
        ``scope``: its URL, to hand to :func:`log_in` or a browser, and what finishing needs."""
        client_id = await self.register()
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(
            hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        state = secrets.token_urlsafe(16)
        url = self.auth.authorization_endpoint + "?" + urlencode({
            "response_type": "code", "client_id": client_id, "redirect_uri": self.redirect_uri,
            "scope": scope, "resource": resource, "state": state,
            "code_challenge": challenge, "code_challenge_method": "S256"})
        return Authorization(url, resource, state, verifier)

    async def finish(self, authorization: Authorization, redirected_to: str) -> Tokens:
        """Exchange the code of the redirect (after checking its ``state``) for tokens."""
        back = redirect_params(redirected_to)
        if back.get("state") != authorization.state or "code" not in back:
            raise RuntimeError(f"authorization failed: {back}")
        return await self._token({
            "grant_type": "authorization_code", "code": back["code"],
            "redirect_uri": self.redirect_uri, "code_verifier": authorization.verifier,
            "resource": authorization.resource})

    async def authorize(self, *, username: str, resource: str, scope: str = "mcp:tools",
                        cookies: httpx2.Cookies | None = None) -> Tokens:
        """Send ``username`` through the authorization (sign-in and consent, without a
        browser) and exchange the code: tokens for ``resource`` with ``scope``."""
        authorization = await self.start(resource=resource, scope=scope)
        return await self.finish(authorization, await log_in(
            authorization.url, username=username, cookies=cookies))

    async def refresh(self, refresh_token: str, *, resource: str) -> Tokens:
        """Exchange ``refresh_token`` (it is rotated: the answer carries the next one)."""
        return await self._token({"grant_type": "refresh_token",
                                  "refresh_token": refresh_token, "resource": resource})

    async def revoke(self, token: str) -> None:
        """Revoke ``token`` (access or refresh) the standard way, RFC 7009, as its client."""
        async with httpx2.AsyncClient(timeout=10) as client:
            response = await client.post(self.auth.revocation_endpoint, data={
                "token": token, "client_id": await self.register()})
        response.raise_for_status()

    async def _token(self, form: dict[str, str]) -> Tokens:
        async with httpx2.AsyncClient(timeout=10) as client:
            response = await client.post(self.auth.token_endpoint,
                                         data={**form, "client_id": await self.register()})
        if response.status_code != 200:
            raise TokenError(response.status_code, response.json())
        return Tokens.of(response.json())


class TokenError(RuntimeError):
    """The token endpoint refused: ``status`` and its JSON ``answer`` (``error``, ...)."""

    def __init__(self, status: int, answer: dict[str, Any]) -> None:
        super().__init__(f"token endpoint answered {status}: {answer}")
        self.status = status
        self.answer = answer
