"""The OAuth fixtures behave as an MCP client meets them: the SDK's own OAuth client signs in
(without a browser) and calls the protected server; the 401, the metadata, the faults,
revocation, expiry and the step-up are what a client has to handle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from tests.browser import chromium, chromium_missing
from tests.mcp_oauth.authserver import AuthServer, missing_node
from tests.mcp_oauth.browser_login import log_in_with_browser
from tests.mcp_oauth.browserless import log_in, redirect_params
from tests.mcp_oauth.protected_server import ProtectedServer
from tests.mcp_oauth.tokens import REDIRECT_URI, TokenClient, TokenError

# slow (tests/conftest.py): the npm oidc-provider (and Chromium), on Node
pytestmark = pytest.mark.slow

if (_missing := missing_node()) is not None:
    pytest.skip(_missing, allow_module_level=True)

#: what an MCP POST must accept
ACCEPT = {"accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "test", "version": "0"}}}
WRITE_NOTE = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "write_note", "arguments": {"text": "hi"}}}


@pytest.fixture(scope="module")
def auth() -> Iterator[AuthServer]:
    with AuthServer() as server:
        yield server


@pytest.fixture
async def server(auth: AuthServer) -> AsyncIterator[ProtectedServer]:
    async with ProtectedServer(auth) as protected:
        yield protected


class MemoryStorage:
    """The SDK client's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def sdk_oauth(url: str, *, username: str, redirects: list[dict[str, str]]) -> OAuthClientProvider:
    """The SDK's OAuth client for ``url``, whose person is ``username`` (signing in without a
    browser); each redirect back is noted in ``redirects``."""
    waiting: asyncio.Queue[str] = asyncio.Queue()

    async def redirect_handler(authorization_url: str) -> None:
        await waiting.put(await log_in(authorization_url, username=username))

    async def callback_handler() -> AuthorizationCodeResult:
        back = redirect_params(await waiting.get())
        redirects.append(back)
        return AuthorizationCodeResult(code=back["code"], state=back.get("state"),
                                       iss=back.get("iss"))

    metadata = OAuthClientMetadata(
        redirect_uris=[REDIRECT_URI], client_name="toolmesh fixture test",  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"], response_types=["code"])
    return OAuthClientProvider(url, metadata, MemoryStorage(), redirect_handler, callback_handler)


async def post_mcp(url: str, body: dict[str, Any], token: str | None = None) -> httpx2.Response:
    headers = {**ACCEPT, **({"authorization": f"Bearer {token}"} if token else {})}
    async with httpx2.AsyncClient(timeout=10) as client:
        return await client.post(url, json=body, headers=headers)


async def test_the_sdk_client_signs_in_calls_and_steps_up(auth: AuthServer,
                                                           server: ProtectedServer) -> None:
    redirects: list[dict[str, str]] = []
    oauth = sdk_oauth(server.url, username="alice", redirects=redirects)
    async with (httpx2.AsyncClient(auth=oauth, timeout=20) as http,
                Client(streamable_http_client(server.url, http_client=http)) as client):
        whoami = await client.call_tool("whoami", {})
        assert whoami.content[0].text == "alice (scopes: mcp:tools)"  # type: ignore[union-attr]
        # notes:write was not asked for: 403 insufficient_scope, a second authorization
        noted = await client.call_tool("write_note", {"text": "buy milk"})
        assert noted.content[0].text == "noted for alice"  # type: ignore[union-attr]
    assert [r["iss"] for r in redirects] == [auth.issuer, auth.issuer]  # RFC 9207
    assert server.calls == [("alice", "whoami"), ("alice", "write_note")]
    assert server.notes == [("alice", "buy milk")]


async def test_without_a_token_401_points_at_the_resource_metadata(
        auth: AuthServer, server: ProtectedServer) -> None:
    response = await post_mcp(server.url, INITIALIZE)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert (f'resource_metadata="http://127.0.0.1:{server.port}'
            '/.well-known/oauth-protected-resource/mcp"') in challenge
    async with httpx2.AsyncClient() as client:
        metadata = (await client.get(server.metadata_url)).json()
    assert metadata["resource"] == server.url == f"http://127.0.0.1:{server.port}/mcp"
    assert metadata["authorization_servers"] == [auth.issuer]
    assert metadata["scopes_supported"] == ["mcp:tools"]
    assert server.calls == []


async def test_the_authorization_server_metadata(auth: AuthServer) -> None:
    rfc8414 = await auth.metadata()
    assert rfc8414 == await auth.metadata(rfc8414=False)
    assert rfc8414["issuer"] == auth.issuer
    assert rfc8414["code_challenge_methods_supported"] == ["S256"]
    assert rfc8414["authorization_response_iss_parameter_supported"] is True
    assert rfc8414["registration_endpoint"] == auth.registration_endpoint
    assert rfc8414["introspection_endpoint"] == auth.introspection_endpoint
    assert rfc8414["revocation_endpoint"] == auth.revocation_endpoint
    assert rfc8414["response_types_supported"] == ["code"]
    assert {"mcp:tools", "notes:write"} <= set(rfc8414["scopes_supported"])


async def test_no_s256_leaves_only_plain_in_both_documents() -> None:
    async with AuthServer(no_s256=True) as faulty:
        for document in (await faulty.metadata(), await faulty.metadata(rfc8414=False)):
            assert document["code_challenge_methods_supported"] == ["plain"]
        await faulty.configure(no_s256=False)  # and it can be turned off at run time
        assert (await faulty.metadata())["code_challenge_methods_supported"] == ["S256"]


async def test_wrong_iss_sends_the_client_another_issuer() -> None:
    async with AuthServer(wrong_iss=True, resources={"http://127.0.0.1:9/mcp": "mcp:tools"}
                          ) as faulty:
        tokens = TokenClient(faulty)
        authorization = await tokens.start(resource="http://127.0.0.1:9/mcp")
        back = redirect_params(await log_in(authorization.url, username="mallory"))
        assert back["code"] and back["state"] == authorization.state
        assert back["iss"] != faulty.issuer


async def test_wrong_resource_metadata_names_another_resource(auth: AuthServer) -> None:
    async with ProtectedServer(auth, wrong_resource=True) as faulty:
        async with httpx2.AsyncClient() as client:
            metadata = (await client.get(faulty.metadata_url)).json()
        assert metadata["resource"] == f"http://127.0.0.1:{faulty.port}/other"
        assert metadata["resource"] != faulty.url


async def test_a_token_for_another_resource_is_refused(auth: AuthServer,
                                                       server: ProtectedServer) -> None:
    other = f"http://127.0.0.1:{server.port}/elsewhere"
    await auth.allow_resource(other)
    tokens = TokenClient(auth)
    elsewhere = await tokens.authorize(username="bob", resource=other)
    assert (await post_mcp(server.url, INITIALIZE, elsewhere.access_token)).status_code == 401
    here = await tokens.authorize(username="bob", resource=server.url)
    assert (await post_mcp(server.url, INITIALIZE, here.access_token)).status_code == 200
    # a resource the authorization server does not know is refused there
    unknown = await tokens.start(resource="http://127.0.0.1:9/unknown")
    back = redirect_params(await log_in(unknown.url, username="bob"))
    assert back["error"] == "invalid_target" and "code" not in back


async def test_write_note_without_its_scope_is_a_403_step_up(
        auth: AuthServer, server: ProtectedServer) -> None:
    narrow = await TokenClient(auth).authorize(username="carol", resource=server.url)
    response = await post_mcp(server.url, WRITE_NOTE, narrow.access_token)
    assert response.status_code == 403
    assert response.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope", scope="mcp:tools notes:write", '
        f'resource_metadata="{server.metadata_url}"')
    assert server.notes == []


async def test_revoked_tokens_are_refused(auth: AuthServer, server: ProtectedServer) -> None:
    tokens = TokenClient(auth)
    dave = await tokens.authorize(username="dave", resource=server.url)
    erin = await tokens.authorize(username="erin", resource=server.url)
    assert (await post_mcp(server.url, INITIALIZE, dave.access_token)).status_code == 200
    assert await auth.revoke("dave") == 2  # an access token and a refresh token
    assert (await post_mcp(server.url, INITIALIZE, dave.access_token)).status_code == 401
    assert dave.refresh_token is not None
    with pytest.raises(TokenError) as refused:
        await tokens.refresh(dave.refresh_token, resource=server.url)
    assert refused.value.answer["error"] == "invalid_grant"
    # nobody else's; a client revokes its own token by RFC 7009
    assert (await post_mcp(server.url, INITIALIZE, erin.access_token)).status_code == 200
    await tokens.revoke(erin.access_token)
    assert (await post_mcp(server.url, INITIALIZE, erin.access_token)).status_code == 401


async def test_an_expired_token_is_refused_and_refresh_rotates() -> None:
    async with (AuthServer(access_token_ttl=2) as short,
                ProtectedServer(short) as server):
        tokens = TokenClient(short)
        first = await tokens.authorize(username="frank", resource=server.url)
        assert first.expires_in == 2 and first.refresh_token
        assert (await post_mcp(server.url, INITIALIZE, first.access_token)).status_code == 200
        await asyncio.sleep(3)  # let the token expire (exp is in whole seconds)
        assert (await post_mcp(server.url, INITIALIZE, first.access_token)).status_code == 401
        second = await tokens.refresh(first.refresh_token, resource=server.url)
        assert second.refresh_token not in (None, first.refresh_token)  # rotated
        assert (await post_mcp(server.url, INITIALIZE, second.access_token)).status_code == 200
        with pytest.raises(TokenError):  # the old refresh token was used up
            await tokens.refresh(first.refresh_token, resource=server.url)


async def test_the_same_browser_signs_in_once(auth: AuthServer) -> None:
    resource = "http://127.0.0.1:9/mcp"
    await auth.allow_resource(resource)
    tokens = TokenClient(auth)
    jar = httpx2.Cookies()
    pages: list[list[str]] = [[], []]
    for answered in pages:
        authorization = await tokens.start(resource=resource)
        await tokens.finish(authorization, await log_in(
            authorization.url, username="grace", cookies=jar, answered=answered))
    assert pages == [["login", "consent"], []]


@pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))
async def test_signing_in_with_a_real_browser(auth: AuthServer,
                                              server: ProtectedServer) -> None:
    tokens = TokenClient(auth)
    authorization = await tokens.start(resource=server.url)
    async with chromium() as browser:
        page = await browser.new_page()
        redirected_to = await log_in_with_browser(page, authorization.url, username="heidi")
    assert redirect_params(redirected_to)["iss"] == auth.issuer
    heidi = await tokens.finish(authorization, redirected_to)
    async with (httpx2.AsyncClient(headers={"authorization": f"Bearer {heidi.access_token}"},
                                   timeout=20) as http,
                Client(streamable_http_client(server.url, http_client=http)) as client):
        whoami = await client.call_tool("whoami", {})
    assert whoami.content[0].text == "heidi (scopes: mcp:tools)"  # type: ignore[union-attr]
    assert server.calls == [("heidi", "whoami")]
