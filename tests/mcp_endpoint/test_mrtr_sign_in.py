"""A sign-in link for a 2026-07-28 MCP client at ``/mcp``: the call's first round ends with the
link (a URL-mode question in an ``InputRequiredResult``), the gateway holds the call, and the
client's retry with ``accept`` gets the answer once its person has signed in — at a real
authorization server (oidc-provider), as a real person, after the client said yes. A person
who says no ends the call with that, and nothing runs for them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.mcp_oauth.authserver import AuthServer, missing_node
from tests.mcp_oauth.browserless import log_in, redirect_params
from tests.mcp_oauth.protected_server import ProtectedServer
from tests.mcp_oauth.stack import ADMIN, mcp_tool, oauth_item, person, put_items
from tests.servers import Served, serving

# slow (tests/conftest.py): the npm oidc-provider, on Node
pytestmark = pytest.mark.slow

if (_missing := missing_node()) is not None:
    pytest.skip(_missing, allow_module_level=True)


@pytest.fixture(scope="module")
def auth() -> Iterator[AuthServer]:
    with AuthServer() as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("mrtr-sign-in"), "--token", ADMIN) as running:
        yield running


@pytest.fixture
async def server(auth: AuthServer, served: Served) -> AsyncIterator[ProtectedServer]:
    async with ProtectedServer(auth) as protected:
        await put_items(served, {
            "mcp/whoami": oauth_item(protected, "whoami"),
            "tool/whoami": {"type": "mcp-tool", "name": "whoami", "mcp-tool": "whoami",
                            "description": "says who you are at the notes server"}})
        yield protected


class LaterSigner:
    """A 2026-07-28 client's person: says yes to the link at once, and signs in (as
    ``username``) only once the client's retry is on its way; or says no."""

    def __init__(self, served: Served, token: str, username: str, *, say_no: bool = False
                 ) -> None:
        self.served, self.token, self.username, self.say_no = served, token, username, say_no
        self.asked: list[Any] = []
        self.signing: list[asyncio.Task[None]] = []
        #: set when the client sends its retry (a call carrying a requestState)
        self.retried = asyncio.Event()

    async def saw(self, request: httpx2.Request) -> None:
        """Every request of the client (an httpx event hook)."""
        if b'"requestState"' in request.content:
            self.retried.set()

    async def __call__(self, context: Any, params: Any) -> mcp_types.ElicitResult:
        self.asked.append(params)
        if self.say_no or not isinstance(params, mcp_types.ElicitRequestURLParams):
            return mcp_types.ElicitResult(action="decline")
        self.signing.append(asyncio.ensure_future(self._sign_in(params.url)))
        return mcp_types.ElicitResult(action="accept")

    async def _sign_in(self, url: str) -> None:
        await self.retried.wait()  # the retry waits at the gateway for this sign-in
        answer = redirect_params(await log_in(url, username=self.username))
        status, body = await mcp_tool(self.served, {"operation": "login-finish", **answer},
                                      self.token)
        assert status == 200, body


async def call(served: Served, token: str, signer: LaterSigner) -> mcp_types.CallToolResult:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=60, event_hooks={"request": [signer.saw]}) as http, \
            Client(streamable_http_client(served.url + "mcp", http_client=http),
                   mode="2026-07-28", elicitation_callback=signer) as client:
        async with asyncio.timeout(60):
            return await client.call_tool("whoami", {})


async def test_a_2026_client_gets_the_link_and_its_retry_answers_once_signed_in(
        served: Served, server: ProtectedServer) -> None:
    hana, ivan = await person(served, "hana"), await person(served, "ivan")
    signer = LaterSigner(served, hana.token, "hana")
    result = await call(served, hana.token, signer)
    await asyncio.gather(*signer.signing)
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent) and block.text.startswith("hana (scopes:")
    [asked] = signer.asked  # asked once: the retry waited for the sign-in
    assert isinstance(asked, mcp_types.ElicitRequestURLParams) and "127.0.0.1" in asked.message

    refuser = LaterSigner(served, ivan.token, "ivan", say_no=True)
    refused = await call(served, ivan.token, refuser)
    block = refused.content[0]
    assert refused.is_error and isinstance(block, mcp_types.TextContent)
    assert "declined to sign in" in block.text, refused
    assert len(refuser.asked) == 1
    assert server.calls == [("hana", "whoami")]
