"""Scoped tokens end to end: a real `toolmesh serve` guarded by its admin token, tokens made and
revoked with `toolmesh token`, used over REST (our CLI, plain HTTP) and the WebSocket; and the
audit they leave (`toolmesh config history`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.cli.test_agent_cli import EXAMPLES, JOKE
from tests.processes import run_toolmesh
from tests.servers import Served, toolmesh_serve
from toolmesh.config.tokens import token_id

ADMIN = "admin-s3cret-for-tests"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """`toolmesh serve` with an admin token, the joke tool in ws1 and ws2."""
    async with toolmesh_serve(tmp_path, extra_env={"TOOLMESH_GATEWAY_TOKEN": ADMIN}) as s:
        values = [{"type": "tool-service", "key": "joke-service",
                   "value": (EXAMPLES / "joke-service.json").read_text()},
                  {"type": "tool", "key": "tell-joke",
                   "value": (EXAMPLES / "tell-joke.json").read_text()}]
        for workspace in ("ws1", "ws2"):
            status, body = await post(s, "api/v1/config", {
                "operation": "put", "workspace": workspace, "values": values}, ADMIN)
            assert status == 200 and "error" not in body, body
        yield s


async def toolmesh(served: Served, *args: str, token: str | None,
                   stdin: str | None = None) -> tuple[int, str, str]:
    """Our CLI against ``served`` with ``token`` (none at all when ``None``)."""
    return await run_toolmesh(*args, "-u", served.url, *(["-t", token] if token else []),
                              stdin_text=stdin,
                              extra_env={"TOOLMESH_TOKEN": "", "TRUSTGRAPH_TOKEN": "",
                                         "TOOLMESH_GATEWAY_TOKEN": ""})


async def create(served: Served, *args: str, token: str = ADMIN) -> str:
    code, out, err = await toolmesh(served, "token", "create", *args, token=token)
    assert code == 0, err
    assert "shown this once" in err
    made = out.strip()
    assert token_id(made) is not None, out
    return made


async def post(served: Served, path: str, body: dict[str, Any], token: str | None,
               workspace: str | None = None) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if workspace:
        headers["X-Workspace"] = workspace
    async with aiohttp.ClientSession() as http, \
            http.post(served.url + path, json=body, headers=headers) as r:
        return r.status, await r.json()


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_token_for_ws2_and_agent_runs_dialogs_there_and_nothing_else(
        served: Served) -> None:
    token = await create(served, "-w", "ws2", "-c", "agent", "--name", "support bot")
    id = token_id(token)
    code, out, err = await toolmesh(served, "agent", "Tell me a joke about food", "-w", "ws2",
                                    token=token)
    assert (code, out) == (0, JOKE + "\n"), err
    # REST too, and a REST request naming no workspace goes to the token's
    status, body = await post(served, "api/v1/flow/default/service/agent",
                              {"question": "Tell me a joke about food"}, token)
    assert status == 200 and body["answer"] == JOKE, body

    code, _, err = await toolmesh(served, "agent", "Tell me a joke", "-w", "ws1", token=token)
    assert code == 1
    # (the agent command uses the WebSocket: the error frame's type, then its message)
    assert f"forbidden: token {id!r} may not use workspace 'ws1' (it may use: ws2)" in err
    code, _, err = await toolmesh(served, "config", "put", "tool/x", "-w", "ws2", token=token,
                                  stdin="{}")
    assert code == 1
    assert ("403: forbidden: config put needs the 'config:write' capability, which token "
            f"{id!r} does not have (it has: agent)") in err
    code, _, err = await toolmesh(served, "config", "list", "tool", "-w", "ws2", token=token)
    assert code == 1 and "needs the 'config:read' capability" in err
    status, body = await post(served, "api/v1/flow/default/service/mcp-tool",
                              {"name": "x", "workspace": "ws2"}, token)
    assert status == 403 and "needs the 'tools:invoke' capability" in body["error"]["message"]
    # the body's workspace is the one checked, whatever the header says
    status, body = await post(served, "api/v1/config", {"operation": "get", "workspace": "ws1",
                                                        "keys": []}, token, workspace="ws2")
    assert status == 403 and body["error"]["type"] == "forbidden"
    # admin-only operations
    for request in ({"operation": "getvalues-all-ws", "type": "tool"},
                    {"operation": "token-table"}, {"operation": "token-create"}):
        status, body = await post(served, "api/v1/config", request, token)
        assert status == 403, (request, body)
    status, body = await post(served, "api/v1/token", {"operation": "list"}, token)
    assert status == 403 and "needs the 'admin' capability" in body["error"]["message"]
    # what the token was refused never names another workspace's items
    assert "tell-joke" not in json.dumps(body)


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_tokens_are_listed_without_their_secret_and_the_admin_token_is_needed(
        served: Served) -> None:
    token = await create(served, "-w", "ws2,ws3", "-c", "config:read", "-c", "agent",
                         "--name", "reader")
    code, out, err = await toolmesh(served, "token", "list", token=ADMIN)
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["ID", "NAME", "WORKSPACES", "CAPABILITIES", "CREATED"]
    assert row.split()[:4] == [token_id(token), "reader", "ws2,ws3", "config:read,agent"]
    code, out, _ = await toolmesh(served, "token", "list", "--json", token=ADMIN)
    (listed,) = json.loads(out)
    assert set(listed) == {"id", "name", "workspaces", "capabilities", "created"}
    assert token.split("_", 2)[2] not in out
    # without the admin token, or with a made-up one
    code, _, err = await toolmesh(served, "token", "list", token=None)
    assert code == 1 and "401" in err
    code, _, err = await toolmesh(served, "token", "create", "-w", "x", "-c", "admin",
                                  token="tmk_0123456789ab_" + "x" * 43)
    assert code == 1 and "401" in err
    code, _, err = await toolmesh(served, "token", "create", "-w", "x", "-c", "root",
                                  token=ADMIN)
    assert code == 1 and "unknown capability 'root'" in err


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_revocation_takes_effect_at_once_on_rest_and_open_sockets(served: Served) -> None:
    token = await create(served, "-w", "ws2", "-c", "config:read")
    id = token_id(token)
    assert id is not None
    get = {"operation": "list", "type": "tool", "workspace": "ws2"}
    async with aiohttp.ClientSession() as http, \
            http.ws_connect(served.url + "api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": token})
        assert await ws.receive_json(timeout=10) == {"type": "auth-ok",
                                                     "default_workspace": "ws2"}
        # a frame naming no workspace goes to the token's
        await ws.send_json({"id": 1, "service": "config",
                            "request": {"operation": "list", "type": "tool"}})
        answer = await ws.receive_json(timeout=10)
        assert answer["response"]["directory"] == ["tell-joke"], answer
        await ws.send_json({"id": 2, "service": "config", "workspace": "ws1",
                            "request": {"operation": "list", "type": "tool"}})
        answer = await ws.receive_json(timeout=10)
        assert answer["error"]["type"] == "forbidden"
        assert "may not use workspace 'ws1'" in answer["error"]["message"]
        assert (await post(served, "api/v1/config", get, token))[0] == 200

        code, _, err = await toolmesh(served, "token", "revoke", id, token=ADMIN)
        assert code == 0 and f"revoked token {id}" in err

        status, body = await post(served, "api/v1/config", get, token)
        assert (status, body["error"]["type"]) == (401, "auth-failed")
        await ws.send_json({"id": 3, "service": "config", "request": get})
        answer = await ws.receive_json(timeout=10)
        assert answer["id"] == 3 and answer["error"]["type"] == "auth-failed", answer
        # a new socket cannot authenticate with it either
        async with http.ws_connect(served.url + "api/v1/socket") as again:
            await again.send_json({"type": "auth", "token": token})
            assert (await again.receive_json(timeout=10))["type"] == "auth-failed"
    code, _, err = await toolmesh(served, "token", "revoke", id, token=ADMIN)
    assert code == 1 and f"no token {id!r}" in err


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_secrets_and_stdio_items_need_admin_and_every_change_is_audited(
        served: Served) -> None:
    writer = await create(served, "-w", "ws2", "-c", "config:read,config:write", "--name", "ci")
    ws2_admin = await create(served, "-w", "ws2", "-c", "config:read,config:write,admin")
    writer_id, admin_id = token_id(writer), token_id(ws2_admin)
    mcp = json.dumps({"url": "https://mcp.example/mcp", "auth-token": "tok-123"})
    code, _, err = await toolmesh(served, "config", "put", "mcp/remote", "-w", "ws2",
                                  token=writer, stdin=mcp)
    assert code == 1 and ("config put of a secret (mcp/remote: 'auth-token') needs the "
                          "'admin' capability") in err
    stdio = json.dumps({"transport": "stdio", "command": "uvx", "args": ["x"]})
    code, _, err = await toolmesh(served, "config", "put", "mcp/local", "-w", "ws2",
                                  token=writer, stdin=stdio)
    assert code == 1 and "config put of a stdio MCP item (mcp/local runs a command)" in err
    url = json.dumps({"url": "https://user:pw@mcp.example/mcp"})
    code, _, err = await toolmesh(served, "config", "put", "mcp/creds", "-w", "ws2",
                                  token=writer, stdin=url)
    assert code == 1 and "a URL's credentials" in err
    # admin in ws2 may write the secret; the writer may then round-trip it masked
    code, _, err = await toolmesh(served, "config", "put", "mcp/remote", "-w", "ws2",
                                  token=ws2_admin, stdin=mcp)
    assert code == 0, err
    code, out, _ = await toolmesh(served, "config", "get", "mcp/remote", "-w", "ws2",
                                  token=writer)
    assert json.loads(out)["auth-token"] == "***"
    renamed = json.dumps({**json.loads(out), "remote-name": "other"})
    code, _, err = await toolmesh(served, "config", "put", "mcp/remote", "-w", "ws2",
                                  token=writer, stdin=renamed)
    assert code == 0, err
    # a client cannot say who it is: the gateway sets the actor
    status, body = await post(served, "api/v1/config", {
        "operation": "delete", "workspace": "ws2", "actor": "admin",
        "keys": [{"type": "tool", "key": "tell-joke"}]}, writer)
    assert status == 200, body
    code, _, err = await toolmesh(served, "config", "put", "flow/f1", "-w", "ws1", token=ADMIN,
                                  stdin='{"description": "f"}')
    assert code == 0, err

    code, out, err = await toolmesh(served, "config", "history", "-w", "ws2", "--json",
                                    token=writer)
    assert code == 0, err
    entries = json.loads(out)
    assert [(e["operation"], e["type"], e["key"], e["actor"], e["workspace"])
            for e in entries[:3]] == [
        ("delete", "tool", "tell-joke", writer_id, "ws2"),
        ("put", "mcp", "remote", writer_id, "ws2"),
        ("put", "mcp", "remote", admin_id, "ws2")]
    assert [e["version"] for e in entries] == sorted((e["version"] for e in entries),
                                                     reverse=True)
    assert [(e["actor"], e["key"]) for e in entries[3:]] == [
        ("admin", "tell-joke"), ("admin", "joke-service")]  # the fixture's put
    assert "tok-123" not in out and writer not in out
    code, out, _ = await toolmesh(served, "config", "history", "mcp/remote", "-w", "ws2",
                                  token=writer)
    rows = [line.split()[1:] for line in out.splitlines()[1:]]  # under the header
    assert [row[1:] for row in rows] == [["put", "ws2", "mcp/remote", str(writer_id)],
                                         ["put", "ws2", "mcp/remote", str(admin_id)]]
    code, out, _ = await toolmesh(served, "config", "history", "-n", "1", "-w", "ws2",
                                  token=writer)
    assert len(out.splitlines()) == 2 and out.splitlines()[1].split()[2] == "delete"
    # every workspace, and the token changes: the admin token only
    code, _, err = await toolmesh(served, "config", "history", "--all-workspaces", "-w", "ws2",
                                  token=ws2_admin)
    assert code == 1 and "reaches every workspace" in err
    code, out, err = await toolmesh(served, "config", "history", "--all-workspaces", "--json",
                                    token=ADMIN)
    assert code == 0, err
    everything = json.loads(out)
    assert everything[0]["workspace"] == "ws1" and everything[0]["actor"] == "admin"
    created = [(e["operation"], e["key"], e["actor"]) for e in everything
               if e["type"] == "token"]
    assert created == [("token-create", admin_id, "admin"), ("token-create", writer_id, "admin")]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_token_with_admin_manages_tokens_within_its_own_scope(served: Served) -> None:
    lead = await create(served, "-w", "ws2,ws3", "-c", "admin,agent,config:read")
    other = await create(served, "-w", "ws1", "-c", "agent")
    made = await create(served, "-w", "ws2", "-c", "agent", token=lead)
    for args, problem in ((["-w", "ws1", "-c", "agent"], "ws1"),
                          (["-w", "ws2", "-c", "config:write"], "config:write")):
        code, _, err = await toolmesh(served, "token", "create", *args, token=lead)
        assert code == 1 and "403: forbidden" in err, err
        assert "may only make tokens within its own scope" in err, (problem, err)
    code, out, _ = await toolmesh(served, "token", "list", "--json", token=lead)
    assert {t["id"] for t in json.loads(out)} == {token_id(lead), token_id(made)}
    code, _, err = await toolmesh(served, "token", "revoke", str(token_id(other)), token=lead)
    assert code == 1 and f"403: forbidden: no token {token_id(other)!r} within the scope" in err
    code, _, err = await toolmesh(served, "token", "revoke", str(token_id(made)), token=lead)
    assert code == 0, err
    status, body = await post(served, "api/v1/config", {"operation": "getvalues-all-ws",
                                                        "type": "tool"}, lead)
    assert status == 403 and "reaches every workspace" in body["error"]["message"]


async def test_without_a_gateway_token_changes_are_the_local_users(tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path) as served:
        code, _, err = await toolmesh(served, "config", "put", "flow/f", token=None,
                                      stdin='{"description": "d"}')
        assert code == 0, err
        # a scoped token still limits its holder, and a wrong one is refused
        token = await create(served, "-w", "ws2", "-c", "config:read", token="")
        code, _, err = await toolmesh(served, "config", "put", "flow/g", token=token,
                                      stdin='{"description": "d"}')
        assert code == 1 and "403" in err
        code, _, err = await toolmesh(served, "config", "list", "flow", token=token[:-2] + "zz")
        assert code == 1 and "401" in err
        code, out, _ = await toolmesh(served, "config", "history", token=None)
    assert out.splitlines()[1].split()[3:] == ["default", "flow/f", "local"]
