"""Tools of self-announcing services, offered with no config written: called like configured
ones, overridden and disabled by configured items, refused where the operator says so, and
failing at once when their service has no live instance left."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.agent.stack import JOKE_SERVICE, TELL_JOKE, Stack, agent_stack, observations
from tests.conftest import Backend
from toolmesh.agent.toolset import ToolSet
from toolmesh.llm import Rule, ScriptedLLM
from toolmesh.tools.services.joke import JokeService

FINISH = Rule(r"\nObservation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")
JOKE_FOOD = 'Thought: a joke is needed\nAction: tell-joke\nArgs: {"topic": "food"}'


async def tools_become(s: Stack, predicate: Callable[[ToolSet], bool], *,
                       workspace: str = "default") -> ToolSet:
    async with asyncio.timeout(10):
        return await s.agent.wait_for_tools(predicate, workspace=workspace)


def names(toolset: ToolSet) -> set[str]:
    return set(toolset.tools)


def status_of(toolset: ToolSet, key: str) -> dict[str, Any]:
    return {status.key: status.to_wire() for status in toolset.statuses()}[key]


def joke_service(s: Stack, **options: Any) -> JokeService:
    """A joke service announcing on the stack's queues (its own request queue)."""
    return JokeService(s.agent.bus, topic=f"{s.joke_queues[0].split(':')[-1]}-own",
                       announcement_queue=s.announcement_queues["queue"],
                       probe_queue=s.announcement_queues["probe_queue"], **options)


async def test_an_announced_tool_is_offered_and_called_with_no_config(
        backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM([JOKE_FOOD], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, announce=True) as s:
        toolset = await tools_become(s, lambda t: "tell-joke" in t.tools)
        assert status_of(toolset, "tell-joke") == {
            "key": "tell-joke", "name": "tell-joke", "type": "tool-service",
            "status": "available", "source": "announced", "service": "joke-service"}
        messages = await s.ask("Tell me a joke about food", user="alice")
        assert observations(messages)[0].startswith("Hey alice! Here's a pun for you")
        # a TrustGraph-style config read shows configured items only: there are none
        assert await s.config.list("tool") == []
        assert await s.config.list("tool-service") == []


async def test_a_configured_item_of_the_same_key_overrides_the_announced_one(
        memory: Backend, tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM(), announce=True) as s:
        await tools_become(s, lambda t: "tell-joke" in t.tools)
        request_queue, response_queue = s.joke_queues
        await s.put({
            ("tool-service", "joke-service"): {**JOKE_SERVICE, "request-queue": request_queue,
                                               "response-queue": response_queue},
            ("tool", "tell-joke"): {**TELL_JOKE, "name": "house-joke", "style": "dad-joke"}})
        toolset = await tools_become(s, lambda t: names(t) == {"house-joke"})
        assert toolset.overridden == {"tell-joke": "joke-service"}
        assert status_of(toolset, "tell-joke")["source"] == "configured"

        await s.delete(("tool", "tell-joke"))
        await tools_become(s, lambda t: names(t) == {"tell-joke"})


async def test_enabled_false_hides_an_announced_tool_or_a_whole_service(
        memory: Backend, tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM(), announce=True) as s:
        await tools_become(s, lambda t: "tell-joke" in t.tools)
        await s.put({("tool", "tell-joke"): {"enabled": False}})
        toolset = await tools_become(s, lambda t: not t.tools)
        assert status_of(toolset, "tell-joke") == {
            "key": "tell-joke", "name": None, "type": None, "status": "not-offered",
            "reason": 'disabled by its config item ("enabled": false)', "source": "configured"}
        assert toolset.problems == {}  # an operator's choice is not an error

        await s.delete(("tool", "tell-joke"))
        await tools_become(s, lambda t: "tell-joke" in t.tools)
        await s.put({("tool-service", "joke-service"): {"enabled": False}})
        toolset = await tools_become(s, lambda t: not t.tools)
        reason = status_of(toolset, "tell-joke")["reason"]
        assert "which its config item disables" in reason


async def test_a_workspace_or_an_agent_can_refuse_announcements(memory: Backend,
                                                                tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM(), announce=True) as s:
        await tools_become(s, lambda t: "tell-joke" in t.tools)
        await s.put({("settings", "workspace"): {"accept-announcements": False}})
        toolset = await tools_become(s, lambda t: not t.tools)
        assert not toolset.accepts_announcements and toolset.statuses() == []
        await s.put({("settings", "workspace"): {"accept-announcements": True}})
        await tools_become(s, lambda t: "tell-joke" in t.tools)

    async with agent_stack(memory, tmp_path, ScriptedLLM(), announce=True,
                           announcements=False) as s:
        assert s.agent.registry is None
        await s.load_jokes()  # configured tools still work
        toolset = await tools_become(s, lambda t: "tell-joke" in t.tools)
        assert status_of(toolset, "tell-joke")["source"] == "configured"
        assert not toolset.accepts_announcements


async def test_announced_tools_are_offered_in_the_announced_workspace_only(
        memory: Backend, tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM(), joke=False) as s:
        async with joke_service(s, workspace="team-a"):
            await tools_become(s, lambda t: "tell-joke" in t.tools, workspace="team-a")
            assert s.agent.toolset_of("default").tools == {}


async def test_a_configured_name_wins_over_an_announced_tool_of_another_key(
        memory: Backend, tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM(), announce=True) as s:
        await tools_become(s, lambda t: "tell-joke" in t.tools)
        await s.put({("tool", "my-prompt"): {"type": "text-completion", "name": "tell-joke",
                                             "description": "mine"}})
        toolset = await tools_become(s, lambda t: t.tools["tell-joke"].info.key == "my-prompt")
        assert "like tool/my-prompt" in status_of(toolset, "tell-joke")["reason"]


async def test_a_configured_tool_of_a_service_with_no_live_instance_fails_at_once(
        backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM([JOKE_FOOD, JOKE_FOOD], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, joke=False) as s:
        service = joke_service(s)
        await service.start()
        request_queue, response_queue = service._queues
        await s.put({("tool-service", "joke-service"): {
            **JOKE_SERVICE, "request-queue": request_queue, "response-queue": response_queue},
            ("tool", "tell-joke"): TELL_JOKE})
        registry = s.agent.registry
        assert registry is not None
        async with asyncio.timeout(10):
            await registry.wait_for(lambda: registry.live_instances("joke-service", request_queue) == 1)
        assert observations(await s.ask("a joke about food"))[0].startswith("Hey")

        await service.stop()  # the last instance goes
        async with asyncio.timeout(10):
            await registry.wait_for(lambda: registry.live_instances("joke-service", request_queue) == 0)
        toolset = s.agent.toolset
        assert "tell-joke" in toolset.tools  # configured: still offered...
        started = time.monotonic()
        messages = await s.ask("a joke about food")
        # ...but the call fails at once, not after the tool timeout (5 s)
        assert time.monotonic() - started < 1.0
        assert observations(messages) == ["Error: no live instance of tool service joke-service"]


async def test_another_service_announcing_a_configured_queue_cannot_silence_its_tool(
        memory: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM([JOKE_FOOD], rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm) as s:  # the joke service does not announce
        await s.load_jokes()
        registry = s.agent.registry
        assert registry is not None
        request_queue, response_queue = s.joke_queues
        # some other process announces the joke service's queue under its own id, and goes
        producer = await s.agent.bus.producer(s.announcement_queues["queue"])
        impostor = {"id": "impostor", "instance": "i", "ttl": 15,
                    "descriptor": {"request-queue": request_queue,
                                   "response-queue": response_queue},
                    "tools": {}}
        await producer.send(impostor)
        async with asyncio.timeout(10):
            await registry.wait_for(lambda: registry.live_instances("impostor",
                                                                    request_queue) == 1)
        await producer.send({"id": "impostor", "instance": "i", "goodbye": True})
        async with asyncio.timeout(10):
            await registry.wait_for(lambda: registry.live_instances("impostor",
                                                                    request_queue) == 0)
        # joke-service itself never announced: its configured tool calls it as before
        assert registry.live_instances("joke-service", request_queue) is None
        assert observations(await s.ask("a joke about food", user="bob"))[0].startswith("Hey bob!")
