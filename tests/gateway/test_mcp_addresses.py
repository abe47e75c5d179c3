"""Where MCP items may point, end to end: a real `toolmesh serve` with its admin token, a token
without `admin`, the real PostgreSQL (5432) and RabbitMQ (5672) of this machine, a closed port,
an HTTP server that is not MCP, and a real MCP server; credential fields masked on reads."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.gateway.test_scoped_tokens import ADMIN, create, post, toolmesh
from tests.mcp.servers import ServerProcess, running_server
from tests.servers import Served, toolmesh_serve


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def web_server() -> AsyncIterator[int]:
    """An HTTP server that is not an MCP server (404 for /mcp, 200 for /)."""
    async def hello(_: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


@pytest.fixture
async def mcp_server() -> AsyncIterator[ServerProcess]:
    async with running_server("streamable-http", name="allowed") as server:
        yield server


@pytest.fixture
async def served(tmp_path: Path, mcp_server: ServerProcess) -> AsyncIterator[Served]:
    """`toolmesh serve` with an admin token, the MCP test server's address allow-listed."""
    async with toolmesh_serve(tmp_path, "--mcp-allow", f"127.0.0.1:{mcp_server.port}",
                              extra_env={"TOOLMESH_GATEWAY_TOKEN": ADMIN}) as s:
        yield s


def _targets(web_port: int) -> dict[str, str]:
    return {"postgres": "127.0.0.1:5432", "rabbitmq": "127.0.0.1:5672",
            "closed": f"127.0.0.1:{_closed_port()}", "web": f"127.0.0.1:{web_port}"}


def _put(key: str, url: str, **more: Any) -> dict[str, Any]:
    return {"operation": "put", "values": [
        {"type": "mcp", "key": key, "value": json.dumps({"url": url, **more})}]}


async def _invoke(served: Served, key: str, token: str,
                  parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    status, body = await post(served, "api/v1/flow/default/service/mcp-tool",
                              {"name": key, "parameters": parameters or {}}, token)
    assert status in (200, 500, 502), body
    return body


def _error(body: dict[str, Any]) -> str:
    error = body.get("error")
    assert isinstance(error, dict), body
    return str(error["message"])


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_token_without_admin_cannot_point_an_mcp_item_at_a_private_address(
        served: Served, web_server: int, mcp_server: ServerProcess) -> None:
    writer = await create(served, "-w", "default", "-c", "config:write", "-c", "config:read",
                          "-c", "tools:invoke")
    targets = _targets(web_server)
    refusals = {}
    for key, where in targets.items():
        status, body = await post(served, "api/v1/config", _put(key, f"http://{where}/mcp"),
                                  writer)
        assert status == 403, body
        refusals[key] = _error(body).replace(where, "ADDR").replace(key, "KEY")
    # one message whatever listens there: nothing tells a database from a closed port
    assert len(set(refusals.values())) == 1, refusals
    assert "only an admin's item may use private addresses" in refusals["postgres"]
    assert "--mcp-allow" in refusals["postgres"]
    # a name that resolves to loopback is no way round it
    status, body = await post(served, "api/v1/config", _put("named", "http://localhost:5432/"),
                              writer)
    assert status == 403 and "may not point at localhost:5432" in _error(body), body
    # the item it may use: the address the operator allowed; "reach" is the gateway's to set
    status, body = await post(served, "api/v1/config", _put("allowed", mcp_server.url, reach="any",
                                                            **{"remote-name": "echo"}), writer)
    assert status == 200 and "error" not in body, body
    answer = await _invoke(served, "allowed", writer, {"text": "through"})
    assert answer.get("text") == "through", answer
    status, body = await post(served, "api/v1/config",
                              {"operation": "get", "keys": [{"type": "mcp", "key": "allowed"}]},
                              writer)
    assert json.loads(body["values"][0]["value"])["reach"] == "public", body


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_admin_may_and_what_is_there_is_not_told(served: Served,
                                                           web_server: int) -> None:
    targets = _targets(web_server)
    errors = {}
    for key, where in targets.items():
        status, body = await post(served, "api/v1/config", _put(key, f"http://{where}/mcp"),
                                  ADMIN)
        assert status == 200 and "error" not in body, body
        errors[key] = _error(await _invoke(served, key, ADMIN)).replace(where, "ADDR") \
            .replace(repr(key), "'KEY'")
    assert len(set(errors.values())) == 1, errors
    assert "cannot be reached" in errors["postgres"]
    # the operator's log has the cause of each
    log = "".join(served.log)
    assert "127.0.0.1:5432" in log and "Connection refused" not in errors["closed"]


async def test_a_public_item_cannot_reach_loopback_when_it_connects(
        mcp_server: ServerProcess, caplog: pytest.LogCaptureFixture) -> None:
    # an item that was put without admin ("reach": "public") whose name resolves to a loopback
    # address is refused by the address it connects to, not only by the put's check
    from toolmesh.mcp import McpError, McpServer, SessionPool

    pool = SessionPool(connect_timeout=10)
    url = mcp_server.url.replace("127.0.0.1", "localhost")
    try:
        public = McpServer.from_config("rebound", {"url": url, "remote-name": "echo",
                                                   "reach": "public"})
        with pytest.raises(McpError) as refused:
            await pool.call_tool(public, {"text": "hi"}, timeout=10)
        assert "cannot be reached" in refused.value.message
        assert "is a private, loopback or link-local address" in caplog.text
        admins = McpServer.from_config("rebound", {"url": url, "remote-name": "echo"})
        assert (await pool.call_tool(admins, {"text": "hi"}, timeout=10)).text == "hi"
    finally:
        await pool.close()


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_credential_fields_are_masked_on_reads(served: Served) -> None:
    secrets = {"authorization": "Bearer a1", "passphrase": "p2", "cookie": "c3",
               "set-cookie": "s4", "x-api-key": "k5", "proxy-authorization": "Basic b6",
               "private-key": "pk7", "client-secret": "cs8"}
    values = [{"type": "settings", "key": "svc", "value": json.dumps(secrets)},
              {"type": "settings", "key": "http", "value": json.dumps(
                  {"headers": {"Authorization": "Bearer a1", "Cookie": "c3"},
                   "list": [{"name": "X-Api-Key", "value": "k5"}], "key": "not-a-secret"})}]
    status, body = await post(served, "api/v1/config", {"operation": "put", "values": values},
                              ADMIN)
    assert status == 200 and "error" not in body, body
    status, body = await post(served, "api/v1/config", {"operation": "get", "keys": [
        {"type": "settings", "key": "svc"}, {"type": "settings", "key": "http"}]}, ADMIN)
    assert status == 200, body
    read = [json.loads(v["value"]) for v in body["values"]]
    assert read[0] == {name: "***" for name in secrets}, read[0]
    assert read[1] == {"headers": {"Authorization": "***", "Cookie": "***"},
                       "list": [{"name": "X-Api-Key", "value": "***"}], "key": "not-a-secret"}
    # a read-modify-write keeps them
    status, body = await post(served, "api/v1/config", {"operation": "put", "values": [
        {"type": "settings", "key": "svc", "value": json.dumps(read[0])}]}, ADMIN)
    assert status == 200 and "error" not in body, body
    code, out, err = await toolmesh(served, "config", "get", "settings/svc", token=ADMIN)
    assert code == 0, err
    for secret in secrets.values():
        assert secret not in out
    assert json.loads(out)["passphrase"] == "***"


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_down_mcp_server_says_why_its_tool_is_not_offered(served: Served) -> None:
    port = _closed_port()
    values = [{"type": "mcp", "key": "clock", "value": json.dumps(
                  {"url": f"http://127.0.0.1:{port}/mcp", "remote-name": "now"})},
              {"type": "tool", "key": "clock", "value": json.dumps(
                  {"type": "mcp-tool", "name": "clock", "description": "the time",
                   "mcp-tool": "clock"})}]
    status, body = await post(served, "api/v1/config", {"operation": "put", "values": values},
                              ADMIN)
    assert status == 200 and "error" not in body, body
    # the first dialog step finds it unavailable; `toolmesh tools` then says why
    status, body = await post(served, "api/v1/flow/default/service/agent",
                              {"question": "use clock with {}"}, ADMIN)
    assert status == 200, body
    code, out, err = await toolmesh(served, "tools", "--json", token=ADMIN)
    assert code == 0, err
    (clock,) = [t for t in json.loads(out)["tools"] if t["key"] == "clock"]
    assert clock["status"] == "not-offered"
    assert f"at http://127.0.0.1:{port}/mcp: it cannot be reached" in clock["reason"], clock


#: spellings of private hosts that a token without admin must not put (tests/mcp/
#: test_host_names.py has the longer table); a public name and address still pass
SPELLED_PRIVATE = ["localhost.", "LOCALHOST.", "%6c%6f%63%61%6c%68%6f%73%74", "ｌｏｃａｌｈｏｓｔ",
                   "xn--localhost-", "127.0.0.1.", "0x7f000001", "2130706433", "0177.0.0.1",
                   "127.1", "[::ffff:7f00:1]", "[fe80::1%25eth0]", "169.254.169.254.",
                   "localhost\u3002", "foo.localhost"]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_private_host_however_spelled_is_refused_at_put(served: Served) -> None:
    writer = await create(served, "-w", "default", "-c", "config:write")
    answered = {}
    for n, host in enumerate(SPELLED_PRIVATE):
        status, body = await post(served, "api/v1/config",
                                  _put(f"s{n}", f"http://{host}:5432/mcp"), writer)
        answered[host] = (status, _error(body) if status != 200 else "")
    passed = [(await post(served, "api/v1/config", _put(f"p{n}", url), writer))[0]
              for n, url in enumerate(["https://8.8.8.8/mcp", "https://mcp.example.org/mcp"])]
    refused = {host: message for host, (status, message) in answered.items() if status == 403}
    assert set(refused) == set(SPELLED_PRIVATE), answered
    assert all("may not point at" in message for message in refused.values())
    assert passed == [200, 200]


@pytest.mark.parametrize("host", ["localhost.", "0x7f000001", "%6c%6f%63%61%6c%68%6f%73%74"])
async def test_a_public_item_cannot_reach_loopback_however_spelled_when_it_connects(
        mcp_server: ServerProcess, caplog: pytest.LogCaptureFixture, host: str) -> None:
    from toolmesh.mcp import McpError, McpServer, SessionPool

    pool = SessionPool(connect_timeout=10)
    try:
        public = McpServer.from_config("spelled", {
            "url": mcp_server.url.replace("127.0.0.1", host), "remote-name": "echo",
            "reach": "public"})
        with pytest.raises(McpError) as refused:
            await pool.call_tool(public, {"text": "hi"}, timeout=10)
    finally:
        await pool.close()
    assert "cannot be reached" in refused.value.message
    # refused for where it points, not because a resolver did not know the name
    assert "is a private, loopback or link-local address" in caplog.text
