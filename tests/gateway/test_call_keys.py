"""Every route that calls a tool sends an idempotency key (docs/dialogs.md): a real
`toolmesh serve` with the mailer tool service (which records the key of every attempt) and a
real MCP server (whose ``meta`` tool answers the ``_meta`` it got), called over REST, the
WebSocket and ``/mcp``. A client's own key goes on under its token's id; without one the
gateway makes one per call; a key the client sends again runs the call once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.dialogs.test_embedded_restart import SERVICES
from tests.gateway.test_approvals_route import Mailer, offered
from tests.gateway.test_scoped_tokens import ADMIN, post
from tests.mcp.servers import ServerProcess, running_server
from tests.mcp_endpoint.test_mcp_approval import session
from tests.servers import Served, toolmesh_serve

TOOL_SERVICE = "api/v1/flow/default/service/tool-service"
MCP_TOOL = "api/v1/flow/default/service/mcp-tool"
META = "io.toolmesh/idempotency-key"


@dataclass
class Deployment:
    served: Served
    mailer: Mailer
    mcp: ServerProcess


@pytest.fixture
async def deployment(tmp_path: Path) -> AsyncIterator[Deployment]:
    mail = tmp_path / "mail"
    mail.mkdir()
    env = {"MAILER_DIR": str(mail), "TOOLMESH_GATEWAY_TOKEN": ADMIN}
    async with running_server("streamable-http", name="keys") as mcp, \
            toolmesh_serve(tmp_path, "--tool-service", "mailer:Mailer", extra_env=env,
                           cwd=SERVICES) as served:
        status, body = await post(served, "api/v1/config", {"operation": "put", "values": [
            {"type": "mcp", "key": "meta", "value": json.dumps(
                {"url": mcp.url, "remote-name": "meta"})}]}, ADMIN)
        assert status == 200, body
        await offered(served, "send", ADMIN)
        yield Deployment(served, Mailer(mail), mcp)


async def _send(d: Deployment, **extra: Any) -> tuple[int, dict[str, Any]]:
    return await post(d.served, TOOL_SERVICE,
                      {"id": "mailer", "arguments": {"to": "bob"}, **extra}, ADMIN)


async def _socket_call(d: Deployment, service: str, request: dict[str, Any]
                       ) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http, \
            http.ws_connect(d.served.url + "api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": ADMIN})
        assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
        await ws.send_json({"id": "c1", "service": service, "flow": "default",
                            "request": request})
        frames: list[dict[str, Any]] = []
        while not frames or not frames[-1]["complete"]:
            frame = await ws.receive_json(timeout=20)
            assert frame["id"] == "c1", frame
            frames.append(frame)
        return [f.get("response") or f for f in frames]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_tool_service_route_sends_a_key_on_rest_and_websocket(
        deployment: Deployment) -> None:
    d = deployment
    status, rest = await _send(d)
    frames = await _socket_call(d, "tool-service", {"id": "mailer", "arguments": {"to": "amy"}})
    assert status == 200 and rest["response"] == "sent to bob", rest
    assert "".join(f.get("response") or "" for f in frames) == "sent to amy", frames
    made = d.mailer.attempts()
    # one key per call, made by the gateway, under the caller's token id
    assert len(made) == 2 and len(set(made)) == 2, made
    assert all(k.startswith("admin/gw-") for k in made), made


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_clients_own_key_runs_the_call_once(deployment: Deployment) -> None:
    d = deployment
    answers = [await _send(d, **{"idempotency-key": "order-7"}) for _ in range(3)]
    assert answers == [(200, {"response": "sent to bob", "end_of_stream": True})] * 3
    assert d.mailer.attempts() == ["admin/order-7"]  # the SDK kept the first answer
    assert d.mailer.sent() == ["to bob"]
    # the same key with another call is refused, and runs nothing
    status, body = await post(d.served, TOOL_SERVICE, {
        "id": "mailer", "arguments": {"to": "eve"}, "idempotency-key": "order-7"}, ADMIN)
    assert status == 200 and body["error"]["type"] == "idempotency-key-reused", body
    assert d.mailer.attempts() == ["admin/order-7"]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_key_that_is_not_a_short_string_is_a_bad_request(
        deployment: Deployment) -> None:
    d = deployment
    for bad in (7, "", "x" * 201, "tab\there", ["k"]):
        status, body = await _send(d, **{"idempotency-key": bad})
        assert status == 400 and body["error"]["type"] == "bad-request", (bad, body)
        assert "'idempotency-key' must be a string of 1 to 200 printable" in \
            body["error"]["message"]
    [frame] = await _socket_call(d, "tool-service", {"id": "mailer", "arguments": {},
                                                     "idempotency-key": 7})
    assert frame["error"]["type"] == "bad-request", frame
    assert d.mailer.attempts() == []


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_mcp_tool_route_passes_a_key_to_the_server(deployment: Deployment) -> None:
    d = deployment
    status, made = await post(d.served, MCP_TOOL, {"name": "meta", "parameters": {}}, ADMIN)
    assert status == 200, made
    status, own = await post(d.served, MCP_TOOL, {"name": "meta", "parameters": {},
                                                  "idempotency-key": "k-1"}, ADMIN)
    # a client cannot pass its call off as a dialog's (whose server's questions go to a
    # dialog's person): the dialogs' field is taken as its own key, under its id
    status, posing = await post(d.served, MCP_TOOL, {"name": "meta", "parameters": {},
                                                     META: "dialog-1/1/c1"}, ADMIN)
    [frame] = [f for f in await _socket_call(d, "mcp-tool", {"name": "meta",
                                                             "parameters": {}})
               if f.get("text")]
    assert json.loads(made["text"])[META].startswith("admin/gw-")
    assert json.loads(own["text"])[META] == "admin/k-1"
    assert json.loads(posing["text"])[META] == "admin/dialog-1/1/c1"
    assert json.loads(frame["text"])[META].startswith("admin/gw-")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_mcp_sends_a_key_the_clients_or_one_per_call(deployment: Deployment) -> None:
    d = deployment
    async with session(d.served.url + "mcp", None, token=ADMIN) as client:
        await client.call_tool("send", {"to": "bob"})
        await client.call_tool("send", {"to": "bob"}, meta={META: "mine"})
        await client.call_tool("send", {"to": "bob"}, meta={META: "mine"})
        refused = await client.call_tool("send", {"to": "bob"}, meta={META: 5})
    first, mine = d.mailer.attempts()
    assert first.startswith("admin/mcp-") and mine == "admin/mine"
    assert refused.is_error and "must be a string of 1 to 200" in refused.content[0].text


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_stdio_bridge_passes_the_clients_key_on(deployment: Deployment,
                                                          tmp_path: Path) -> None:
    from tests.mcp_endpoint.test_stdio_bridge import bridge

    d = deployment
    async with bridge(d.served.url, log=tmp_path / "bridge.log",
                      env={"TOOLMESH_GATEWAY_TOKEN": ADMIN}) as client:
        await client.call_tool("send", {"to": "bob"}, meta={META: "via-stdio"})
        await client.call_tool("send", {"to": "bob"})
    given, made = d.mailer.attempts()
    assert given == "admin/via-stdio" and made.startswith("admin/mcp-")



@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_command_line_sends_the_users_key(deployment: Deployment) -> None:
    from tests.processes import run_toolmesh

    d = deployment
    gateway = ("-u", d.served.url, "-t", ADMIN)
    for _ in range(2):
        code, out, err = await run_toolmesh("tool-service", "invoke", "mailer", "-a",
                                            '{"to": "bob"}', "--idempotency-key", "cli-1",
                                            *gateway)
        assert code == 0 and "sent to bob" in out, err
    code, out, err = await run_toolmesh("mcp", "invoke", "meta", "--idempotency-key", "cli-2",
                                        *gateway)
    assert code == 0, err
    assert d.mailer.attempts() == ["admin/cli-1"]
    assert json.loads(out)[META] == "admin/cli-2"
