"""``toolmesh mcp serve --stdio`` and the gateway's ``/mcp``, to clients toolmesh did not write:
the ``mcp`` SDK's stdio client, and the MCP Inspector's CLI mode (Node, from npm:
tests/mcp_endpoint/inspector.py), against one real ``toolmesh serve`` that wants a token (the
joke service announces tell-joke; the speller streams its pieces)."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import mcp_types
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.dialogs.test_embedded_restart import _offered
from tests.gateway.test_scoped_tokens import ADMIN
from tests.mcp_endpoint.inspector import inspector_cli
from tests.mcp_endpoint.test_endpoint import _offered_with
from tests.processes import console_script, run_toolmesh
from tests.servers import Served, serving, toolmesh_serve

SERVICES = Path(__file__).parent / "services"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data = tmp_path_factory.mktemp("served")
    (data / "token").write_text(ADMIN)
    with serving(data, "--token-file", str(data / "token"), "--tool-service", "speller:Speller",
                 cwd=SERVICES) as s:
        yield s


@pytest.fixture
async def gateway(served: Served) -> Served:
    """The module's ``toolmesh serve``, once its agent offers tell-joke and spell."""
    await _offered_with(served.url, "tell-joke", ADMIN)
    await _offered_with(served.url, "spell", ADMIN)
    return served


@asynccontextmanager
async def bridge(url: str, *flags: str, log: Path, env: dict[str, str] | None = None,
                 message_handler: object = None,
                 elicitation_callback: object = None) -> AsyncIterator[ClientSession]:
    """A session of the SDK's stdio client with ``toolmesh mcp serve --stdio -u URL FLAGS``
    (the console script, as a client's configuration names it; ``env`` as its "env" gives it);
    the bridge's stderr goes to ``log``."""
    params = StdioServerParameters(command=console_script(),
                                   args=["mcp", "serve", "--stdio", "-u", url, *flags],
                                   env=env or {})
    with log.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, message_handler=message_handler,
                              elicitation_callback=elicitation_callback) as session:
            await session.initialize()
            yield session


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_sdk_stdio_client_lists_and_calls_the_tools_through_the_bridge(
        gateway: Served, tmp_path: Path) -> None:
    pieces: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pieces.append(message)

    log = tmp_path / "bridge.log"
    async with bridge(gateway.url, log=log, env={"TOOLMESH_TOKEN": ADMIN}) as session:
        listed = await session.list_tools()
        joke = await session.call_tool("tell-joke", {"topic": "cats"})
        wrong = await session.call_tool("tell-joke", {"topic": 7})
        spelled = await session.call_tool("spell", {"word": "bridge"},
                                          progress_callback=on_progress)
    [tool] = [t for t in listed.tools if t.name == "tell-joke"]
    assert tool.input_schema["properties"]["topic"]["type"] == "string"
    assert tool.input_schema["required"] == ["topic"]
    assert "spell" in {t.name for t in listed.tools}
    assert not joke.is_error and joke.content[0].text.startswith("Hey trustgraph! ")
    assert wrong.is_error and "invalid arguments" in wrong.content[0].text
    assert pieces == list("bridge") and spelled.content[0].text == "bridge"
    assert "connected to the gateway" in log.read_text()
    assert ADMIN not in log.read_text()


async def test_the_client_is_told_when_the_tools_change_and_only_then(gateway: Served,
                                                                       tmp_path: Path) -> None:
    told: asyncio.Queue[object] = asyncio.Queue()

    async def on_message(message: object) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            told.put_nowait(message)

    name = f"shout-{uuid.uuid4().hex[:6]}"
    async with bridge(gateway.url, "--token-file", str(gateway.data_dir / "token"),
                      log=tmp_path / "bridge.log", message_handler=on_message) as session:
        before = {t.name for t in (await session.list_tools()).tools}
        shout = json.dumps({
            "type": "text-completion", "name": name, "description": "Say it louder",
            "arguments": [{"name": "text", "type": "string", "description": "what to say"}]})
        await toolmesh(gateway, "config", "put", f"tool/{name}", stdin_text=shout)
        async with asyncio.timeout(20):
            await told.get()  # the bridge listed the new tool before it told
        added = {t.name for t in (await session.list_tools()).tools}
        # the gateway says the tools changed, but they did not (the same value again) ...
        await toolmesh(gateway, "config", "put", f"tool/{name}", stdin_text=shout)
        # ... then they do
        await toolmesh(gateway, "config", "delete", f"tool/{name}")
        async with asyncio.timeout(20):
            await told.get()
        removed = {t.name for t in (await session.list_tools()).tools}
        assert told.empty()  # told once for each change, not for the put that changed nothing
    assert "tell-joke" in before and name not in before
    assert added == before | {name}
    assert removed == before


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_bridge_outlives_a_restart_of_the_gateway(tmp_path: Path) -> None:
    with socket.socket() as s:  # the port both gateways listen on, one after the other
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    async with bridge(url, log=tmp_path / "bridge.log") as session:
        # the bridge started first: it reaches the gateway when a request needs it
        async with toolmesh_serve(tmp_path, "--port", str(port)) as served:
            await _offered(served.url, "tell-joke")
            first = await session.call_tool("tell-joke", {"topic": "cats"})
        async with toolmesh_serve(tmp_path, "--port", str(port)) as served:
            await _offered(served.url, "tell-joke")
            # a new gateway process: the bridge's session is one it never knew
            second = await session.call_tool("tell-joke", {"topic": "dogs"})
    assert first.content[0].text.startswith("Hey trustgraph! ")
    assert not second.is_error and second.content[0].text.startswith("Hey trustgraph! ")


async def toolmesh(served: Served, *args: str, stdin_text: str | None = None) -> str:
    """``toolmesh ARGS`` against ``served`` as its admin: the output (it must succeed)."""
    code, out, err = await run_toolmesh(*args, "--url", served.url, "-t", ADMIN,
                                        stdin_text=stdin_text)
    assert code == 0, err
    return out


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_refused_token_is_an_mcp_error_that_says_so(gateway: Served,
                                                           tmp_path: Path) -> None:
    from tests.gateway.test_scoped_tokens import create

    elsewhere = await create(gateway, "-w", "ws2", "-c", "tools:invoke")
    log = tmp_path / "bridge.log"
    async with bridge(gateway.url, "-t", "wrong-token-1234", log=log) as s:
        with pytest.raises(MCPError) as wrong:
            await s.list_tools()
        with pytest.raises(MCPError) as wrong_call:
            await s.call_tool("tell-joke", {"topic": "cats"})
    logged = log.read_text()
    assert "-t/--token is visible to other users" in logged and "wrong-token-1234" not in logged
    async with bridge(gateway.url, log=tmp_path / "none.log") as s:
        with pytest.raises(MCPError) as none:
            await s.list_tools()
    async with bridge(gateway.url, "-w", "default", log=tmp_path / "ws.log",
                      env={"TOOLMESH_TOKEN": elsewhere}) as s:
        with pytest.raises(MCPError) as forbidden:
            await s.list_tools()
    refused = f"the gateway at {gateway.url}mcp refused the request"
    assert wrong.value.message.startswith(f"{refused} (401): the token is refused")
    assert wrong_call.value.message == wrong.value.message
    assert wrong.value.data == {"type": "token-refused", "status": 401}
    assert none.value.message.startswith(f"{refused} (401): it needs a token")
    assert forbidden.value.message.startswith(
        f"the gateway at {gateway.url}mcp/default refused the request (403): this token may "
        "not use workspace 'default'")


async def test_a_gateway_that_is_not_there_is_an_mcp_error_that_says_so(tmp_path: Path) -> None:
    with socket.socket() as s:  # a free port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/"
    async with bridge(url, log=tmp_path / "bridge.log") as session:
        # the client started: the bridge answered initialize without the gateway
        assert session.server_info is not None and session.server_info.name == "toolmesh"
        with pytest.raises(MCPError) as raised:
            await session.list_tools()
    assert raised.value.message.startswith(
        f"cannot reach the gateway at {url}mcp: nothing is listening there")
    assert raised.value.data == {"type": "gateway-unreachable"}


@pytest.mark.slow  # the MCP Inspector, from npm
async def test_the_inspector_cli_lists_and_calls_over_streamable_http(
        gateway: Served, tmp_path: Path) -> None:
    url = gateway.url + "mcp"
    header = f"Authorization: Bearer {ADMIN}"
    listed = await inspector_cli(url, "--transport", "http", "--method", "tools/list",
                                 "--header", header, home=tmp_path)
    called = await inspector_cli(url, "--transport", "http", "--method", "tools/call",
                                 "--tool-name", "tell-joke", "--tool-arg", "topic=cats",
                                 "--header", header, home=tmp_path)
    # a 401 is an OAuth challenge to it: --stored-auth-only makes that a plain failure
    refused = await inspector_cli(url, "--transport", "http", "--method", "tools/list",
                                  "--header", "Authorization: Bearer wrong-token-1234",
                                  "--stored-auth-only", home=tmp_path)
    tools = {t["name"]: t for t in listed.result()["tools"]}
    assert tools["tell-joke"]["inputSchema"]["required"] == ["topic"]
    joke = called.result()
    assert not joke["isError"] and joke["content"][0]["text"].startswith("Hey trustgraph! ")
    assert "a valid bearer token is required" in refused.error()


@pytest.mark.slow  # the MCP Inspector, from npm
async def test_the_inspector_cli_lists_and_calls_through_the_stdio_bridge(
        gateway: Served, tmp_path: Path) -> None:
    command = [console_script(), "mcp", "serve", "--stdio", "-u", gateway.url]
    listed = await inspector_cli("-e", f"TOOLMESH_TOKEN={ADMIN}", *command,
                                 "--method", "tools/list", home=tmp_path)
    called = await inspector_cli("-e", f"TOOLMESH_TOKEN={ADMIN}", *command,
                                 "--method", "tools/call", "--tool-name", "tell-joke",
                                 "--tool-arg", "topic=cats", home=tmp_path)
    refused = await inspector_cli("-e", "TOOLMESH_TOKEN=wrong-token-1234", *command,
                                  "--method", "tools/list", home=tmp_path)
    assert {"tell-joke", "spell"} <= {t["name"] for t in listed.result()["tools"]}
    joke = called.result()
    assert not joke["isError"] and joke["content"][0]["text"].startswith("Hey trustgraph! ")
    assert "refused the request (401): the token is refused" in refused.error()
    assert "wrong-token-1234" not in refused.stderr


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_call_that_needs_approval_asks_the_clients_person_through_the_bridge(
        tmp_path: Path) -> None:
    from tests.mcp_endpoint.test_mcp_approval import Person, yes

    person = Person(yes(), mcp_types.ElicitResult(action="decline"))
    async with toolmesh_serve(tmp_path, "--approval", "always") as served:
        await _offered(served.url, "tell-joke")
        async with bridge(served.url, log=tmp_path / "asking.log",
                          elicitation_callback=person) as session:
            approved = await session.call_tool("tell-joke", {"topic": "food"})
            declined = await session.call_tool("tell-joke", {"topic": "cats"})
        async with bridge(served.url, log=tmp_path / "mute.log") as session:
            unasked = await session.call_tool("tell-joke", {"topic": "food"})
    assert not approved.is_error and approved.content[0].text.startswith("Hey trustgraph! ")
    assert declined.is_error and "declined" in declined.content[0].text
    assert [('"food"' in p.message, '"cats"' in p.message) for p in person.asked] == [
        (True, False), (False, True)]
    assert unasked.is_error and "waits for a person's approval" in unasked.content[0].text
