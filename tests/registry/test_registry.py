"""The live registry against real announcing services, on every bus backend: instances come
with their first announcement (or at once when the registry probes), go with their goodbye or
their ttl, and only changes to what is offered reach the owner."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.conftest import Backend
from tests.registry.test_wire import announcement
from toolmesh.bus.base import Bus
from toolmesh.registry.registry import Registry
from toolmesh.tools.definition import Argument, Tool, ToolServiceDefinition
from toolmesh.tools.service import DynamicToolService
from toolmesh.tools.services.joke import JokeService

JOKE_QUEUE = "request:tg:joke"


class Queues:
    """A test's own announcement queues (tests share brokers)."""

    def __init__(self, backend: Backend) -> None:
        t = backend.topic("announce")
        self.queue = f"notify:tg:{t}-descriptors"
        self.probe_queue = f"notify:tg:{t}-descriptor-requests"

    def service(self, cls: type[DynamicToolService], bus: Bus, **options: Any) -> Any:
        return cls(bus, announcement_queue=self.queue, probe_queue=self.probe_queue, **options)

    def registry(self, bus: Bus, **options: Any) -> Registry:
        return Registry(bus, queue=self.queue, probe_queue=self.probe_queue, **options)


@asynccontextmanager
async def listening(registry: Registry) -> AsyncIterator[Registry]:
    await registry.start()
    try:
        yield registry
    finally:
        await registry.stop()


async def until(registry: Registry, predicate: Any, *, timeout: float = 10.0) -> float:
    """Seconds until ``predicate()`` holds (checked after each change)."""
    start = time.monotonic()
    async with asyncio.timeout(timeout):
        await registry.wait_for(predicate)
    return time.monotonic() - start


async def test_a_service_is_offered_while_it_runs_and_goes_with_its_goodbye(
        backend: Backend) -> None:
    q = Queues(backend)
    bus = await backend.connect()
    changed: list[str] = []

    async def on_change(workspace: str) -> None:
        changed.append(workspace)

    async with listening(q.registry(bus, on_change=on_change)) as registry:
        assert registry.live_instances("joke-service", JOKE_QUEUE) is None  # never announced: unknown
        service = q.service(JokeService, bus)
        await service.start()
        await until(registry, lambda: "joke-service" in registry.offered("default"))
        offered = registry.offered("default")["joke-service"]
        assert set(offered.tools) == {"tell-joke"}
        assert registry.live_instances("joke-service", JOKE_QUEUE) == 1
        # either spelling of the queue
        assert registry.live_instances("joke-service", "non-persistent://tg/request/joke") == 1
        [record] = registry.services("default")
        [instance] = record.instances.values()
        assert instance.announcement.instance == service.announcer.announcement.instance
        assert registry.services("elsewhere") == []

        await service.stop()
        # the goodbye, not the ttl (15 s): gone at once
        assert await until(registry, lambda: not registry.offered("default")) < 2
        assert registry.live_instances("joke-service", JOKE_QUEUE) == 0  # known, and none left
        assert [r.id for r in registry.services("default")] == ["joke-service"]  # remembered
        await until(registry, lambda: changed == ["default", "default"])


async def test_an_instance_not_heard_from_for_its_ttl_is_gone(backend: Backend) -> None:
    q = Queues(backend)
    bus = await backend.connect()
    async with listening(q.registry(bus)) as registry:
        # an instance that announced once and died without a goodbye (SIGKILL)
        producer = await bus.producer(q.queue)
        await producer.send(announcement(ttl=1))
        await until(registry, lambda: registry.live_instances("joke-service", JOKE_QUEUE) == 1)
        gone_after = await until(registry, lambda: registry.live_instances("joke-service", JOKE_QUEUE) == 0)
        assert 0.8 < gone_after < 2.5
        assert registry.offered("default") == {}


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_heartbeats_keep_an_instance_alive_and_change_nothing(memory: Backend) -> None:
    q = Queues(memory)
    bus = await memory.connect()
    async with listening(q.registry(bus)) as registry:
        async with q.service(JokeService, bus, announce_ttl=1.0):  # beats every 1/3 s
            await until(registry, lambda: registry.live_instances("joke-service", JOKE_QUEUE) == 1)
            changes = registry.changes
            [record] = registry.services("default")
            first_seen = record.last_seen
            await asyncio.sleep(2.5)  # well past the ttl: only heartbeats keep it
            assert registry.live_instances("joke-service", JOKE_QUEUE) == 1
            assert record.last_seen > first_seen
            assert registry.changes == changes  # nothing the owner must rebuild for


async def test_replicas_are_counted_and_the_tools_stay_while_one_is_left(
        backend: Backend) -> None:
    q = Queues(backend)
    bus = await backend.connect()
    async with listening(q.registry(bus)) as registry:
        one, two = q.service(JokeService, bus), q.service(JokeService, bus)
        await one.start()
        await two.start()
        await until(registry, lambda: registry.live_instances("joke-service", JOKE_QUEUE) == 2)
        await one.stop()
        await until(registry, lambda: registry.live_instances("joke-service", JOKE_QUEUE) == 1)
        assert "joke-service" in registry.offered("default")
        await two.stop()
        await until(registry, lambda: registry.live_instances("joke-service", JOKE_QUEUE) == 0)
        assert registry.offered("default") == {}


async def test_a_registry_started_late_learns_every_service_at_once(backend: Backend) -> None:
    q = Queues(backend)
    bus = await backend.connect()
    async with q.service(JokeService, bus):  # announced before anyone listened
        async with listening(q.registry(bus)) as registry:
            # its probe brings the announcement now, not at the next heartbeat (5 s)
            assert await until(registry, lambda: bool(registry.offered("default")),
                               timeout=3) < 1.5


class Counter(DynamicToolService):
    definition = ToolServiceDefinition(id="counter", tools=[
        Tool("count", "Count", arguments=[Argument("n", "integer", "how many")])])

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        return "1"


class CounterV2(Counter):
    definition = ToolServiceDefinition(id="counter", tools=[
        Tool("count", "Count better", arguments=[Argument("n", "integer", "how many")])])


async def test_the_newest_instance_defines_what_a_service_offers(memory: Backend) -> None:
    q = Queues(memory)
    bus = await memory.connect()
    async with listening(q.registry(bus)) as registry:
        def description() -> str | None:
            offered = registry.offered("default").get("counter")
            return offered.tools["count"]["description"] if offered else None

        async with q.service(Counter, bus):
            await until(registry, lambda: description() == "Count")
            async with q.service(CounterV2, bus):  # a rolling upgrade
                await until(registry, lambda: description() == "Count better")
            # the new one stopped first: the old definition again
            await until(registry, lambda: description() == "Count")


async def test_workspaces_are_apart_and_a_goodbye_without_one_ends_the_instance_in_all(
        memory: Backend) -> None:
    q = Queues(memory)
    bus = await memory.connect()
    async with listening(q.registry(bus)) as registry:
        producer = await bus.producer(q.queue)
        await producer.send(announcement(workspace="team-a"))
        await until(registry, lambda: bool(registry.offered("team-a")))
        assert registry.offered("default") == {}
        await producer.send({"id": "joke-service", "instance": "host-1-abc", "goodbye": True})
        await until(registry, lambda: not registry.offered("team-a"))


async def test_malformed_announcements_are_logged_once_and_change_nothing(
        memory: Backend, caplog: pytest.LogCaptureFixture) -> None:
    q = Queues(memory)
    bus = await memory.connect()
    caplog.set_level(logging.WARNING, logger="toolmesh.registry")
    async with listening(q.registry(bus)) as registry:
        producer = await bus.producer(q.queue)
        for _ in range(3):  # a broken service heartbeats
            await producer.send(announcement(ttl="soon"))
            await producer.send_bytes(b"\xff not json")
            await producer.send(announcement(tools={"x": {"type": "prompt", "name": "x",
                                                          "description": "d",
                                                          "template": "t"}}))
        await producer.send(announcement(ttl=15))  # a good one still goes through
        await until(registry, lambda: bool(registry.offered("default")))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3, warnings
    assert any("'ttl' must be a number" in w and "host-1-abc" in w for w in warnings)
    assert any("not JSON" in w for w in warnings)
    assert any("an announced tool must have type 'tool-service'" in w for w in warnings)


async def test_the_registry_holds_a_bounded_number_of_services(memory: Backend) -> None:
    q = Queues(memory)
    bus = await memory.connect()
    async with listening(q.registry(bus, max_services=2, max_instances=2)) as registry:
        producer = await bus.producer(q.queue)

        def named(id: str, instance: str = "i", **fields: Any) -> dict[str, Any]:
            value = announcement(id=id, instance=instance, **fields)
            value["descriptor"] = {**value["descriptor"], "id": id}
            value["tools"] = {k: {**t, "service": id} for k, t in value["tools"].items()}
            return value

        await producer.send(named("a"))
        await producer.send(named("b", ttl=1))
        await producer.send(named("c"))  # both live: refused
        for extra in ("i2", "i3"):  # a third instance of a is refused too
            await producer.send(named("a", instance=extra))
        await until(registry, lambda: registry.services("default") != []
                    and len(registry.services("default")[0].instances) == 2)
        assert [r.id for r in registry.services("default")] == ["a", "b"]
        await until(registry, lambda: "b" not in registry.offered("default"))  # its ttl
        await producer.send(named("c"))  # b is gone: c takes its place
        await until(registry, lambda: [r.id for r in registry.services("default")]
                    == ["a", "c"])
