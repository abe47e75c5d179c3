"""toolmesh as an MCP server, to a client it did not write: the ``mcp`` SDK's own client over
streamable HTTP against a real ``toolmesh serve`` (the joke service announces tell-joke).

Two servers serve the module's tests (one without a token, one with the admin token
:data:`ADMIN`): the tests only add what they name themselves (a tool of their own name, an
item of another workspace, tokens of their own), so they may share one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import mcp_types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.dialogs.test_embedded_restart import _offered
from tests.gateway.test_scoped_tokens import ADMIN, create
from tests.processes import run_toolmesh
from tests.servers import Served, serving, toolmesh_serve

@pytest.fixture(scope="module")
def open_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``toolmesh serve`` without a gateway token."""
    with serving(tmp_path_factory.mktemp("endpoint-open")) as served:
        yield served


@pytest.fixture(scope="module")
def with_token(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``toolmesh serve`` with the gateway token :data:`ADMIN`."""
    with serving(tmp_path_factory.mktemp("endpoint-with-token"),
                 extra_env={"TOOLMESH_GATEWAY_TOKEN": ADMIN}) as served:
        yield served


@asynccontextmanager
async def mcp_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            streamable_http_client(url, http_client=http) as (read, write, *_), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_an_mcp_client_lists_and_calls_the_workspaces_tools(open_served: Served) -> None:
    served = open_served
    await _offered(served.url, "tell-joke")
    async with mcp_session(served.url + "mcp") as session:
        listed = await session.list_tools()
        joke = await session.call_tool("tell-joke", {"topic": "cats"})
        wrong = await session.call_tool("tell-joke", {"topic": 7})
        unknown = await session.call_tool("no-such-tool", {})
    [tool] = [t for t in listed.tools if t.name == "tell-joke"]
    assert tool.input_schema["properties"]["topic"]["type"] == "string"
    assert tool.input_schema["required"] == ["topic"]
    assert not joke.is_error and joke.content[0].text.startswith("Hey trustgraph! ")
    assert wrong.is_error and "invalid arguments" in wrong.content[0].text
    assert unknown.is_error and "there is no tool 'no-such-tool'" in unknown.content[0].text


async def test_a_config_change_is_told_to_the_session_and_the_new_list_shows_it(
        open_served: Served) -> None:
    served = open_served
    changed = asyncio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            changed.set()

    await _offered(served.url, "tell-joke")
    headers: dict[str, str] = {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            streamable_http_client(served.url + "mcp", http_client=http) as (read, write, *_), \
            ClientSession(read, write, message_handler=on_message) as session:
        await session.initialize()
        before = {t.name for t in (await session.list_tools()).tools}
        code, _, err = await run_toolmesh(
            "config", "put", "tool/shout", "--url", served.url, stdin_text=json.dumps({
                "type": "text-completion", "name": "shout",
                "description": "Say it louder",
                "arguments": [{"name": "text", "type": "string",
                               "description": "what to say"}]}))
        assert code == 0, err
        async with asyncio.timeout(20):
            await changed.wait()
        after = {t.name for t in (await session.list_tools()).tools}
    assert "shout" not in before and after == before | {"shout"}


async def test_tokens_decide_what_a_client_may_list_call_and_reach(with_token: Served) -> None:
    served = with_token
    await _offered_with(served.url, "tell-joke", ADMIN)
    invoker = await create(served, "-w", "default", "-c", "tools:invoke")
    reader = await create(served, "-w", "default", "-c", "agent,config:read")
    elsewhere = await create(served, "-w", "ws2", "-c", "tools:invoke")
    async with mcp_session(served.url + "mcp", invoker) as session:
        allowed = await session.list_tools()
        called = await session.call_tool("tell-joke", {"topic": "food"})
    async with mcp_session(served.url + "mcp", reader) as session:
        hidden = await session.list_tools()
        refused = await session.call_tool("tell-joke", {"topic": "food"})
    async with httpx2.AsyncClient(timeout=10) as http:
        anonymous = await http.post(served.url + "mcp", json=INITIALIZE,
                                    headers=MCP_HEADERS)
        wrong = await http.post(served.url + "mcp", json=INITIALIZE,
                                headers={**MCP_HEADERS, "Authorization": "Bearer nope"})
        other = await http.post(served.url + "mcp/default", json=INITIALIZE,
                                headers={**MCP_HEADERS,
                                         "Authorization": f"Bearer {elsewhere}"})
        page = await http.post(served.url + "mcp", json=INITIALIZE,
                               headers={**MCP_HEADERS, "Origin": "https://evil.example",
                                        "Authorization": f"Bearer {invoker}"})
    async with mcp_session(served.url + "mcp", elsewhere) as session:
        own = await session.list_tools()  # ws2 has no tools: nothing of default's
    assert "tell-joke" in {t.name for t in allowed.tools} and not called.is_error
    assert hidden.tools == [] and refused.is_error and "tools:invoke" in refused.content[0].text
    assert (anonymous.status_code, wrong.status_code) == (401, 401)
    assert other.status_code == 403 and "workspace 'default'" in other.text
    assert page.status_code == 403
    assert own.tools == []


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


async def _offered_with(url: str, tool: str, token: str) -> None:
    async with asyncio.timeout(20):
        while True:
            code, out, err = await run_toolmesh("tools", "--json", "--url", url, "-t", token)
            assert code == 0, err
            if any(t.get("name") == tool and t.get("status") == "available"
                   for t in json.loads(out)["tools"]):
                return
            await asyncio.sleep(0.1)


async def test_a_client_without_a_token_is_told_where_to_learn_how_to_authenticate(
        with_token: Served) -> None:
    served = with_token
    async with httpx2.AsyncClient(timeout=10) as http:
        refused = await http.post(served.url + "mcp", json=INITIALIZE, headers=MCP_HEADERS)
        challenge = refused.headers["WWW-Authenticate"]
        where = challenge.split('resource_metadata="', 1)[1].rstrip('"')
        metadata = (await http.get(where)).json()
    assert refused.status_code == 401 and challenge.startswith("Bearer ")
    assert where == served.url + ".well-known/oauth-protected-resource/mcp"
    assert metadata["resource"] == served.url + "mcp"
    assert metadata["bearer_methods_supported"] == ["header"]


async def test_a_workspace_imports_anothers_tools_through_toolmesh_as_an_mcp_server(
        open_served: Served) -> None:
    """toolmesh's own MCP client pointed at toolmesh: workspace ``b`` has an mcp item whose
    server is ``/mcp/default`` of the same deployment, and calls default's tell-joke with it."""
    served = open_served
    await _offered(served.url, "tell-joke")
    code, _, err = await run_toolmesh(
        "config", "put", "mcp/home", "-w", "b", "--url", served.url,
        stdin_text=json.dumps({"url": served.url + "mcp/default",
                               "remote-name": "tell-joke"}))
    assert code == 0, err
    code, out, err = await run_toolmesh("mcp", "invoke", "home", "-w", "b",
                                        "-P", '{"topic": "food"}', "--url", served.url)
    assert code == 0, err
    assert out.startswith("Hey trustgraph! ")


async def test_a_streaming_services_pieces_come_as_progress_then_the_whole(
        tmp_path: Path) -> None:
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with toolmesh_serve(tmp_path, "--tool-service", "speller:Speller",
                              cwd=Path(__file__).parent / "services") as served:
        await _offered(served.url, "spell")
        async with mcp_session(served.url + "mcp") as session:
            spelled = await session.call_tool("spell", {"word": "toolmesh"},
                                              progress_callback=on_progress)
            quiet = await session.call_tool("spell", {"word": "mcp"})
    assert seen == list("toolmesh")
    assert spelled.content[0].text == "toolmesh" and quiet.content[0].text == "mcp"


async def test_a_session_is_the_token_that_opened_it(with_token: Served) -> None:
    served = with_token
    one = await create(served, "-w", "default", "-c", "tools:invoke")
    other = await create(served, "-w", "default", "-c", "tools:invoke")
    async with httpx2.AsyncClient(timeout=10) as http:
        opened = await http.post(served.url + "mcp", json=INITIALIZE,
                                 headers={**MCP_HEADERS, "Authorization": f"Bearer {one}"})
        session = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        borrowed = await http.post(served.url + "mcp", json=listing, headers={
            **MCP_HEADERS, "Authorization": f"Bearer {other}", "mcp-session-id": session,
            "mcp-protocol-version": "2025-06-18"})
        own = await http.post(served.url + "mcp", json=listing, headers={
            **MCP_HEADERS, "Authorization": f"Bearer {one}", "mcp-session-id": session,
            "mcp-protocol-version": "2025-06-18"})
        calling = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "tell-joke", "arguments": {"topic": "food"}}}
        borrowed_call = await http.post(served.url + "mcp", json=calling, headers={
            **MCP_HEADERS, "Authorization": f"Bearer {other}", "mcp-session-id": session,
            "mcp-protocol-version": "2025-11-25"})
    assert opened.status_code == 200
    assert borrowed.status_code in (403, 404) and "tell-joke" not in borrowed.text
    assert borrowed_call.status_code in (403, 404) and "result" not in borrowed_call.text
    assert own.status_code == 200


async def test_a_2026_07_28_client_calls_and_hears_of_changes_to_its_workspace_only(
        open_served: Served) -> None:
    """The revision without sessions: each request one POST; changes come on the client's
    ``subscriptions/listen`` stream — for its own workspace, not another's."""
    from mcp import Client

    served = open_served
    await _offered(served.url, "tell-joke")
    async with Client(served.url + "mcp", mode="2026-07-28") as client, \
            Client(served.url + "mcp/other", mode="2026-07-28") as other:
        joke = await client.call_tool("tell-joke", {"topic": "food"})
        async with client.listen(tools_list_changed=True) as mine, \
                other.listen(tools_list_changed=True) as theirs:
            code, _, err = await run_toolmesh(
                "config", "put", "tool/murmur", "--url", served.url, stdin_text=json.dumps({
                    "type": "text-completion", "name": "murmur",
                    "description": "Say it softly", "arguments": [
                        {"name": "text", "type": "string", "description": "what"}]}))
            assert code == 0, err
            async with asyncio.timeout(20):
                event = await anext(aiter(mine))
            heard = asyncio.ensure_future(anext(aiter(theirs)))
            await asyncio.sleep(0.5)  # the other workspace's stream stays quiet
            assert not heard.done()
            heard.cancel()
        listed = {t.name for t in (await client.list_tools()).tools}
    assert not joke.is_error and joke.content[0].text.startswith("Hey trustgraph! ")
    assert type(event).__name__ == "ToolsListChanged"
    assert "murmur" in listed


@pytest.mark.slow  # the npm server-everything
async def test_a_proxied_mcp_servers_tool_is_called_through_mcp_and_the_stdio_bridge(
        tmp_path: Path) -> None:
    """An MCP server behind toolmesh (server-everything, from npm) offers its tool to MCP
    clients in front of it: the SDK's client at /mcp, and through ``toolmesh mcp serve``.
    A server of its own: the items it adds point at a server that ends with the test."""
    from tests.mcp.everything import running_everything
    from tests.mcp_endpoint.test_stdio_bridge import bridge

    async with running_everything() as everything, toolmesh_serve(tmp_path) as served:
        code, _, err = await run_toolmesh(
            "config", "put", "mcp/echo", "--url", served.url,
            stdin_text=json.dumps({"url": everything.url, "remote-name": "echo"}))
        assert code == 0, err
        # its arguments are the server's inputSchema: the item declares none
        code, _, err = await run_toolmesh(
            "config", "put", "tool/echo", "--url", served.url, stdin_text=json.dumps({
                "type": "mcp-tool", "name": "echo", "mcp-tool": "echo",
                "description": "Echo a message back"}))
        assert code == 0, err
        await _offered(served.url, "echo")
        async with mcp_session(served.url + "mcp") as session:
            listed = await session.list_tools()
            direct = await session.call_tool("echo", {"message": "through /mcp"})
        async with bridge(served.url, log=tmp_path / "bridge.log") as session:
            bridged = await session.call_tool("echo", {"message": "through the bridge"})
    [echo] = [t for t in listed.tools if t.name == "echo"]
    assert echo.input_schema["properties"]["message"]["type"] == "string"
    assert not direct.is_error and direct.content[0].text == "Echo: through /mcp"
    assert not bridged.is_error and bridged.content[0].text == "Echo: through the bridge"
