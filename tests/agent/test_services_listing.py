"""The agent's ``agent-services`` service on the bus: every tool service of a workspace,
configured or announced, its live instances and what became of its tools — with real tool
services announcing themselves, coming and going."""

from __future__ import annotations

import asyncio
import os
import socket
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.agent.stack import JOKE_SERVICE, TELL_JOKE, Stack, agent_stack
from tests.conftest import Backend
from toolmesh import RequestClient
from toolmesh.llm import ScriptedLLM
from toolmesh.tools.definition import Argument, Tool, ToolServiceDefinition
from toolmesh.tools.service import DynamicToolService


class WordCount(DynamicToolService):
    """A second self-announcing service: one tool, ``count-words``."""

    definition = ToolServiceDefinition(
        id="wordcount", tools=[Tool("count-words", "Count the words of a text",
                                    arguments=[Argument("text", "string", "the text")])])

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        return str(len(str(arguments.get("text", "")).split()))


async def listing(s: Stack, **request: Any) -> dict[str, Any]:
    """The agent's answer to an agent-services request, through the bus."""
    service = s.agent.services_status
    async with RequestClient(await s.backend.connect(), request_queue=str(service.request_queue),
                             response_queue=str(service.response_queue)) as client:
        return await client.request(request, timeout=10)


def by_id(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {service["id"]: service for service in answer["services"]}


def word_count(s: Stack, **options: Any) -> WordCount:
    """A word-count service announcing on the stack's queues, with queues of its own."""
    return WordCount(s.agent.bus, topic=f"{s.joke_queues[0].split(':')[-1]}-wc",
                     announcement_queue=s.announcement_queues["queue"],
                     probe_queue=s.announcement_queues["probe_queue"], **options)


async def offered(s: Stack, key: str, *, workspace: str = "default") -> None:
    async with asyncio.timeout(10):
        await s.agent.wait_for_tools(lambda t: any(tool.info.key == key
                                                   for tool in t.tools.values()),
                                     workspace=workspace)


def is_iso_utc(text: Any) -> bool:
    return isinstance(text, str) and text.endswith("Z") and \
        datetime.fromisoformat(text).utcoffset() == timedelta(0)


async def test_a_configured_service_that_does_not_announce_has_no_known_liveness(
        memory: Backend, tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM()) as s:
        assert (await listing(s))["services"] == []
        await s.load_jokes()
        answer = await listing(s)
    assert answer["workspace"] == "default" and answer["accepts-announcements"] is True
    assert answer["version"] == 1  # the one put of load_jokes
    assert answer["services"] == [{
        "id": "joke-service", "configured": True, "announced": False, "enabled": True,
        "request-queue": s.joke_queues[0],
        "descriptor": {**JOKE_SERVICE, "request-queue": s.joke_queues[0],
                       "response-queue": s.joke_queues[1]},
        "live": None, "instances": [], "last-seen": None,
        "tools": [{"key": "tell-joke", "name": "tell-joke", "source": "configured",
                   "status": "offered"}]}]


async def test_an_announced_service_shows_its_live_instance(backend: Backend,
                                                           tmp_path: Path) -> None:
    async with agent_stack(backend, tmp_path, ScriptedLLM(), announce=True) as s:
        await offered(s, "tell-joke")
        answer = await listing(s)
        # a TrustGraph-style config read still shows configured items only
        assert await s.config.list("tool-service") == []
    (joke,) = answer["services"]
    (instance,) = joke.pop("instances")
    # the descriptor the service announced, config-params and all: what a tool form needs
    descriptor = joke.pop("descriptor")
    assert descriptor["id"] == "joke-service"
    assert descriptor["request-queue"] == s.joke_queues[0]
    assert [p["name"] for p in descriptor["config-params"]] == \
        [p["name"] for p in JOKE_SERVICE["config-params"]]
    assert joke == {
        "id": "joke-service", "configured": False, "announced": True, "enabled": True,
        "request-queue": s.joke_queues[0], "live": 1, "last-seen": joke["last-seen"],
        "tools": [{"key": "tell-joke", "name": "tell-joke", "source": "announced",
                   "status": "offered"}]}
    assert (instance["host"], instance["pid"], instance["ttl"]) == (socket.gethostname(),
                                                                    os.getpid(), 15.0)
    assert instance["instance"].startswith(f"{socket.gethostname()}-{os.getpid()}-")
    assert all(is_iso_utc(t) for t in (instance["started"], instance["last-heartbeat"],
                                       joke["last-seen"]))
    assert instance["started"] <= instance["last-heartbeat"] == joke["last-seen"]


async def test_a_configured_item_overriding_an_announced_tool_is_listed_beside_it(
        memory: Backend, tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM(), announce=True) as s:
        await offered(s, "tell-joke")
        request_queue, response_queue = s.joke_queues
        await s.put({
            ("tool-service", "joke-service"): {**JOKE_SERVICE, "request-queue": request_queue,
                                               "response-queue": response_queue},
            ("tool", "tell-joke"): {**TELL_JOKE, "name": "house-joke"}})
        await offered(s, "tell-joke")
        joke = by_id(await listing(s))["joke-service"]
    assert (joke["configured"], joke["announced"], joke["live"]) == (True, True, 1)
    assert joke["tools"] == [
        {"key": "tell-joke", "name": "house-joke", "source": "configured", "status": "offered"},
        {"key": "tell-joke", "name": "tell-joke", "source": "announced",
         "status": "overridden", "reason": "the configured item tool/tell-joke overrides it"}]


async def test_a_stopped_service_has_no_live_instance_and_its_tools_say_so(
        memory: Backend, tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM(), joke=False) as s:
        service = word_count(s)
        queues = {"request-queue": str(service.request_queue),
                  "response-queue": str(service.response_queue)}
        # configured too: a tool of its own under another key, on the same queues
        await s.put({("tool-service", "wordcount"): {"id": "wordcount", **queues},
                     ("tool", "count"): {"type": "tool-service", "name": "count",
                                         "description": "Count words", "service": "wordcount"}})
        async with service:
            await offered(s, "count-words")
            running = by_id(await listing(s))["wordcount"]
        async with asyncio.timeout(10):  # the goodbye takes its tools away at once
            await s.agent.wait_for_tools(lambda t: "count-words" not in t.tools)
        stopped = by_id(await listing(s))["wordcount"]
    assert (running["live"], len(running["instances"])) == (1, 1)
    assert [(t["key"], t["status"]) for t in running["tools"]] == [
        ("count", "offered"), ("count-words", "offered")]
    assert stopped["request-queue"] == queues["request-queue"]
    assert (stopped["configured"], stopped["announced"], stopped["live"],
            stopped["instances"]) == (True, True, 0, [])
    assert stopped["last-seen"] == running["last-seen"]
    assert stopped["tools"] == [{
        "key": "count", "name": "count", "source": "configured", "status": "no-live-instance",
        "reason": "no live instance of tool service wordcount; calls fail at once"}]


async def test_a_workspace_sees_only_its_own_services(memory: Backend, tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM(), joke=False) as s:
        await s.load_jokes()  # configured in default
        async with word_count(s, workspace="team-a"):
            await offered(s, "count-words", workspace="team-a")
            team = await listing(s, workspace="team-a")
            default = await listing(s)
            other = await listing(s, workspace="team-b")
    assert team["workspace"] == "team-a"
    assert [(x["id"], x["configured"], x["announced"]) for x in team["services"]] == [
        ("wordcount", False, True)]
    assert [(x["id"], x["configured"], x["announced"]) for x in default["services"]] == [
        ("joke-service", True, False)]
    assert (other["workspace"], other["services"]) == ("team-b", [])


async def test_with_announcements_off_nothing_announced_is_listed(memory: Backend,
                                                                  tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM(), announce=True,
                           announcements=False) as s:
        assert (await listing(s))["services"] == []
        await s.load_jokes()
        answer = await listing(s)
    assert answer["accepts-announcements"] is False
    (joke,) = answer["services"]
    assert (joke["id"], joke["configured"], joke["announced"], joke["live"],
            joke["instances"]) == ("joke-service", True, False, None, [])
    assert [(t["key"], t["source"], t["status"]) for t in joke["tools"]] == [
        ("tell-joke", "configured", "offered")]


async def test_a_workspace_refusing_announcements_lists_them_as_not_offered(
        memory: Backend, tmp_path: Path) -> None:
    async with agent_stack(memory, tmp_path, ScriptedLLM(), announce=True) as s:
        await offered(s, "tell-joke")
        await s.put({("settings", "workspace"): {"accept-announcements": False}})
        answer = await listing(s)
    assert answer["accepts-announcements"] is False
    (joke,) = answer["services"]
    assert (joke["announced"], joke["live"]) == (True, 1)
    assert joke["tools"] == [{
        "key": "tell-joke", "name": "tell-joke", "source": "announced", "status": "not-offered",
        "reason": "workspace 'default' does not take announced tools (settings/workspace has "
                  "\"accept-announcements\": false)"}]
