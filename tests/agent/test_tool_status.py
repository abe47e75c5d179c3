"""Only tools that can work are offered, and the agent says why the others are not: its
``agent-tools`` status service on the bus, the prompt the LLM sees, with a real MCP server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from tests.agent.stack import TELL_JOKE, Stack, agent_stack
from tests.conftest import Backend
from tests.mcp.servers import ServerProcess, running_server
from toolmesh import RequestClient
from toolmesh.agent.tools.context import ClientPool
from toolmesh.agent.tools.mcp_schemas import McpSchemas
from toolmesh.agent.toolset import build_toolset
from toolmesh.config.client import ConfigSnapshot
from toolmesh.llm import ScriptedLLM

WEATHER = {"type": "mcp-tool", "name": "get-weather", "mcp-tool": "weather",
           "description": "Get the weather forecast"}


@pytest.fixture
async def mcp_server() -> AsyncIterator[ServerProcess]:
    async with running_server("streamable-http", name="status-test") as server:
        yield server


async def status(s: Stack, **request: Any) -> dict[str, Any]:
    """The agent's answer to an agent-tools request, through the bus."""
    async with RequestClient(await s.backend.connect(), request_queue=s.tools_queues[0],
                             response_queue=s.tools_queues[1]) as client:
        return await client.request(request, timeout=10)


def by_key(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["key"]: tool for tool in answer["tools"]}


def patient(s: Stack) -> None:
    """Give the agent's MCP schema reads 10 s, not the dialog budget of about a second: these
    tests are about what a server says, not about a server being slow on a busy machine."""
    s.agent.services["mcp-schemas"] = McpSchemas(s.agent.mcp, budget=10.0)
    s.agent.tool_status.refresh_budget = 10.0


async def offered_in_prompt(s: Stack, name: str) -> bool:
    await s.ask("which tools?")
    return f"Tool: {name}\n" in s.llm.prompts[-1][1]


async def test_an_mcp_tool_is_offered_only_while_its_mcp_item_exists(
        memory: Backend, tmp_path: Path, mcp_server: ServerProcess) -> None:
    llm = ScriptedLLM(default="Thought: t\nFinal Answer: ok")
    async with agent_stack(memory, tmp_path, llm) as s:
        patient(s)
        version = await s.put({("tool", "w"): WEATHER})
        answer = await status(s)
        assert (answer["workspace"], answer["version"]) == ("default", version)
        assert by_key(answer)["w"] == {
            "key": "w", "name": "get-weather", "type": "mcp-tool", "status": "not-offered",
            "reason": "tool/w uses MCP tool 'weather', but there is no config item mcp/weather",
            "source": "configured"}
        assert not await offered_in_prompt(s, "get-weather")

        await s.put({("mcp", "weather"): {"url": mcp_server.url}})
        assert by_key(await status(s))["w"]["status"] == "available"
        assert await offered_in_prompt(s, "get-weather")

        # deleting the server's item takes the tool away: it could only fail now
        await s.delete(("mcp", "weather"))
        w = by_key(await status(s))["w"]
        assert w["status"] == "not-offered" and "no config item mcp/weather" in w["reason"]
        assert not await offered_in_prompt(s, "get-weather")


async def test_an_mcp_tool_whose_server_lacks_the_remote_tool_is_not_offered(
        memory: Backend, tmp_path: Path, mcp_server: ServerProcess) -> None:
    llm = ScriptedLLM(default="Thought: t\nFinal Answer: ok")
    async with agent_stack(memory, tmp_path, llm) as s:
        patient(s)
        # one server, two items: one names a tool the server has, one a tool it lacks
        await s.put({("mcp", "weather"): {"url": mcp_server.url, "remote-name": "no-such-tool"},
                     ("mcp", "good"): {"url": mcp_server.url, "remote-name": "weather"},
                     ("tool", "w"): WEATHER,
                     ("tool", "g"): {**WEATHER, "name": "good-weather", "mcp-tool": "good"}})
        tools = by_key(await status(s))
        assert tools["g"] == {"key": "g", "name": "good-weather", "type": "mcp-tool",
                              "status": "available", "source": "configured"}
        assert tools["w"]["status"] == "not-offered"
        assert "has no tool 'no-such-tool'" in tools["w"]["reason"]
        assert "weather" in tools["w"]["reason"]  # the tools it has
        await s.ask("which tools?")
    prompt = llm.prompts[-1][1]
    assert "Tool: good-weather\n" in prompt and "Tool: get-weather\n" not in prompt


async def test_every_tool_item_has_a_status(backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(default="Thought: t\nFinal Answer: ok")
    async with agent_stack(backend, tmp_path, llm) as s:
        assert (await status(s))["tools"] == []
        await s.load_jokes()
        await s.put({("tool", "again"): {**TELL_JOKE, "description": "the same name"},
                     ("tool", "lost"): {**TELL_JOKE, "name": "lost", "service": "gone"}})
        tools = (await status(s))["tools"]
    assert [t["key"] for t in tools] == ["again", "lost", "tell-joke"]
    again, lost, joke = tools
    # keys are built in order: "again" takes the name first
    assert again["status"] == "available" and joke["status"] == "not-offered"
    assert joke["reason"] == ("tool/tell-joke is named 'tell-joke' like tool/again; it is not "
                              "offered")
    assert lost["reason"] == ("tool/lost uses tool service 'gone', but there is no config item "
                              "tool-service/gone and no running instance announces it")


async def test_a_stored_trustgraph_query_tool_is_not_offered_and_says_why(
        memory: Backend) -> None:
    # stored before the config service refused the type (or written to the store directly)
    item = {"type": "knowledge-query", "name": "ask", "description": "d", "collection": "c"}
    snapshot = ConfigSnapshot(7, "default", MappingProxyType({
        "tool": {"ask": json.dumps(item)}, "tool-service": {}, "mcp": {}}))
    bus = await memory.connect()
    toolset = await build_toolset(snapshot, clients=ClientPool(bus), services={})
    assert toolset.tools == {}
    (ask,) = toolset.statuses()
    assert (ask.key, ask.name, ask.type, ask.status) == ("ask", "ask", "knowledge-query",
                                                         "not-offered")
    assert ask.reason is not None
    assert ask.reason.startswith("tool/ask: tool type 'knowledge-query' is not available in "
                                 "this deployment: it calls TrustGraph's graph-rag service")


async def test_a_status_request_with_a_newer_version_loads_that_config_first(
        memory: Backend, tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM()) as s:
        # the agent hears no more pushes (as when one is lost, or still on its way)
        subscription = s.agent._watcher._subscription
        assert subscription is not None
        await subscription.close()
        version = await s.config.put({("tool", "ask"): json.dumps(
            {"type": "text-completion", "name": "ask", "description": "Ask the LLM"})})
        assert (await status(s))["tools"] == []  # without a version: what the agent has
        answer = await status(s, version=version)
    assert answer["version"] == version
    assert by_key(answer)["ask"]["status"] == "available"
