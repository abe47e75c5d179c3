"""A grant after the sign-in, against a real authorization server (oidc-provider) whose access
tokens last 2 s and whose refresh tokens rotate: refreshed on expiry (the rotated refresh token
kept: oidc-provider revokes a grant whose old refresh token is used again), gone when revoked
at the server, and stepped up when the server asks for a scope the grant lacks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx2
import pytest

from tests.mcp_oauth.authserver import AuthServer, missing_node
from tests.mcp_oauth.browserless import log_in
from tests.mcp_oauth.protected_server import ProtectedServer
from tests.mcp_oauth.stack import ADMIN, login_command, mcp_tool, oauth_item, person, put_items
from tests.mcp_oauth.test_workspace_grants import MACHINE
from tests.servers import Served, serving

# slow (tests/conftest.py): the npm oidc-provider, on Node
pytestmark = pytest.mark.slow

if (_missing := missing_node()) is not None:
    pytest.skip(_missing, allow_module_level=True)


@pytest.fixture(scope="module")
def auth() -> Iterator[AuthServer]:
    with AuthServer(access_token_ttl=2, clients=[MACHINE]) as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("oauth-grants"), "--token", ADMIN) as running:
        yield running


@pytest.fixture
async def server(auth: AuthServer) -> AsyncIterator[ProtectedServer]:
    async with ProtectedServer(auth) as protected:
        yield protected


async def sign_in(served: Served, item: str, *extra: str, username: str, token: str) -> None:
    async with login_command(served, item, *extra, token=token) as command:
        back = await log_in(await command.link(), username=username)
        async with httpx2.AsyncClient() as http:
            await http.get(back)
        code, out, err = await command.end()
    assert code == 0, out + err


async def call(served: Served, item: str, token: str, **parameters: str) -> dict:
    status, body = await mcp_tool(served, {"name": item, "parameters": parameters}, token)
    return body


async def test_an_expired_token_is_refreshed_and_the_rotated_refresh_token_kept(
        served: Served, server: ProtectedServer) -> None:
    await put_items(served, {"mcp/who": oauth_item(server, "whoami")})
    alice = await person(served, "alice")
    await sign_in(served, "who", username="alice", token=alice.token)
    # every token lasts 2 s, under toolmesh's 30 s margin: each call refreshes first, and
    # uses the refresh token the last refresh gave (an old one would revoke the grant)
    for _ in range(3):
        body = await call(served, "who", alice.token)
        assert body.get("text", "").startswith("alice"), body
    assert server.calls == [("alice", "whoami")] * 3


async def test_a_grant_revoked_at_the_server_asks_for_a_new_sign_in(
        served: Served, auth: AuthServer, server: ProtectedServer) -> None:
    await put_items(served, {"mcp/revoked": oauth_item(server, "whoami")})
    bob = await person(served, "bob")
    await sign_in(served, "revoked", username="bob", token=bob.token)
    assert (await call(served, "revoked", bob.token))["text"].startswith("bob")
    assert await auth.revoke("bob") > 0
    body = await call(served, "revoked", bob.token)
    assert body["error"]["type"] == "login-required", body
    assert server.calls == [("bob", "whoami")]
    await sign_in(served, "revoked", username="bob", token=bob.token)  # and back again
    assert (await call(served, "revoked", bob.token))["text"].startswith("bob")


async def test_a_server_asking_for_more_scope_gets_a_stepped_up_sign_in(
        served: Served, server: ProtectedServer) -> None:
    await put_items(served, {"mcp/note": oauth_item(server, "write_note")})
    carol = await person(served, "carol")
    await sign_in(served, "note", username="carol", token=carol.token)
    body = await call(served, "note", carol.token, text="hello")
    assert body["error"]["type"] == "login-required", body
    assert "notes:write" in body["error"]["message"] and "--scope" in body["error"]["message"]
    assert server.notes == []
    await sign_in(served, "note", "--scope", "notes:write", username="carol",
                  token=carol.token)
    body = await call(served, "note", carol.token, text="hello")
    assert "error" not in body or not body["error"], body
    assert server.notes == [("carol", "hello")]


async def test_an_expired_machine_token_is_fetched_again(served: Served,
                                                         server: ProtectedServer) -> None:
    await put_items(served, {"mcp/machine": oauth_item(
        server, "whoami", per="workspace", grant="client-credentials",
        **{"client-id": MACHINE["client_id"], "client-secret": MACHINE["client_secret"]})})
    dora = await person(served, "dora")
    for _ in range(3):  # each token lasts 2 s: expired at each call, fetched again
        body = await call(served, "machine", dora.token)
        assert body.get("text", "").startswith("client:toolmesh-machine"), body
    assert len(server.calls) == 3
