"""Items signed in once for a whole workspace (``"per": "workspace"``), against a real
authorization server (oidc-provider): an admin signs in, everyone in the workspace calls under
that grant, and no one else may sign it in or out; with ``"grant": "client-credentials"``
toolmesh gets the workspace's token itself, machine to machine, with no person at all."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx2
import pytest

from tests.mcp_oauth.authserver import AuthServer, missing_node
from tests.mcp_oauth.browserless import log_in
from tests.mcp_oauth.protected_server import ProtectedServer
from tests.mcp_oauth.stack import (
    ADMIN,
    cli,
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

MACHINE = {"client_id": "toolmesh-machine", "client_secret": "machine-secret-0123456789abcdef",
           "grant_types": ["client_credentials"], "redirect_uris": [], "response_types": [],
           "token_endpoint_auth_method": "client_secret_basic", "scope": "mcp:tools"}


@pytest.fixture(scope="module")
def auth() -> Iterator[AuthServer]:
    with AuthServer(clients=[MACHINE]) as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("oauth-workspace"), "--token", ADMIN) as running:
        yield running


@pytest.fixture
async def server(auth: AuthServer) -> AsyncIterator[ProtectedServer]:
    async with ProtectedServer(auth) as protected:
        yield protected


async def whoami(served: Served, item: str, token: str) -> dict:
    return (await mcp_tool(served, {"name": item, "parameters": {}}, token))[1]


async def test_an_admin_signs_the_workspace_in_and_everyone_calls_under_it(
        served: Served, server: ProtectedServer) -> None:
    await put_items(served, {"mcp/shared": oauth_item(server, "whoami", per="workspace")})
    alice, bob = await person(served, "alice"), await person(served, "bob")
    body = await whoami(served, "shared", alice.token)
    assert body["error"]["type"] == "login-required", body
    assert "an admin" in body["error"]["message"]

    code, out, err = await cli(served, "mcp", "login", "shared", "--no-browser",
                               token=alice.token)
    assert code != 0 and "only an admin" in err, out + err

    async with login_command(served, "shared", token=ADMIN) as command:
        back = await log_in(await command.link(), username="ops-team")
        async with httpx2.AsyncClient() as http:
            await http.get(back)
        code, out, err = await command.end()
    assert code == 0 and "the workspace can now use shared" in out, out + err

    for token in (alice.token, bob.token):
        assert (await whoami(served, "shared", token))["text"].startswith("ops-team")
    assert server.calls == [("ops-team", "whoami")] * 2

    code, out, err = await cli(served, "mcp", "logins", "--json", token=bob.token)
    assert [(r["items"], r["per"]) for r in json.loads(out)] == [(["shared"], "workspace")]
    code, out, err = await cli(served, "mcp", "logout", "shared", token=bob.token)
    assert code != 0 and "only an admin" in err
    code, out, err = await cli(served, "mcp", "logout", "shared", token=ADMIN)
    assert code == 0 and "signed out" in out, err
    assert (await whoami(served, "shared", alice.token))["error"]["type"] == "login-required"


async def test_client_credentials_need_no_person(served: Served,
                                                 server: ProtectedServer) -> None:
    await put_items(served, {"mcp/machine": oauth_item(
        server, "whoami", per="workspace", grant="client-credentials",
        **{"client-id": MACHINE["client_id"], "client-secret": MACHINE["client_secret"]})})
    carol = await person(served, "carol")
    body = await whoami(served, "machine", carol.token)
    assert body.get("text", "").startswith("client:toolmesh-machine"), body
    assert server.calls == [("client:toolmesh-machine", "whoami")]
    # the secret is write-only: read back masked
    code, out, err = await cli(served, "config", "get", "mcp/machine")
    assert MACHINE["client_secret"] not in out and "***" in out, out
    # and nobody signs in for it
    code, out, err = await cli(served, "mcp", "login", "machine", "--no-browser")
    assert code != 0 and "client's credentials" in err, out + err
