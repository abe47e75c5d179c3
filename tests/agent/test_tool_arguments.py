"""The seed's MCP example verbatim, and nested schemas, through the whole agent stack with the
scripted LLM and a real MCP server process (tests/agent/arg_servers.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client

from tests.agent.arg_servers import running
from tests.agent.stack import agent_stack, answer_of, observations
from tests.conftest import Backend
from toolmesh.llm import Rule, ScriptedLLM

FINISH = Rule(r"\nObservation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")

#: seed 002's tool item, verbatim
BANK_TOOL = {
    "type": "mcp-tool",
    "name": "get_bank_balance",
    "description": "Get bank account balance",
    "mcp-tool": "get_bank_balance",
    "arguments": [
        {"name": "account_id", "type": "string", "description": "Bank account identifier"},
        {"name": "date", "type": "string",
         "description": "Date for balance query (optional, format: YYYY-MM-DD)"},
    ],
}


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async with running() as url:
        yield url


async def received(url: str) -> list[dict[str, Any]]:
    """The raw arguments of every call the server got, asked of the server itself."""
    async with Client(url) as client:
        result = await client.call_tool("received", {})
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


@pytest.mark.parametrize("args", [{"account_id": "ACC-1"},
                                  {"account_id": "ACC-1", "date": "2025-08-21"}],
                         ids=["without-date", "with-date"])
async def test_the_seed_example_calls_the_server_with_exactly_the_llms_arguments(
        memory: Backend, tmp_path: Path, server: str, args: dict[str, str]) -> None:
    llm = ScriptedLLM([f"Thought: look it up\nAction: get_bank_balance\nArgs: {json.dumps(args)}"],
                      rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm, joke=False) as s:
        await s.put({("mcp", "get_bank_balance"): {"url": server},
                     ("tool", "get_bank_balance"): BANK_TOOL})
        messages = await s.ask("What is the balance of account ACC-1?")
    date = f" on {args['date']}" if "date" in args else ""
    assert observations(messages) == [f"Balance of ACC-1{date}: 1234.56 EUR"]
    assert answer_of(messages) == f"Balance of ACC-1{date}: 1234.56 EUR"
    assert await received(server) == [{"tool": "get_bank_balance", "arguments": args}]
    assert ("Tool: get_bank_balance\nDescription: Get bank account balance\nArguments:\n"
            "- account_id (string, required) — Bank account identifier\n"
            "- date (string) — Date for balance query (optional, format: YYYY-MM-DD)\n"
            ) in llm.prompts[0][1]


async def test_a_nested_schema_is_shown_whole_in_the_prompt(
        memory: Backend, tmp_path: Path, server: str) -> None:
    # prompt snapshot: the tool declares no arguments, so the server's inputSchema (pydantic:
    # $defs, Optional as anyOf-with-null, Literal enums, bounds) is what the LLM reads
    llm = ScriptedLLM(["Thought: nothing to do\nFinal Answer: ok"])
    async with agent_stack(memory, tmp_path, llm, joke=False) as s:
        await s.put({("mcp", "plan_trip"): {"url": server},
                     ("tool", "trip"): {"type": "mcp-tool", "name": "plan-trip",
                                        "mcp-tool": "plan_trip", "description": "Plan a trip"}})
        await s.ask("plan a trip")
    prompt = llm.prompts[0][1]
    block = prompt[prompt.index("Tool: plan-trip"):prompt.index("\n\nReply in one")]
    assert block == (
        "Tool: plan-trip\n"
        "Description: Plan a trip\n"
        "Arguments:\n"
        "- travelers (array of objects, required, at least 1 item) — Who travels\n"
        "  - name (string, required) — Full name\n"
        "  - age (integer, 0 to 150)\n"
        '  - seat (string, one of: "window", "aisle")\n'
        "- destination (string, required)\n"
        '- mode (string, one of: "fast", "slow"; default "fast") — How to travel\n'
        "- nights (integer, 1 to 30; default 1)")


async def test_every_problem_comes_back_in_one_observation(
        memory: Backend, tmp_path: Path, server: str) -> None:
    # declared problems (the marked-required note) and the server schema's, in one round
    bad = {"travelers": [{"age": 200}, {"name": "Ann", "seat": "roof"}], "mode": "warp"}
    llm = ScriptedLLM([f"Thought: t\nAction: plan-trip\nArgs: {json.dumps(bad)}"], rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm, joke=False) as s:
        await s.put({("mcp", "plan_trip"): {"url": server},
                     ("tool", "trip"): {"type": "mcp-tool", "name": "plan-trip",
                                        "mcp-tool": "plan_trip", "description": "Plan a trip",
                                        "arguments": [{"name": "note", "type": "string",
                                                       "required": True}]}})
        messages = await s.ask("plan a trip")
    (observation,) = observations(messages)
    assert observation == (
        "Error: invalid arguments for 'plan-trip': "
        "$.destination: required; "
        '$.mode: must be one of "fast", "slow", not "warp"; '
        "$.note: required; "
        "$.travelers[0].age: must be at most 150, not 200; "
        "$.travelers[0].name: required; "
        '$.travelers[1].seat: must be one of "window", "aisle", not "roof"'
        f". You passed: {json.dumps(bad)}")
    assert await received(server) == []  # nothing reached the server
