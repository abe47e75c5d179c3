"""The mcp-tool service's ``list-tools`` operation: every tool an item's server lists, asked
afresh — what the Workbench's "Test connection" shows — against a real SDK server."""

from __future__ import annotations

import json

from tests.mcp import test_mcp_service as service_tests
from tests.mcp.servers import ServerProcess
from tests.mcp.test_mcp_service import Stack, item
from toolmesh import RequestError

# the service with a real config service, and an SDK server over streamable HTTP
stack = service_tests.stack
http = service_tests.http


async def test_list_tools_answers_every_tool_of_the_server(stack: Stack,
                                                           http: ServerProcess) -> None:
    # the item names one remote tool; list-tools shows all of the server's, with schemas
    await stack.put({"weather": item(http, "weather")})
    raw = await stack.request({"name": "weather", "operation": "list-tools"})
    assert raw["error"] is None and raw["text"] is None
    tools = json.loads(raw["object"])
    by_name = {t["name"]: t for t in tools}
    assert {"add", "echo", "hello", "weather", "fail"} <= set(by_name)
    assert all(set(t) >= {"name", "description", "inputSchema"} for t in tools)
    assert by_name["weather"]["description"] == "The weather forecast for a city."
    assert by_name["add"]["inputSchema"]["required"] == ["a", "b"]
    assert by_name["weather"]["inputSchema"]["properties"]["days"]["default"] == 1

    # the client method answers the same list, decoded
    listed = await stack.client.list_tools("weather", timeout=10)
    assert [t["name"] for t in listed] == [t["name"] for t in tools]


async def test_list_tools_lists_afresh_a_tool_the_server_added(stack: Stack,
                                                               http: ServerProcess) -> None:
    await stack.put({"register": item(http, "register")})
    before = {t["name"] for t in await stack.client.list_tools("register", timeout=10)}
    assert "shout" not in before
    await stack.client.invoke("register", {"tool": "shout"}, timeout=10)
    after = {t["name"] for t in await stack.client.list_tools("register", timeout=10)}
    assert after == before | {"shout"}


async def test_list_tools_works_when_the_remote_tool_is_missing(stack: Stack,
                                                                http: ServerProcess) -> None:
    # describe fails for an item whose remote-name the server lacks; list-tools is how the
    # user finds the right name
    await stack.put({"typo": item(http, "wether")})
    described = await stack.request({"name": "typo", "operation": "describe"})
    assert "has no tool 'wether'" in described["error"]["message"]
    names = {t["name"] for t in await stack.client.list_tools("typo", timeout=10)}
    assert "weather" in names


async def test_list_tools_of_an_unreachable_or_unknown_server_fails_clearly(
        stack: Stack) -> None:
    await stack.put({"gone": {"url": "http://127.0.0.1:9/mcp"}})
    raw = await stack.request({"name": "gone", "operation": "list-tools", "timeout": 5})
    assert raw["text"] is None and raw["object"] is None
    assert raw["error"]["type"] == "mcp-error"
    assert raw["error"]["message"].startswith("cannot connect to MCP server 'gone' at "
                                              "http://127.0.0.1:9/mcp"), raw["error"]
    try:
        await stack.client.list_tools("nope", timeout=5)
    except RequestError as e:
        assert e.type == "mcp-error"
        assert "no MCP tool 'nope' is configured in workspace 'default'" in e.message
    else:
        raise AssertionError("listing the tools of an unknown item did not fail")

    wrong = await stack.request({"name": "gone", "operation": "list"})
    assert wrong["error"] == {"type": "bad-request", "message":
                              "unknown operation 'list'; operations: invoke, describe, "
                              "list-tools, login, login-finish, logins, logout"}
