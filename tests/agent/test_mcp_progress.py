"""An MCP tool's progress in the agent's stream: ``progress`` messages without thoughts, and a
tool that keeps reporting is not cut off at the tool timeout — with a real MCP server process
and the whole stack on the memory bus."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.agent.stack import agent_stack, answer_of, observations
from tests.conftest import Backend
from tests.mcp.callback_servers import running_http_server
from tests.mcp.servers import ServerProcess
from toolmesh.agent.loop import AgentOptions
from toolmesh.llm import Rule, ScriptedLLM

FINISH = Rule(r"\nObservation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")
COUNT = {"type": "mcp-tool", "name": "counter", "mcp-tool": "count",
         "description": "Counts slowly, reporting progress"}


@pytest.fixture
async def server() -> AsyncIterator[ServerProcess]:
    async with running_http_server() as s:
        yield s


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
@pytest.mark.parametrize("streaming", [True, False])
async def test_progress_messages_come_between_the_action_and_its_observation(
        memory: Backend, tmp_path: Path, server: ServerProcess, streaming: bool) -> None:
    llm = ScriptedLLM(['Thought: count it\nAction: counter\nArgs: {"steps": 3, "interval": 0.4}'],
                      rules=[FINISH])
    # 3 reports 0.4 s apart take 1.2 s, past the 0.7 s tool timeout each report renews
    options = AgentOptions(tool_timeout=0.7, tool_max_timeout=20)
    async with agent_stack(memory, tmp_path, llm, options=options, joke=False) as s:
        await s.put({("mcp", "count"): {"url": server.url, "remote-name": "count"},
                     ("tool", "c"): COUNT})
        messages = await s.ask("count to three", streaming=streaming)
    assert observations(messages) == ["counted to 3"]
    assert answer_of(messages) == "counted to 3"
    kinds = [m["message_type"] for m in messages]
    first, observation = kinds.index("progress"), kinds.index("observation")
    assert kinds[first:observation] == ["progress"] * 3
    progress = [m for m in messages if m["message_type"] == "progress"]
    assert [m["content"] for m in progress] == [f"counter: {n}/3 step {n}" for n in (1, 2, 3)]
    assert [m["progress"] for m in progress] == [
        {"tool": "counter", "progress": n, "total": 3, "message": f"step {n}"} for n in (1, 2, 3)]
    assert all(m["end_of_message"] and not m["end_of_dialog"] and "thought" not in m
               for m in progress)
    assert len({m["message_id"] for m in progress}) == 3
    # progress is for the person watching: the LLM's next prompt holds only the observation
    assert "step 1" not in llm.prompts[-1][1]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_without_progress_the_tool_timeout_holds(
        memory: Backend, tmp_path: Path, server: ServerProcess) -> None:
    llm = ScriptedLLM(['Thought: count it\nAction: counter\nArgs: {"steps": 1, "interval": 2}'],
                      rules=[FINISH])
    options = AgentOptions(tool_timeout=0.7, tool_max_timeout=20)
    async with agent_stack(memory, tmp_path, llm, options=options, joke=False) as s:
        await s.put({("mcp", "count"): {"url": server.url, "remote-name": "count"},
                     ("tool", "c"): COUNT})
        messages = await s.ask("count to one")
    [observation] = observations(messages)
    assert "timed out after 0.7 s" in observation, observation
    assert "progress" not in [m["message_type"] for m in messages]
