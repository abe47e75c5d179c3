"""``toolmesh mcp login`` against a real authorization server (oidc-provider) and an MCP server
it protects, through a real ``toolmesh serve``: no token is pasted anywhere. Each person's
calls act under their own sign-in; the refusals (no S256, a wrong ``iss``, a state that is
not theirs, a server naming another resource) keep nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from tests.mcp_oauth.authserver import AuthServer, missing_node
from tests.mcp_oauth.browserless import log_in, redirect_params
from tests.mcp_oauth.protected_server import ProtectedServer
from tests.mcp_oauth.stack import (
    ADMIN,
    cli,
    decoded,
    login_command,
    mcp_tool,
    oauth_item,
    person,
    put_items,
)
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
    with serving(tmp_path_factory.mktemp("oauth-serve"), "--token", ADMIN) as running:
        yield running


@pytest.fixture
async def server(auth: AuthServer) -> AsyncIterator[ProtectedServer]:
    async with ProtectedServer(auth) as protected:
        yield protected


async def sign_in(served: Served, item: str, *, username: str, token: str) -> str:
    """``toolmesh mcp login ITEM`` as ``token``'s person, who signs in as ``username``; the
    command's output."""
    async with login_command(served, item, token=token) as command:
        link = await command.link()
        back = await log_in(link, username=username)
        async with httpx2.AsyncClient() as http:
            await http.get(back)  # the browser's way back to the command's loopback port
        code, out, err = await command.end()
    assert code == 0, out + err
    return out


async def test_mcp_login_alone_signs_a_person_in_and_their_calls_act_as_them(
        served: Served, auth: AuthServer, server: ProtectedServer) -> None:
    code, out, err = await cli(served, "mcp", "set", "whoami", "--url", server.url,
                               "--oauth", "user")
    assert code == 0, err
    code, out, err = await cli(served, "mcp", "show")
    assert "oauth, per user" in out, out
    alice, bob = await person(served, "alice"), await person(served, "bob")
    status, body = await mcp_tool(served, {"name": "whoami", "parameters": {}}, alice.token)
    assert body["error"]["type"] == "login-required", body
    assert "toolmesh mcp login whoami" in body["error"]["message"]

    async with login_command(served, "whoami", token=alice.token) as command:
        link = await command.link()
        asked = parse_qs(urlsplit(link).query)
        assert asked["code_challenge_method"] == ["S256"] and asked["code_challenge"]
        assert asked["resource"] == [server.url]
        assert link.startswith(auth.authorization_endpoint)
        back = await log_in(link, username="alice")
        async with httpx2.AsyncClient() as http:
            await http.get(back)
        code, out, err = await command.end()
    assert code == 0, out + err
    assert "signed in" in out

    status, body = await mcp_tool(served, {"name": "whoami", "parameters": {}}, alice.token)
    assert status == 200 and body["text"].startswith("alice"), body
    assert server.calls == [("alice", "whoami")]

    # bob has not signed in: asked to, and nothing runs as alice for him
    status, body = await mcp_tool(served, {"name": "whoami", "parameters": {}}, bob.token)
    assert body["error"]["type"] == "login-required", body
    assert server.calls == [("alice", "whoami")]

    code, out, err = await cli(served, "mcp", "logins", "--json", token=alice.token)
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["items"], r["per"], r["issuer"]) for r in rows] == \
        [(["whoami"], "user", auth.issuer)]
    assert "token" not in out.lower().replace("tokens", "")  # no token value, no token field
    code, out, _ = await cli(served, "mcp", "logins", "--json", token=bob.token)
    assert json.loads(out) == []

    code, out, err = await cli(served, "mcp", "logout", "whoami", token=alice.token)
    assert code == 0 and "signed out" in out, err
    status, body = await mcp_tool(served, {"name": "whoami", "parameters": {}}, alice.token)
    assert body["error"]["type"] == "login-required", body


async def test_the_grants_are_encrypted_on_disk(served: Served, server: ProtectedServer) -> None:
    await put_items(served, {"mcp/whoami2": oauth_item(server, "whoami")})
    carol = await person(served, "carol")
    await sign_in(served, "whoami2", username="carol", token=carol.token)
    status, body = await mcp_tool(served, {"name": "whoami2", "parameters": {}}, carol.token)
    assert body["text"].startswith("carol"), body
    stored = b"".join(p.read_bytes() for p in Path(served.data_dir).glob("mcp-logins.db*"))
    assert b"enc:v1:" in stored and b"access_token" not in stored
    key = Path(served.data_dir) / "mcp-logins.key"
    assert key.stat().st_mode & 0o777 == 0o600


async def test_an_authorization_server_without_s256_is_refused(
        served: Served, auth: AuthServer, server: ProtectedServer) -> None:
    await put_items(served, {"mcp/plain": oauth_item(server, "whoami")})
    await auth.configure(no_s256=True)
    try:
        code, out, err = await cli(served, "mcp", "login", "plain", "--no-browser")
    finally:
        await auth.configure(no_s256=False)
    assert code != 0
    assert "S256" in err and "login-refused" in err, err
    assert "http" not in out  # no link was given


async def test_an_answer_naming_another_issuer_is_refused(
        served: Served, auth: AuthServer, server: ProtectedServer) -> None:
    await put_items(served, {"mcp/mixup": oauth_item(server, "whoami")})
    dave = await person(served, "dave")
    await auth.configure(wrong_iss=True)
    try:
        async with login_command(served, "mixup", token=dave.token) as command:
            back = await log_in(await command.link(), username="dave")
            async with httpx2.AsyncClient() as http:
                await http.get(back)
            code, out, err = await command.end()
    finally:
        await auth.configure(wrong_iss=False)
    assert code != 0 and "RFC 9207" in err, out + err
    status, body = await mcp_tool(served, {"name": "mixup", "parameters": {}}, dave.token)
    assert body["error"]["type"] == "login-required"  # nothing was kept


async def test_a_state_that_is_not_the_callers_login_is_refused(
        served: Served, server: ProtectedServer) -> None:
    await put_items(served, {"mcp/state": oauth_item(server, "whoami")})
    erin, mallory = await person(served, "erin"), await person(served, "mallory")
    status, body = await mcp_tool(served, {"operation": "login", "name": "state",
                                           "redirect-uri": "http://127.0.0.1:9/callback"},
                                  erin.token)
    assert status == 200, body
    started = decoded(body)
    answer = redirect_params(await log_in(started["url"], username="erin"))
    assert answer["state"] == started["state"]

    for forged, token in (({**answer, "state": "not-a-state"}, erin.token),
                          (answer, mallory.token)):  # the right state, the wrong person
        status, body = await mcp_tool(served, {"operation": "login-finish", **forged}, token)
        assert body["error"]["type"] == "login-refused", body
    status, body = await mcp_tool(served, {"name": "state", "parameters": {}}, mallory.token)
    assert body["error"]["type"] == "login-required"

    # erin's own login was not spent by mallory's try
    status, body = await mcp_tool(served, {"operation": "login-finish", **answer}, erin.token)
    assert status == 200 and decoded(body)["item"] == "state", body
    status, body = await mcp_tool(served, {"operation": "login-finish", **answer}, erin.token)
    assert body["error"]["type"] == "login-refused"  # once only
    status, body = await mcp_tool(served, {"name": "state", "parameters": {}}, erin.token)
    assert body["text"].startswith("erin"), body


async def test_only_loopback_redirects_may_be_asked_for(served: Served,
                                                        server: ProtectedServer) -> None:
    await put_items(served, {"mcp/redirect": oauth_item(server, "whoami")})
    status, body = await mcp_tool(served, {"operation": "login", "name": "redirect",
                                           "redirect-uri": "https://evil.example/cb"})
    assert body["error"]["type"] == "bad-request" and "loopback" in body["error"]["message"]


async def test_a_server_naming_another_resource_is_refused(
        served: Served, auth: AuthServer) -> None:
    async with ProtectedServer(auth, wrong_resource=True) as liar:
        await put_items(served, {"mcp/liar": oauth_item(liar, "whoami")})
        code, out, err = await cli(served, "mcp", "login", "liar", "--no-browser")
    assert code != 0 and "not the server itself" in err, err
