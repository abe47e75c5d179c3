"""Workspaces isolate: the agent, the mcp-tool service and tool services answer each request
from the config of its workspace — with clashing tool and MCP names, a real MCP server and the
whole stack on the memory bus."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.stack import JOKE_SERVICE, agent_stack, observations
from tests.agent.test_tool_status import by_key, patient, status
from tests.conftest import Backend
from tests.mcp.servers import ServerProcess, running_server
from toolmesh import RequestError
from toolmesh.llm import Rule, ScriptedLLM
from toolmesh.rpc.service import Reply
from toolmesh.tools.services.joke import JokeService

FINISH = Rule(r"\nObservation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")


@pytest.fixture
async def mcp_server() -> AsyncIterator[ServerProcess]:
    async with running_server("streamable-http", name="ws-test") as server:
        yield server


def probe(description: str) -> dict[str, str]:
    return {"type": "mcp-tool", "name": "probe", "mcp-tool": "probe", "description": description}


async def test_each_dialog_sees_only_its_workspaces_tools_and_mcp_items(
        memory: Backend, tmp_path: Path, mcp_server: ServerProcess) -> None:
    llm = ScriptedLLM(["Thought: t\nAction: probe\nArgs: {}",
                       'Thought: t\nAction: probe\nArgs: {"city": "Oslo"}'], rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm) as s:
        patient(s)
        # the same tool name and mcp id in both, naming different remote tools
        await s.put({("mcp", "probe"): {"url": mcp_server.url, "remote-name": "hello"},
                     ("mcp", "only-default"): {"url": mcp_server.url, "remote-name": "echo"},
                     ("tool", "probe"): probe("Greets, in the default workspace")})
        await s.put({("mcp", "probe"): {"url": mcp_server.url, "remote-name": "weather"},
                     ("tool", "probe"): probe("Forecasts, in ws2"),
                     ("tool", "borrow"): {"type": "mcp-tool", "name": "borrow",
                                          "mcp-tool": "only-default", "description": "d"}},
                    workspace="ws2")
        default = await s.ask("hello?")
        default_prompt = llm.prompts[-1][1]
        ws2 = await s.ask("weather?", workspace="ws2")
        ws2_prompt = llm.prompts[-1][1]
        ws2_status = by_key(await status(s, workspace="ws2"))
        default_status = by_key(await status(s))
        with pytest.raises(RequestError) as unknown:
            await s.agent.mcp.invoke("only-default", {"text": "x"}, timeout=10, workspace="ws2")
    assert observations(default) == ["hello from ws-test"]
    assert observations(ws2) == ["Oslo: sunny for 1 day"]
    assert "Greets, in the default workspace" in default_prompt
    assert "in ws2" not in default_prompt and "borrow" not in default_prompt
    assert "Forecasts, in ws2" in ws2_prompt and "- city (string, required)" in ws2_prompt
    assert "Greets" not in ws2_prompt and "Tool: borrow" not in ws2_prompt
    assert set(ws2_status) == {"probe", "borrow"} and set(default_status) == {"probe"}
    assert ws2_status["borrow"]["status"] == "not-offered"
    assert "no config item mcp/only-default" in ws2_status["borrow"]["reason"]
    # the error names only ws2's items: the default workspace's ids are not ws2's to see
    assert unknown.value.message == ("no MCP tool 'only-default' is configured in workspace "
                                     "'ws2' (configured: probe)")


class RecordingJokes(JokeService):
    """The joke service, keeping every request it is sent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[dict[str, Any]] = []

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        self.requests.append(request)
        await super().handle(request, reply)


async def test_tool_services_are_told_the_workspace_beside_the_user(
        memory: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(['Thought: t\nAction: tell-joke\nArgs: {"topic": "cats"}'] * 2,
                      rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm, joke=False) as s:
        bus = await memory.connect()
        queues = {"request_queue": f"request:tg:{memory.topic('jokes')}",
                  "response_queue": f"response:tg:{memory.topic('jokes')}"}
        async with RecordingJokes(bus, **queues) as jokes:
            service = {**JOKE_SERVICE, "request-queue": queues["request_queue"],
                       "response-queue": queues["response_queue"]}
            joke = {"type": "tool-service", "name": "tell-joke", "description": "a joke",
                    "service": "joke-service",
                    "arguments": [{"name": "topic", "type": "string", "description": "t"}]}
            for workspace in ("default", "ws2"):
                await s.put({("tool-service", "joke-service"): service,
                             ("tool", "tell-joke"): joke}, workspace=workspace)
            await s.ask("a joke", user="alice")
            await s.ask("a joke", user="bob", workspace="ws2")
    assert [(r["user"], r.get("workspace")) for r in jokes.requests] == [
        ("alice", "default"), ("bob", "ws2")]


async def test_a_workspace_without_items_has_no_tools_and_a_bad_one_is_refused(
        memory: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(default="Thought: t\nFinal Answer: ok")
    async with agent_stack(memory, tmp_path, llm) as s:
        await s.load_jokes()
        await s.ask("anything?", workspace="empty")
        empty_prompt = llm.prompts[-1][1]
        messages = await s.ask("anything?", workspace=["not", "a", "string"])
    assert "tell-joke" not in empty_prompt
    assert messages[-1]["message_type"] == "error"
    assert messages[-1]["error"]["type"] == "bad-request"
    assert "'workspace' must be a string" in messages[-1]["error"]["message"]


async def test_prompt_tools_and_the_agents_own_prompt_come_from_the_workspace(
        memory: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(['Thought: t\nAction: summarise\nArgs: {"text": "long words"}'],
                      rules=[FINISH, Rule(r"^Shorten: (?P<t>.*)$", "short: {t}")])
    async with agent_stack(memory, tmp_path, llm) as s:
        tool = {"type": "prompt", "name": "summarise", "description": "Summarise a text",
                "template": "shorten",
                "arguments": [{"name": "text", "type": "string", "description": "the text"}]}
        await s.put({("prompt", "template.shorten"): {"prompt": "Shorten: {{text}}"},
                     ("prompt", "system"): json.dumps("You are in ws2."),
                     ("tool", "summarise"): tool}, workspace="ws2")
        messages = await s.ask("shorten it", workspace="ws2")
        with pytest.raises(RequestError) as unknown:  # the default workspace has no such one
            await s.agent.prompts.render_and_complete("shorten", {"text": "x"}, timeout=10)
    assert observations(messages) == ["short: long words"]
    # the agent's own (agent-react) prompt went out with ws2's system prompt
    assert llm.prompts[0][0] == "You are in ws2."
    assert "in workspace 'default'" in unknown.value.message
