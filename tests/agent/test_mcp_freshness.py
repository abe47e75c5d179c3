"""MCP schemas stay fresh in the agent and a dead server does not slow it; large results are
cut — through the whole stack on the memory bus, with real MCP server processes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.agent.stack import Stack, agent_stack, observations
from tests.conftest import Backend
from tests.mcp.servers import running_server, start_server
from toolmesh.agent.loop import AgentOptions
from toolmesh.agent.tools.mcp_schemas import SCHEMA_BUDGET, SCHEMA_TTL, McpSchemas
from toolmesh.llm import Rule, ScriptedLLM

FINISH = Rule(r"\nObservation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")
DONE = "Thought: t\nFinal Answer: ok"


def mcp_tool(name: str, mcp_id: str) -> dict[str, object]:
    return {"type": "mcp-tool", "name": name, "mcp-tool": mcp_id, "description": f"{name} tool"}


class Clock:
    """A clock the test moves: the TTL is checked without waiting for it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def use_schemas(s: Stack, **options: object) -> McpSchemas:
    schemas = McpSchemas(s.agent.mcp, **options)  # type: ignore[arg-type]
    s.agent.services["mcp-schemas"] = schemas  # before any mcp-tool is built
    return schemas


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_schema_changed_by_a_restart_is_read_again_once_the_server_refuses_a_call(
        memory: Backend, tmp_path: Path) -> None:
    # The LLM goes by what it is shown: the stale schema says 'town', so it sends 'town'.
    call = 'Thought: t\nAction: forecast\nArgs: {"town": "Oslo"}'
    llm = ScriptedLLM([call, call], rules=[FINISH])
    async with running_server("streamable-http", name="places") as server, \
            agent_stack(memory, tmp_path, llm) as s:
        await s.put({("mcp", "forecast"): {"url": server.url},
                     ("tool", "forecast"): mcp_tool("forecast", "forecast")})
        assert observations(await s.ask("weather?")) == ["forecast for Oslo: rain"]
        await server.stop()
        await server.restart(args=("--place", "city"))
        (refused,) = observations(await s.ask("weather again?"))
    assert refused.startswith("Error: ") and "city" in refused
    first, _, stale, fresh = (p for _, p in llm.prompts)
    assert "- town (string" in first and "- town (string" in stale  # cached within the TTL
    assert "- city (string" in fresh and "- town (string" not in fresh  # after the refusal


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_schema_is_read_again_after_its_ttl(memory: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(default=DONE)
    clock = Clock()
    async with running_server("streamable-http", name="places") as server, \
            agent_stack(memory, tmp_path, llm) as s:
        use_schemas(s, clock=clock)
        await s.put({("mcp", "forecast"): {"url": server.url},
                     ("tool", "forecast"): mcp_tool("forecast", "forecast")})
        await s.ask("one")
        await server.stop()
        await server.restart(args=("--place", "city"))
        clock.now += SCHEMA_TTL - 1
        await s.ask("two")
        clock.now += 2
        await s.ask("three")
    one, two, three = (p for _, p in llm.prompts)
    assert "- town (string" in one and "- town (string" in two
    assert "- city (string" in three


async def test_list_changed_makes_a_new_tool_available_at_once(
        memory: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(['Thought: t\nAction: register\nArgs: {"tool": "extra"}'],
                      rules=[FINISH], default=DONE)
    async with running_server("streamable-http", name="growing") as server, \
            agent_stack(memory, tmp_path, llm) as s:
        await s.put({("mcp", "register"): {"url": server.url},
                     ("mcp", "extra"): {"url": server.url},
                     ("tool", "register"): mcp_tool("register", "register"),
                     ("tool", "extra"): mcp_tool("extra-tool", "extra")})
        noticed = asyncio.Event()
        await s.agent.mcp.watch_tools(lambda workspace, ids: noticed.set())  # after the agent's own
        assert observations(await s.ask("add a tool")) == ["added extra"]
        async with asyncio.timeout(10):
            await noticed.wait()
        await s.ask("now?")
        extra = s.agent.toolset.tools["extra-tool"]
    before, _, after = (p for _, p in llm.prompts)
    assert "Tool: register\n" in before and "Tool: extra-tool\n" not in before
    assert "Tool: extra-tool\n" in after and "- word (string" in after
    assert extra.unavailable is None


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_server_that_never_answers_costs_one_budget_once(
        memory: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(default=DONE)
    mute = await start_server("streamable-http", args=("--mute",))
    try:
        async with running_server("streamable-http", name="live") as live, \
                agent_stack(memory, tmp_path, llm) as s:
            started = time.monotonic()
            await s.put({("mcp", "dead"): {"url": mute.url}, ("mcp", "add"): {"url": live.url},
                         ("tool", "dead"): mcp_tool("dead-tool", "dead"),
                         ("tool", "adder"): mcp_tool("adder", "add")})
            applied = time.monotonic() - started
            timings = []
            for question in ("first", "second", "third"):
                started = time.monotonic()
                await s.ask(question)
                timings.append(time.monotonic() - started)
            dead = s.agent.toolset.tools["dead-tool"]
            # gone before the stack stops: its in-flight describe then ends at once instead
            # of being drained for its whole deadline
            await mute.stop()
    finally:
        await mute.stop()
    assert applied < SCHEMA_BUDGET  # the config change is not held up by the dead server
    # the first step waits the budget once; later ones do not wait for it at all
    assert SCHEMA_BUDGET <= timings[0] < SCHEMA_BUDGET + 1.5, timings
    assert max(timings[1:]) < SCHEMA_BUDGET / 2, timings
    for _, prompt in llm.prompts:
        assert "Tool: adder\n" in prompt and "dead-tool" not in prompt
    assert dead.unavailable is not None and "did not describe it within 1 s" in dead.unavailable


async def test_a_long_result_is_cut_and_one_over_the_message_limit_is_a_clear_error(
        memory: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM([f'Thought: t\nAction: large\nArgs: {{"size": {size}}}'
                       for size in (5000, 2 * 1024 * 1024, 10)] + [DONE])
    async with running_server("streamable-http", name="big") as server, \
            agent_stack(memory, tmp_path, llm,
                        options=AgentOptions(tool_timeout=20, max_observation=1000)) as s:
        await s.put({("mcp", "large"): {"url": server.url},
                     ("tool", "large"): mcp_tool("large", "large")})
        cut, too_large, small = observations(await s.ask("big?"))
    assert cut == "x" * 1000 + ("\n[... 4,000 of 5,000 bytes cut: the observation limit is "
                                "1,000 bytes. Ask the tool for less, e.g. a smaller range or "
                                "page.]")
    assert too_large.startswith("Error: the answer of MCP server 'large' to tool 'large' is "
                                "larger than the MCP SDK's limit of 1 MiB per message")
    assert small == "x" * 10  # the shared session still serves
