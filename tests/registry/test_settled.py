"""A registry's first readers wait, once and briefly, for the answers to its start-up probe:
an agent asked the moment it starts offers the tools the running services announce, and an
agent with no announced services is slowed by at most the short window, once."""

from __future__ import annotations

import asyncio

from tests.registry.test_wire import announcement
from toolmesh.bus import connect
from toolmesh.bus.memory import new_memory_url
from toolmesh.registry.registry import Registry

SETTLE = 0.3


async def test_an_answer_that_comes_within_the_window_is_applied_before_settled_returns(
        ) -> None:
    bus = await connect(new_memory_url())
    applied: list[str] = []

    async def on_change(workspace: str) -> None:
        await asyncio.sleep(0)  # a rebuild takes its turns on the loop
        applied.append(workspace)

    registry = Registry(bus, on_change=on_change, settle=SETTLE)
    try:
        await registry.start()
        loop = asyncio.get_running_loop()
        # a service's answer to the probe, a broker's round trip later
        loop.call_later(SETTLE / 3, registry.receive, announcement())
        started = loop.time()
        async with asyncio.timeout(5):
            await registry.settled()
        assert applied == ["default"] and "joke-service" in registry.offered("default")
        assert loop.time() - started < SETTLE + 1
        again = loop.time()
        await registry.settled()  # the window is over: no reader waits any more
        assert loop.time() - again < 0.05
    finally:
        await registry.stop()
        await bus.close()


async def test_without_services_the_wait_is_the_window_once_and_a_stopped_registry_none(
        ) -> None:
    bus = await connect(new_memory_url())
    registry = Registry(bus, settle=SETTLE)
    try:
        await Registry(bus).settled()  # never started: nothing to wait for
        await registry.start()
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with asyncio.timeout(5):
            await asyncio.gather(registry.settled(), registry.settled())
        assert SETTLE * 0.9 < loop.time() - started < SETTLE + 1
        assert registry.offered("default") == {}
    finally:
        await registry.stop()
    await registry.settled()
    await bus.close()
