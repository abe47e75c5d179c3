"""A tool that waits for a person, called by MCP clients of every revision: a 2026-07-28 client
(no back channel) gets the question as the call's ``InputRequiredResult`` and calls again with
the answer; a 2025-11-25 client is asked during the call. The MCP SDK's own client in both
modes, fastmcp's default client, and the stdio bridge, against one real ``toolmesh serve
--approval always`` that wants a token."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.gateway.test_scoped_tokens import ADMIN, create
from tests.mcp_endpoint.test_endpoint import _offered_with
from tests.mcp_endpoint.test_mcp_approval import Person, yes
from tests.processes import console_script
from tests.servers import Served, serving

MODERN = "2026-07-28"
JOKE = "Hey trustgraph! "


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data = tmp_path_factory.mktemp("mrtr")
    (data / "token").write_text(ADMIN)
    with serving(data, "--approval", "always", "--token-file", str(data / "token")) as s:
        yield s


@pytest.fixture
async def gateway(served: Served) -> Served:
    """The module's ``toolmesh serve``, once its agent offers tell-joke."""
    await _offered_with(served.url, "tell-joke", ADMIN)
    return served


def no(reason: str) -> mcp_types.ElicitResult:
    return mcp_types.ElicitResult(action="accept", content={"approve": False, "reason": reason})


@asynccontextmanager
async def sdk_client(served: Served, person: Person | None, *, mode: str,
                     token: str = ADMIN) -> AsyncIterator[Client]:
    """The MCP SDK's :class:`Client` at ``/mcp`` in ``mode`` (a version pin, or "legacy":
    the ``initialize`` handshake), ``person`` answering its questions."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=30) as http, \
            Client(streamable_http_client(served.url + "mcp", http_client=http), mode=mode,
                   elicitation_callback=person) as client:
        yield client


def text(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


@pytest.mark.parametrize(("mode", "version"), [(MODERN, MODERN), ("legacy", "2025-11-25")])
async def test_the_sdk_client_approves_and_denies_a_call_in_either_revision(
        gateway: Served, mode: str, version: str) -> None:
    person = Person(yes(), no("not <b>food</b> again"), mcp_types.ElicitResult(action="decline"))
    async with sdk_client(gateway, person, mode=mode) as client:
        approved = await client.call_tool("tell-joke", {"topic": "cats"})
        denied = await client.call_tool("tell-joke", {"topic": "food"})
        declined = await client.call_tool("tell-joke", {"topic": "food"})
        assert client.protocol_version == version
    # the gateway tells its clients when the tools change, and says so (a pinned version
    # adopts no capabilities: "auto" discovers them)
    async with sdk_client(gateway, None, mode="auto" if mode == MODERN else mode) as client:
        tools = client.server_capabilities.tools
    assert not approved.is_error and text(approved).startswith(JOKE)
    assert denied.is_error and text(denied) == (
        "the person did not approve the call of 'tell-joke': not <b>food</b> again")
    assert declined.is_error and text(declined) == (
        "the person declined the approval of the call of 'tell-joke'")
    # each call was asked about once, in form mode, with its exact arguments
    assert len(person.asked) == 3
    assert all(isinstance(p, mcp_types.ElicitRequestFormParams) for p in person.asked)
    assert 'arguments: {"topic": "cats"}' in person.asked[0].message
    assert 'arguments: {"topic": "food"}' in person.asked[1].message
    assert tools is not None and tools.list_changed is True


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_retry_can_change_nothing_and_an_answer_is_used_once(gateway: Served) -> None:
    other = await create(gateway, "-w", "default", "-c", "tools:invoke,approve")
    async with sdk_client(gateway, Person(), mode=MODERN) as client:
        first = await client.session.call_tool("tell-joke", {"topic": "cats"},
                                               allow_input_required=True)
        assert isinstance(first, mcp_types.InputRequiredResult), first
        assert first.input_requests is not None and set(first.input_requests) == {"approval"}
        state = first.request_state
        assert state is not None
        # the state is sealed: the client sees neither the digest nor the key in it
        assert "digest" not in state and "key" not in state and "cats" not in state
        answers: dict[str, Any] = {"approval": yes()}

        async def retry(arguments: dict[str, Any], request_state: str) -> Any:
            return await client.session.call_tool(
                "tell-joke", arguments, allow_input_required=True, input_responses=answers,
                request_state=request_state)

        altered = state[:20] + ("B" if state[20] != "B" else "C") + state[21:]
        refusals = []
        for arguments, request_state in (({"topic": "dogs"}, state),  # another call
                                         ({"topic": "cats"}, altered)):
            with pytest.raises(MCPError) as refused:
                await retry(arguments, request_state)
            refusals.append(refused.value)
        approved = await retry({"topic": "cats"}, state)
        again = await retry({"topic": "cats"}, state)  # the same answer once more
    # another token cannot use this caller's state either
    async with sdk_client(gateway, Person(), mode=MODERN, token=other) as client:
        with pytest.raises(MCPError) as theirs:
            await client.session.call_tool(
                "tell-joke", {"topic": "cats"}, allow_input_required=True,
                input_responses=answers, request_state=state)
    for refusal in (*refusals, theirs.value):
        assert "requestState" in refusal.message and "make the call again" in refusal.message
        assert refusal.data == {"reason": "invalid_request_state"}
    assert isinstance(approved, mcp_types.CallToolResult) and not approved.is_error
    assert text(approved).startswith(JOKE)
    assert isinstance(again, mcp_types.CallToolResult) and again.is_error
    assert "used already" in text(again)


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_a_client_that_cannot_be_asked_is_told_what_to_do(gateway: Served,
                                                               mode: str) -> None:
    invoker = await create(gateway, "-w", "default", "-c", "tools:invoke")
    async with sdk_client(gateway, None, mode=mode) as client:
        no_elicitation = await client.call_tool("tell-joke", {"topic": "food"})
    mute = Person()
    async with sdk_client(gateway, mute, mode=mode, token=invoker) as client:
        no_approve = await client.call_tool("tell-joke", {"topic": "food"})
    assert no_elicitation.is_error and text(no_elicitation) == (
        "'tell-joke' waits for a person's approval before each call (its approval policy), "
        "and this MCP client cannot put a question to its person (it declared no form "
        "elicitation): use a client that supports elicitation, or call the tool from a "
        "toolmesh dialog (`toolmesh agent`, the Workbench)")
    assert no_approve.is_error and text(no_approve).endswith(
        "this token may not approve calls: give the MCP client a token that may "
        "(`toolmesh token create -w default -c tools:invoke,approve`)")
    assert mute.asked == []  # a token that may not approve is never asked to


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_fastmcps_default_client_approves_and_denies_a_call(gateway: Served) -> None:
    from fastmcp import Client as FastClient
    from fastmcp.client.transports import StreamableHttpTransport

    asked: list[str] = []
    answers = [{"approve": True}, {"approve": False, "reason": "enough jokes"}]

    async def handler(message: str, response_type: Any, params: Any, context: Any) -> Any:
        asked.append(message)
        return answers.pop(0)

    transport = StreamableHttpTransport(gateway.url + "mcp",
                                        headers={"Authorization": f"Bearer {ADMIN}"})
    async with FastClient(transport, elicitation_handler=handler) as client:
        approved = await client.call_tool("tell-joke", {"topic": "cats"},
                                          raise_on_error=False)
        denied = await client.call_tool("tell-joke", {"topic": "food"}, raise_on_error=False)
        version = client.protocol_version
    assert version == MODERN  # its default: the revision without a back channel
    assert not approved.is_error and text(approved).startswith(JOKE)  # type: ignore[arg-type]
    assert denied.is_error and text(denied) == (  # type: ignore[arg-type]
        "the person did not approve the call of 'tell-joke': enough jokes")
    assert len(asked) == 2 and 'arguments: {"topic": "cats"}' in asked[0]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_stdio_bridge_asks_a_2026_client_in_rounds(gateway: Served,
                                                             tmp_path: Path) -> None:
    person = Person(yes(), no("no more"))
    params = StdioServerParameters(command=console_script(),
                                   args=["mcp", "serve", "--stdio", "-u", gateway.url],
                                   env={"TOOLMESH_TOKEN": ADMIN})
    async with Client(params, mode=MODERN, elicitation_callback=person) as client:
        approved = await client.call_tool("tell-joke", {"topic": "cats"})
        denied = await client.call_tool("tell-joke", {"topic": "food"})
    async with Client(params, mode="auto") as client:  # "auto" discovers the capabilities
        assert client.protocol_version == MODERN
        tools = client.server_capabilities.tools
    assert not approved.is_error and text(approved).startswith(JOKE)
    assert denied.is_error and text(denied) == (
        "the person did not approve the call of 'tell-joke': no more")
    assert [isinstance(p, mcp_types.ElicitRequestFormParams) for p in person.asked] == [
        True, True]
    assert 'arguments: {"topic": "food"}' in person.asked[1].message
    # the bridge serves subscriptions/listen to a 2026-07-28 client: it says so
    assert tools is not None and tools.list_changed is True
