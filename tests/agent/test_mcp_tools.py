"""MCP tools in the agent: declared and discovered arguments, schema checks, results — with a
real MCP server process and the whole stack on the memory bus."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.agent.stack import agent_stack, answer_of, observations
from tests.conftest import Backend
from tests.mcp.servers import ServerProcess, running_server
from toolmesh.llm import Rule, ScriptedLLM

FINISH = Rule(r"\nObservation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")


@pytest.fixture
async def mcp_server() -> AsyncIterator[ServerProcess]:
    async with running_server("streamable-http", name="agent-test") as server:
        yield server


def weather_tool(**extra: object) -> dict[str, object]:
    return {"type": "mcp-tool", "name": "get-weather", "mcp-tool": "weather",
            "description": "Get the weather forecast", **extra}


async def test_declared_arguments_are_shown_and_passed_unchanged(
        memory: Backend, tmp_path: Path, mcp_server: ServerProcess) -> None:
    llm = ScriptedLLM(['Thought: t\nAction: get-weather\nArgs: {"city": "Paris", "days": 2}'],
                      rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm) as s:
        await s.put({("mcp", "weather"): {"url": mcp_server.url},
                     ("tool", "w"): weather_tool(arguments=[
                         {"name": "city", "type": "string", "description": "City name"},
                         {"name": "days", "type": "integer", "description": "How many days"}])})
        messages = await s.ask("weather in Paris?")
    assert observations(messages) == ["Paris: sunny for 2 days"]
    assert answer_of(messages) == "Paris: sunny for 2 days"
    prompt = llm.prompts[0][1]
    # the declared descriptions, completed by the server's schema: city is required there,
    # days has a default
    assert ("Tool: get-weather\nDescription: Get the weather forecast\nArguments:\n"
            "- city (string, required) — City name\n"
            "- days (integer; default 1) — How many days\n") in prompt


async def test_undeclared_arguments_come_from_the_servers_input_schema(
        memory: Backend, tmp_path: Path, mcp_server: ServerProcess) -> None:
    llm = ScriptedLLM(['Thought: t\nAction: adder\nArgs: {"a": 2, "b": 40}'], rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm) as s:
        await s.put({("mcp", "add"): {"url": mcp_server.url},
                     ("tool", "adder"): {"type": "mcp-tool", "name": "adder", "mcp-tool": "add",
                                         "description": "Add two numbers"}})
        messages = await s.ask("2+40?")
    assert ("Tool: adder\nDescription: Add two numbers\nArguments:\n"
            "- a (integer, required)\n- b (integer, required)\n") in llm.prompts[0][1]
    assert observations(messages) == ["42"]


async def test_arguments_are_checked_against_the_input_schema_too(
        memory: Backend, tmp_path: Path, mcp_server: ServerProcess) -> None:
    # Declared as a string, but the server's schema wants an integer: the schema catches it.
    llm = ScriptedLLM(['Thought: t\nAction: get-weather\nArgs: {"city": "Oslo", "days": "two"}'],
                      rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm) as s:
        await s.put({("mcp", "weather"): {"url": mcp_server.url},
                     ("tool", "w"): weather_tool(arguments=[
                         {"name": "city", "type": "string", "description": "City"},
                         {"name": "days", "type": "string", "description": "Days"}])})
        messages = await s.ask("weather?")
    (observation,) = observations(messages)
    assert observation.startswith("Error: invalid arguments for 'get-weather': "
                                  "$.days: must be integer, not string. You passed:")


async def test_an_mcp_error_result_is_an_error_observation(
        memory: Backend, tmp_path: Path, mcp_server: ServerProcess) -> None:
    llm = ScriptedLLM(["Thought: t\nAction: broken\nArgs: {}"], rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm) as s:
        await s.put({("mcp", "fail"): {"url": mcp_server.url},
                     ("tool", "broken"): {"type": "mcp-tool", "name": "broken", "mcp-tool": "fail",
                                          "description": "fails"}})
        messages = await s.ask("go")
    (observation,) = observations(messages)
    assert observation.startswith("Error: ") and "the weather station is on fire" in observation


async def test_an_mcp_tool_without_its_mcp_item_is_reported(memory: Backend, tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM()) as s:
        await s.put({("tool", "w"): weather_tool()})
        assert "no config item mcp/weather" in s.agent.toolset.problems["tool/w"]
        assert "get-weather" not in s.agent.toolset.tools
