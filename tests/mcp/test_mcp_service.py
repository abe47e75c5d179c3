"""The mcp-tool service on every bus backend, with a real config service (SQLite) and real MCP
servers in their own processes; config changes apply while it runs."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Backend
from tests.mcp.servers import ServerProcess, start_server, stdio_item
from toolmesh import RequestClient, RequestError
from toolmesh.config.client import ConfigClient
from toolmesh.config.service import ConfigService
from toolmesh.config.stdio import StdioAllowList
from toolmesh.config.store import open_store
from toolmesh.config.store.base import ConfigStore
from toolmesh.mcp import McpServer, McpToolClient, McpToolService


@dataclass
class Stack:
    service: McpToolService
    client: McpToolClient
    wire: RequestClient  # raw TrustGraph-style requests; error responses are returned, not raised
    config: ConfigClient
    store: ConfigStore

    async def put(self, items: dict[str, dict[str, Any]]) -> None:
        """Store ``mcp`` items and wait until the service applies them."""
        version = await self.config.put({("mcp", k): json.dumps(v) for k, v in items.items()})
        async with asyncio.timeout(10):
            await self.service.wait_for_config(version)

    async def delete(self, *ids: str) -> None:
        version = await self.config.delete([("mcp", id) for id in ids])
        async with asyncio.timeout(10):
            await self.service.wait_for_config(version)

    async def request(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self.wire.request(body, timeout=30)


@pytest.fixture
async def stack(backend: Backend, tmp_path: Path) -> AsyncIterator[Stack]:
    t = backend.topic("mcp")
    config_queues = {"request_queue": f"request:tg:{t}-config",
                     "response_queue": f"response:tg:{t}-config",
                     "push_queue": f"notify:tg:{t}-config"}
    queues = {"request_queue": f"request:tg:{t}-mcp", "response_queue": f"response:tg:{t}-mcp"}
    notify = {"notify_queue": f"notify:tg:{t}-mcp"}
    store = await open_store(str(tmp_path / "config.db"))
    async with AsyncExitStack() as s:
        s.push_async_callback(store.close)
        bus = await backend.connect()
        # the test servers run as this interpreter: the one command stdio items may start
        allow = StdioAllowList.parse(sys.executable)
        await s.enter_async_context(ConfigService(bus, store, **config_queues,
                                                  stdio_allow=allow))
        service = McpToolService(bus, **queues, **notify, config_queues=config_queues,
                                 call_timeout=20, stdio_allow=allow)
        await s.enter_async_context(service)
        callers = await backend.connect()  # callers reach the service as another process would
        client = await s.enter_async_context(McpToolClient(callers, **queues, **notify))
        wire = await s.enter_async_context(
            RequestClient(callers, **queues, error_of=lambda response: None))
        config = await s.enter_async_context(ConfigClient(
            callers, timeout=10, request_queue=config_queues["request_queue"],
            response_queue=config_queues["response_queue"]))
        yield Stack(service, client, wire, config, store)


@pytest.fixture
async def http() -> AsyncIterator[ServerProcess]:
    server = await start_server("streamable-http", name="alpha")
    yield server
    await server.stop()


def item(server: ServerProcess, remote_name: str, **extra: Any) -> dict[str, Any]:
    return {"url": server.url, "remote-name": remote_name, **extra}


async def test_a_calls_idempotency_key_reaches_the_server_in_its_meta(
        stack: Stack, http: ServerProcess) -> None:
    """The agent's key for a call (docs/dialogs.md) goes to the MCP server in ``_meta``,
    with or without progress; a call without one is named by its request's id (the same on
    each delivery), and a caller's plain ``idempotency-key`` goes as it is."""
    await stack.put({"meta": item(http, "meta")})
    plain = json.loads(await stack.client.invoke("meta", {}, timeout=20, key="d1/1/call_1"))
    assert plain["io.toolmesh/idempotency-key"] == "d1/1/call_1"

    async def sink(progress: Any) -> None:
        pass

    followed = json.loads(await stack.client.invoke("meta", {}, timeout=20, key="d1/2/c",
                                                    on_progress=sink))
    assert followed["io.toolmesh/idempotency-key"] == "d1/2/c"
    # the SDK's own entry is kept beside ours (its server side names it in snake case)
    assert "progressToken" in followed or "progress_token" in followed
    none = json.loads(await stack.client.invoke("meta", {}, timeout=20))
    assert none["io.toolmesh/idempotency-key"].startswith("request:")
    plain = await stack.client._rpc.request({"name": "meta", "parameters": {},
                                             "idempotency-key": "gw/k1"}, timeout=20)
    assert json.loads(plain["text"])["io.toolmesh/idempotency-key"] == "gw/k1"


async def test_calls_and_discovery_on_trustgraphs_wire(stack: Stack, http: ServerProcess) -> None:
    await stack.put({"add": item(http, "add"), "weather": item(http, "weather")})
    assert await stack.client.invoke("add", {"a": 2, "b": 3}, timeout=20) == "5"

    # TrustGraph sends the parameters as JSON text; the object comes back as JSON text.
    response = await stack.request({"name": "weather",
                                    "parameters": json.dumps({"city": "Paris", "days": 3})})
    assert response == {"error": None, "text": "Paris: sunny for 3 days",
                        "object": json.dumps({"result": "Paris: sunny for 3 days"})}

    described = await stack.client.describe("weather", timeout=10)
    assert described["name"] == "weather"
    assert described["description"] == "The weather forecast for a city."
    assert described["inputSchema"]["properties"]["city"]["type"] == "string"
    raw = await stack.request({"name": "add", "operation": "describe"})
    assert raw["error"] is None and raw["text"] is None
    assert json.loads(raw["object"])["inputSchema"]["required"] == ["a", "b"]

    # Image content reaches the caller as readable text.
    await stack.put({"image": item(http, "image")})
    assert await stack.client.invoke("image", {}, timeout=10) == "[image: image/png, 67 bytes]"


async def test_a_changed_or_deleted_item_is_announced_to_clients_holding_its_schema(
        stack: Stack, http: ServerProcess) -> None:
    # A client (the agent) may describe an item before this service applies its change, and
    # keep the old remote tool's schema; the notice makes it read the item again.
    heard: list[list[str]] = []
    notice = asyncio.Event()

    def on_notice(workspace: str, ids: list[str]) -> None:
        assert workspace == "default"
        heard.append(ids)
        notice.set()

    await stack.client.watch_tools(on_notice)
    await stack.put({"spot": item(http, "weather"), "steady": item(http, "echo")})
    assert heard == []  # new items: nobody can hold a schema of them
    await stack.put({"spot": item(http, "forecast")})
    async with asyncio.timeout(10):
        await notice.wait()
    assert heard == [["spot"]]  # the unchanged item is not named
    described = await stack.client.describe("spot", timeout=10)
    assert described["name"] == "forecast"
    notice.clear()
    await stack.delete("spot")
    async with asyncio.timeout(10):
        await notice.wait()
    assert heard[-1] == ["spot"]


async def test_concurrent_calls_share_one_session(stack: Stack, http: ServerProcess) -> None:
    await stack.put({"echo": item(http, "echo"), "stats": item(http, "stats")})
    texts = await asyncio.gather(*(stack.client.invoke("echo", {"text": f"m{i}"}, timeout=20)
                                   for i in range(40)))
    assert texts == [f"m{i}" for i in range(40)]
    seen = json.loads(await stack.client.invoke("stats", {}, timeout=10))
    assert seen["initializations"] == 1 and seen["calls"] == 41


async def test_every_failure_is_an_error_response_and_the_service_lives_on(
        stack: Stack, http: ServerProcess) -> None:
    await stack.put({"fail": item(http, "fail"), "slow": item(http, "slow"),
                     "echo": item(http, "echo"),
                     "gone": {"url": "http://127.0.0.1:9/mcp"},
                     "nameless": item(http, "no-such-tool")})

    async def error_of(body: dict[str, Any]) -> dict[str, Any]:
        response = await stack.request(body)
        assert response["text"] is None and response["object"] is None, response
        return response["error"]

    error = await error_of({"name": "nope", "parameters": {}})
    assert error == {"type": "mcp-error", "message":
                     "no MCP tool 'nope' is configured in workspace 'default' (configured: echo, "
                     "fail, gone, nameless, slow)"}
    assert (await error_of({"parameters": {}}))["type"] == "bad-request"
    bad = await error_of({"name": "echo", "parameters": "[1, 2]"})
    assert bad["type"] == "bad-request" and "'parameters' must be a JSON object" in bad["message"]
    assert "not valid JSON" in (await error_of({"name": "echo", "parameters": "{oops"}))["message"]
    assert (await error_of({"name": "echo", "operation": "dance"}))["type"] == "bad-request"
    # a falsy non-string operation is refused, not taken for the default "invoke"
    refused = await error_of({"name": "echo", "operation": 0, "parameters": {"text": "x"}})
    assert refused["type"] == "bad-request" and "'operation' must be a string" in refused["message"]
    assert (await error_of({"name": "echo", "timeout": -1}))["type"] == "bad-request"

    tool_error = await error_of({"name": "fail", "parameters": {}})
    assert tool_error["type"] == "tool-error" and "the weather station is on fire" in tool_error["message"]
    with pytest.raises(RequestError) as raised:
        await stack.client.invoke("fail", {}, timeout=10)
    assert raised.value.type == "tool-error"

    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RequestError) as raised:
        await stack.client.invoke("slow", {"seconds": 60}, timeout=0.5)
    assert raised.value.type == "mcp-error" and "timed out after 0.5 s" in raised.value.message
    assert loop.time() - started < 3
    timed_out = await error_of({"name": "slow", "parameters": {"seconds": 60}, "timeout": 0.3})
    assert "timed out after 0.3 s" in timed_out["message"]

    unreachable = await error_of({"name": "gone", "parameters": {}})
    assert unreachable["type"] == "mcp-error"
    assert unreachable["message"].startswith("cannot connect to MCP server 'gone' at "
                                             "http://127.0.0.1:9/mcp")
    missing = await error_of({"name": "nameless", "operation": "describe"})
    assert "has no tool 'no-such-tool' (tools: add, echo," in missing["message"]

    assert await stack.client.invoke("echo", {"text": "alive"}, timeout=10) == "alive"


async def test_config_changes_apply_without_a_restart(stack: Stack, http: ServerProcess) -> None:
    beta = await start_server("streamable-http", name="beta")
    try:
        await stack.put({"hello": item(http, "hello")})
        assert await stack.client.invoke("hello", {}, timeout=20) == "hello from alpha"
        old = stack.service.servers["hello"]
        assert stack.service.pool.connected(old)

        # A new URL: the old session is closed, the next call goes to the other server.
        await stack.put({"hello": item(beta, "hello")})
        assert not stack.service.pool.connected(old)
        assert await stack.client.invoke("hello", {}, timeout=20) == "hello from beta"

        # A new token on the same URL: a new session too (the server sees it).
        await stack.put({"hello": item(beta, "whoami", **{"auth-token": "tok-2"})})
        assert await stack.client.invoke("hello", {}, timeout=20) == "Bearer tok-2"

        # A new item appears; a deleted one is refused clearly.
        await stack.put({"echo": item(http, "echo")})
        assert await stack.client.invoke("echo", {"text": "new"}, timeout=20) == "new"
        current = stack.service.servers["hello"]
        await stack.delete("hello")
        assert not stack.service.pool.connected(current)
        with pytest.raises(RequestError) as raised:
            await stack.client.invoke("hello", {}, timeout=10)
        assert raised.value.type == "mcp-error"
        assert raised.value.message == ("no MCP tool 'hello' is configured in workspace 'default' "
                                         "(configured: echo)")
    finally:
        await beta.stop()


async def test_an_item_not_pushed_yet_is_fetched_when_a_call_names_it(
        stack: Stack, http: ServerProcess) -> None:
    # Another service (the agent) may act on a config version before this one has applied
    # it; here the item is written behind the config service's back, so no push announces it.
    await stack.store.put("default", [("mcp", "echo", json.dumps(item(http, "echo")))])
    assert "echo" not in stack.service.servers
    assert await stack.client.invoke("echo", {"text": "found"}, timeout=20) == "found"


async def test_stdio_servers_through_the_service(stack: Stack) -> None:
    await stack.put({
        "weather": {**stdio_item("stdio-weather"), "remote-name": "weather"},
        "get_current_time": {"transport": "stdio", "command": sys.executable,
                             "args": ["-m", "mcp_server_time"]}})
    assert await stack.client.invoke("weather", {"city": "Oslo", "days": 2}, timeout=30) \
        == "Oslo: sunny for 2 days"
    response = await stack.request({"name": "get_current_time",
                                    "parameters": json.dumps({"timezone": "UTC"})})
    assert response["error"] is None
    assert json.loads(response["object"])["timezone"] == "UTC"
    # The service's shutdown (at the end of the test) stops both children.


def test_the_configured_item_becomes_a_server_with_its_defaults() -> None:
    server = McpServer.from_config("get_bank_balance", {"url": "http://h:1/mcp",
                                                         "auth-token": "t0p"})
    assert (server.remote_name, server.transport) == ("get_bank_balance", "streamable-http")
    assert "t0p" not in repr(server) and "auth_token='***'" in repr(server)
