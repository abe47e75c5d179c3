"""The token endpoint: a code exchanged (with its PKCE verifier), a refresh (whose new refresh
token replaces the old: rotation), client credentials. Each sends RFC 8707's ``resource``
when the login has one, and authenticates the client as its registration says."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx2
from mcp.shared.auth import OAuthToken
from pydantic import ValidationError

from toolmesh.mcp_oauth.errors import LoginRequired, OAuthError
from toolmesh.urls import mask_url


@dataclass(frozen=True, kw_only=True)
class Client:
    """The client toolmesh is at one authorization server."""

    client_id: str
    client_secret: str | None = None
    #: ``client_secret_basic``, ``client_secret_post`` or ``none``
    auth_method: str = "none"

    def to_json(self) -> dict[str, Any]:
        return {"client_id": self.client_id, "client_secret": self.client_secret,
                "auth_method": self.auth_method}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Client:
        return cls(client_id=value["client_id"], client_secret=value.get("client_secret"),
                   auth_method=value.get("auth_method") or "none")


@dataclass(frozen=True, kw_only=True)
class Tokens:
    """What a token response gave."""

    access_token: str
    refresh_token: str | None
    expires_at: float | None
    scope: str | None


async def exchange_code(http: httpx2.AsyncClient, *, token_endpoint: str, client: Client,
                        code: str, verifier: str, redirect_uri: str,
                        resource: str | None) -> Tokens:
    """The tokens for an authorization ``code``."""
    return await _request(http, token_endpoint, client, {
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
        "code_verifier": verifier}, resource=resource, what="exchanging the sign-in code")


async def refresh(http: httpx2.AsyncClient, *, token_endpoint: str, client: Client,
                  refresh_token: str, resource: str | None, scope: str | None) -> Tokens:
    """New tokens for a refresh token; the old refresh token is kept only when the server
    does not rotate it. :class:`LoginRequired` when the server refuses it (revoked, expired:
    the person must sign in again)."""
    data = {"grant_type": "refresh_token", "refresh_token": refresh_token}
    tokens = await _request(http, token_endpoint, client, data, resource=resource,
                            what="refreshing the sign-in", refused=LoginRequired)
    if tokens.refresh_token is None or tokens.scope is None:
        # RFC 6749 §6: an answer without them leaves them as they were
        tokens = Tokens(access_token=tokens.access_token,
                        refresh_token=tokens.refresh_token or refresh_token,
                        expires_at=tokens.expires_at, scope=tokens.scope or scope)
    return tokens


async def client_credentials(http: httpx2.AsyncClient, *, token_endpoint: str, client: Client,
                             scope: str | None, resource: str | None) -> Tokens:
    """Tokens for the client itself (machine to machine: no person signs in)."""
    data = {"grant_type": "client_credentials"}
    if scope:
        data["scope"] = scope
    return await _request(http, token_endpoint, client, data, resource=resource,
                          what="getting a token with the client's credentials")


async def _request(http: httpx2.AsyncClient, url: str, client: Client, data: dict[str, str],
                   *, resource: str | None, what: str,
                   refused: type[OAuthError] = OAuthError) -> Tokens:
    if resource is not None:
        data["resource"] = resource  # RFC 8707
    headers = {"Content-Type": "application/x-www-form-urlencoded",
               "Accept": "application/json"}
    data["client_id"] = client.client_id
    if client.client_secret and client.auth_method == "client_secret_basic":
        pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif client.client_secret:
        data["client_secret"] = client.client_secret
    try:
        response = await http.post(url, data=data, headers=headers)
        body = await response.aread()
    except httpx2.HTTPError as e:
        raise OAuthError(f"{what}: the token endpoint {mask_url(url)} could not be reached "
                         f"({type(e).__name__})") from None
    if response.status_code not in (200, 201):
        raise refused(f"{what}: the authorization server refused ({response.status_code}"
                      f"{_oauth_error(body)})")
    try:
        token = OAuthToken.model_validate_json(body)
    except ValidationError:
        raise OAuthError(f"{what}: the token endpoint {mask_url(url)} answered no usable "
                         "token") from None
    expires = time.time() + token.expires_in if token.expires_in else None
    return Tokens(access_token=token.access_token, refresh_token=token.refresh_token,
                  expires_at=expires, scope=token.scope)


def _oauth_error(body: bytes) -> str:
    """``: <error> (<description>)`` of an OAuth error answer, for the message."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return ""
    if not isinstance(value, dict) or not isinstance(value.get("error"), str):
        return ""
    described = value.get("error_description")
    tail = f" ({described[:200]})" if isinstance(described, str) and described else ""
    return f": {value['error'][:80]}{tail}"
