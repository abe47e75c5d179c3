"""SessionPool against real MCP servers in their own processes: streamable HTTP, SSE, stdio,
and an independent server from PyPI (mcp-server-time)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pytest

from tests.mcp.servers import ServerProcess, start_server, stdio_item
from toolmesh.config.errors import ConfigError
from toolmesh.mcp import McpError, McpResult, McpServer, SessionPool

TRANSPORTS = ["streamable-http", "sse", "stdio"]


@dataclass
class Target:
    """A running test server and how to name its tools as ``mcp`` items."""

    transport: str
    item: dict[str, Any]
    process: ServerProcess | None = None

    def tool(self, remote_name: str, id: str | None = None, **extra: Any) -> McpServer:
        return McpServer.from_config(id or remote_name,
                                     {**self.item, "remote-name": remote_name, **extra})


async def make_target(transport: str, **options: Any) -> Target:
    if transport == "stdio":
        return Target("stdio", stdio_item())
    process = await start_server(transport, **options)
    return Target(transport, {"url": process.url, "transport": transport}, process)


@pytest.fixture
async def pool() -> AsyncIterator[SessionPool]:
    pool = SessionPool(connect_timeout=20)
    yield pool
    await pool.close()


@pytest.fixture(params=TRANSPORTS)
async def target(request: pytest.FixtureRequest) -> AsyncIterator[Target]:
    t = await make_target(request.param)
    yield t
    if t.process is not None:
        await t.process.stop()


async def stats(pool: SessionPool, target: Target, id: str = "stats") -> dict[str, Any]:
    result = await pool.call_tool(target.tool("stats", id=id), {}, timeout=20)
    assert isinstance(result.object, dict), result
    return result.object


def alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists (a zombie counts: it is not reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_calls_on_every_transport(pool: SessionPool, target: Target) -> None:
    assert await pool.call_tool(target.tool("add"), {"a": 2, "b": 3}, timeout=30) \
        == McpResult("5", {"result": 5}, False)
    weather = await pool.call_tool(target.tool("weather"), {"city": "Paris"}, timeout=10)
    assert weather.text == "Paris: sunny for 1 day"
    image = await pool.call_tool(target.tool("image"), {}, timeout=10)
    assert image.text == "[image: image/png, 67 bytes]" and not image.is_error
    fail = await pool.call_tool(target.tool("fail"), {}, timeout=10)
    assert fail.is_error and fail.object is None
    assert fail.text is not None and "the weather station is on fire" in fail.text


async def test_one_session_serves_sequential_and_concurrent_calls(
        pool: SessionPool, target: Target) -> None:
    # Several mcp items naming tools of the same server share its one session.
    for i in range(20):
        result = await pool.call_tool(target.tool("echo", id=f"echo-{i % 3}"),
                                      {"text": f"s{i}"}, timeout=30)
        assert result.text == f"s{i}"
    results = await asyncio.gather(*(
        pool.call_tool(target.tool("add", id=f"add-{i % 4}"), {"a": i, "b": 1}, timeout=30)
        for i in range(50)))
    assert [r.object for r in results] == [{"result": i + 1} for i in range(50)]
    seen = await stats(pool, target)
    assert seen["initializations"] == 1
    assert seen["calls"] == 71  # every call above, plus this stats call


async def test_a_deadline_cancels_the_call_on_the_server_and_the_session_lives_on(
        pool: SessionPool, target: Target) -> None:
    await pool.call_tool(target.tool("echo"), {"text": "warm"}, timeout=30)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(McpError, match=r"did not finish tool 'slow': timed out after 0.5 s") as e:
        await pool.call_tool(target.tool("slow"), {"seconds": 60}, timeout=0.5)
    assert e.value.type == "mcp-error"
    assert loop.time() - started < 3
    # The server saw notifications/cancelled and its handler was cancelled.
    cancelled = await pool.call_tool(target.tool("wait_cancelled"), {"timeout": 10}, timeout=15)
    assert cancelled.object == {"result": 1}
    seen = await stats(pool, target)
    assert seen["cancel_notifications"] == 1 and seen["cancelled"] == [60]
    assert (await pool.call_tool(target.tool("echo"), {"text": "still"}, timeout=10)).text == "still"
    assert (await stats(pool, target))["initializations"] == 1


async def test_list_tools_is_cached_per_connection(pool: SessionPool, target: Target) -> None:
    tools = await pool.list_tools(target.tool("weather"), timeout=30)
    weather = next(t for t in tools if t.name == "weather")
    assert weather.description == "The weather forecast for a city."
    assert weather.input_schema["properties"]["city"]["type"] == "string"
    assert weather.input_schema.get("required") == ["city"]
    assert await pool.list_tools(target.tool("echo"), timeout=30) is tools


async def test_an_unknown_remote_tool_is_named_with_the_servers_tools(
        pool: SessionPool, target: Target) -> None:
    with pytest.raises(McpError) as e:
        await pool.call_tool(target.tool("teleport", id="beam-me-up"), {}, timeout=30)
    assert "MCP server 'beam-me-up' has no tool 'teleport' (tools: add, echo, fail," \
        in e.value.message


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_a_killed_http_server_is_reconnected_when_it_is_back(
        pool: SessionPool, transport: str) -> None:
    t = await make_target(transport)
    assert t.process is not None
    try:
        echo = t.tool("echo")
        assert (await pool.call_tool(echo, {"text": "one"}, timeout=30)).text == "one"
        tools = await pool.list_tools(echo, timeout=10)

        await t.process.kill()
        if transport == "sse":
            # The SSE stream closing tells the connection by itself; streamable HTTP finds
            # out on the next call (connection refused, then the call is retried anew).
            await asyncio.wait_for(pool.wait_ended(echo), 10)
        with pytest.raises(McpError) as e:
            await pool.call_tool(echo, {"text": "two"}, timeout=10)
        assert e.value.message.startswith(f"cannot connect to MCP server 'echo' at {t.process.url}")

        await t.process.restart()  # same port
        assert (await pool.call_tool(echo, {"text": "three"}, timeout=30)).text == "three"
        assert await pool.list_tools(echo, timeout=10) is not tools  # listed anew

        # Killed and back before any call noticed: the stale session is replaced.
        await t.process.kill()
        if transport == "sse":
            await asyncio.wait_for(pool.wait_ended(echo), 10)
        await t.process.restart()
        assert (await pool.call_tool(echo, {"text": "four"}, timeout=30)).text == "four"
        assert (await stats(pool, t))["initializations"] == 1
    finally:
        await t.process.stop()


async def test_a_dead_stdio_child_is_restarted_by_the_next_call(pool: SessionPool) -> None:
    t = await make_target("stdio")
    first = (await stats(pool, t))["pid"]
    os.kill(first, signal.SIGKILL)
    await asyncio.wait_for(pool.wait_ended(t.tool("stats")), 10)
    assert not alive(first)  # noticed, and reaped
    second = await stats(pool, t)
    assert second["pid"] != first and second["initializations"] == 1


async def test_closing_the_pool_reaps_stdio_children() -> None:
    pool = SessionPool()
    a, b = Target("stdio", stdio_item("a")), Target("stdio", stdio_item("b"))
    pids = [(await stats(pool, a, "a"))["pid"], (await stats(pool, b, "b"))["pid"]]
    assert all(alive(pid) for pid in pids)
    await pool.close()
    assert not any(alive(pid) for pid in pids)
    with pytest.raises(McpError, match="closed"):
        await pool.call_tool(a.tool("echo"), {"text": "x"}, timeout=5)


async def test_closing_the_pool_does_not_wait_on_a_server_that_never_answers() -> None:
    # It accepts the connection and never answers the handshake: a shutdown or a config
    # change must not wait the whole close timeout (10 s) for it.
    mute = await start_server("streamable-http", args=("--mute",))
    try:
        pool = SessionPool(connect_timeout=30)
        server = McpServer.from_config("mute", {"url": mute.url})
        call = asyncio.create_task(pool.call_tool(server, {}, timeout=30))
        await asyncio.sleep(0.3)  # let the call connect and start its handshake
        loop = asyncio.get_running_loop()
        started = loop.time()
        await pool.close()
        took = loop.time() - started
        with pytest.raises(McpError):
            await call
        assert took < 2.0, took
    finally:
        await mute.stop()


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_stdio_child_that_ignores_eof_and_sigterm_is_killed(pool: SessionPool) -> None:
    t = Target("stdio", stdio_item("stubborn", stubborn=True))
    pid = (await stats(pool, t))["pid"]
    await pool.forget("stats")  # closes stdin, waits, SIGTERM, waits, SIGKILL
    assert not alive(pid)


async def test_changed_settings_open_a_new_session_and_forget_closes_it(
        pool: SessionPool) -> None:
    t = await make_target("streamable-http")
    try:
        one = t.tool("whoami", id="who", **{"auth-token": "token-one"})
        two = t.tool("whoami", id="who", **{"auth-token": "token-two"})
        assert (await pool.call_tool(one, {}, timeout=30)).text == "Bearer token-one"
        assert (await pool.call_tool(two, {}, timeout=30)).text == "Bearer token-two"
        assert not pool.connected(one) and pool.connected(two)
        # A new remote name on the same connection settings reuses the session.
        renamed = t.tool("echo", id="who", **{"auth-token": "token-two"})
        assert renamed.connection_key == two.connection_key
        assert (await pool.call_tool(renamed, {"text": "same"}, timeout=10)).text == "same"
        seen = (await pool.call_tool(t.tool("stats", id="who", **{"auth-token": "token-two"}),
                                     {}, timeout=10)).object
        assert seen is not None and seen["initializations"] == 2
        await pool.forget("who")
        assert not pool.connected(two)
    finally:
        assert t.process is not None
        await t.process.stop()


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_the_bearer_token_is_sent_and_never_shown(
        pool: SessionPool, transport: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    t = await make_target(transport, token="s3cr3t-t0ken")
    assert t.process is not None
    try:
        good = t.tool("whoami_digest", **{"auth-token": "s3cr3t-t0ken"})
        assert (await pool.call_tool(good, {}, timeout=30)).text \
            == hashlib.sha256(b"Bearer s3cr3t-t0ken").hexdigest()

        bad = t.tool("whoami_digest", id="intruder", **{"auth-token": "wr0ng-t0ken"})
        with pytest.raises(McpError) as refused:
            await pool.call_tool(bad, {}, timeout=30)
        assert "cannot connect to MCP server 'intruder'" in refused.value.message
        assert "HTTP 401" in refused.value.message and "auth-token" in refused.value.message
        assert "refused the token" in refused.value.message

        await t.process.kill()
        with pytest.raises(McpError) as lost:
            await pool.call_tool(good, {}, timeout=10)
    finally:
        await t.process.stop()
    shown = [refused.value.message, lost.value.message, repr(good), str(bad), caplog.text,
             good.connection_key]
    assert caplog.text  # the logs were captured
    for text in shown:
        assert "s3cr3t-t0ken" not in text and "wr0ng-t0ken" not in text


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_the_auth_token_wins_over_credentials_in_the_url(pool: SessionPool,
                                                               transport: str) -> None:
    # httpx sends a URL's user:password as Basic auth in place of the default header: the
    # server then refused the token it never got
    t = await make_target(transport, token="s3cr3t-t0ken")
    assert t.process is not None
    try:
        url = t.process.url.replace("http://", "http://user:pa55@")
        server = t.tool("whoami_digest", url=url, **{"auth-token": "s3cr3t-t0ken"})
        assert (await pool.call_tool(server, {}, timeout=30)).text \
            == hashlib.sha256(b"Bearer s3cr3t-t0ken").hexdigest()
    finally:
        await t.process.stop()


async def test_unreachable_servers_get_messages_a_user_can_act_on(
        pool: SessionPool, caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = McpServer.from_config("gone", {"url": f"http://127.0.0.1:{port}/mcp"})
    with pytest.raises(McpError) as e:
        await pool.call_tool(gone, {}, timeout=10)
    # what is (not) listening is not told (mcp/addresses.py): only the operator's log says
    assert e.value.message == (
        f"cannot connect to MCP server 'gone' at http://127.0.0.1:{port}/mcp: it cannot be "
        "reached as an MCP server this item may use (the operator's log says why); check the "
        "item's url, or ask the operator")
    assert "connection refused" in caplog.text

    ghost = McpServer.from_config("ghost", {"transport": "stdio", "command": "/nonexistent/mcp"})
    with pytest.raises(McpError) as e:
        await pool.call_tool(ghost, {}, timeout=10)
    assert e.value.message.startswith("cannot start MCP server 'ghost' (/nonexistent/mcp): "
                                      "No such file or directory")

    quits = McpServer.from_config("quits", {"transport": "stdio", "command": sys.executable,
                                            "args": ["-c", "pass"]})
    with pytest.raises(McpError, match=r"cannot start MCP server 'quits' \(.*\): the process "
                                       "exited before the MCP handshake"):
        await pool.call_tool(quits, {}, timeout=10)


async def test_the_time_server_from_pypi_over_stdio(pool: SessionPool) -> None:
    # mcp-server-time: an independent server (the MCP project's reference time server).
    server = McpServer.from_config("get_current_time", {
        "transport": "stdio", "command": sys.executable, "args": ["-m", "mcp_server_time"]})
    result = await pool.call_tool(server, {"timezone": "UTC"}, timeout=60)
    assert not result.is_error, result.text
    data = result.object if isinstance(result.object, dict) else json.loads(result.text or "")
    assert data["timezone"] == "UTC"
    when = datetime.fromisoformat(data["datetime"])
    assert abs((when - datetime.now(timezone.utc)).total_seconds()) < 120
    names = {t.name for t in await pool.list_tools(server, timeout=30)}
    assert {"get_current_time", "convert_time"} <= names
    bad = await pool.call_tool(server, {"timezone": "Mars/Olympus_Mons"}, timeout=30)
    assert bad.is_error and bad.text and "Invalid timezone" in bad.text


def test_the_connection_key_follows_what_shapes_the_connection() -> None:
    base = McpServer.from_config("t", {"url": "http://h/mcp", "auth-token": "a"})
    renamed = McpServer.from_config("t", {"url": "http://h/mcp", "auth-token": "a",
                                          "remote-name": "other"})
    assert renamed.connection_key == base.connection_key
    for changed in ({"url": "http://h2/mcp", "auth-token": "a"},
                    {"url": "http://h/mcp", "auth-token": "b"},
                    {"url": "http://h/mcp", "auth-token": "a", "transport": "sse"}):
        assert McpServer.from_config("t", changed).connection_key != base.connection_key
    stdio = {"transport": "stdio", "command": "srv", "args": ["-x"], "env": {"API_KEY": "v1"}}
    key = McpServer.from_config("s", stdio).connection_key
    for change in ({"command": "srv2"}, {"args": ["-y"]}, {"env": {"API_KEY": "v2"}}):
        assert McpServer.from_config("s", {**stdio, **change}).connection_key != key
    shown = repr(McpServer.from_config("s", stdio))
    assert "v1" not in shown and "'API_KEY': '***'" in shown


@pytest.mark.parametrize(("value", "complaint"), [
    ({"transport": "stdio"}, "needs 'command'"),
    ({"url": "ftp://h/x"}, "needs an http:// or https:// 'url'"),
    ({"url": "http://h/mcp", "transport": "pigeon"}, "transport 'pigeon' is not one of"),
    ({"transport": "stdio", "command": "x", "args": "-v"}, "'args' must be a list"),
    ({"url": "http://h/mcp", "auth-token": 7}, "'auth-token' must be a string"),
    ("[1]", "must be a JSON object"),
])
def test_unusable_items_are_refused_by_name(value: Any, complaint: str) -> None:
    with pytest.raises(ConfigError, match="mcp/x: ") as e:
        McpServer.from_config("x", value)
    assert complaint in e.value.message
