"""`toolmesh serve` has two registries (the agent's, and the gateway's for its tool-service
route): what the bus announces is logged once, not once per registry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import RUN_MARKER
from tests.rabbit import own_vhost
from tests.registry.test_wire import announcement
from tests.servers import Served, toolmesh_serve
from toolmesh.bus import connect

pytestmark = pytest.mark.rabbitmq


async def logged(served: Served, predicate: Callable[[str], bool]) -> None:
    """Wait until a line of the log satisfies ``predicate`` (the log grows as it writes)."""
    async with asyncio.timeout(10):
        while not any(predicate(line) for line in served.log):
            await asyncio.sleep(0.05)  # a child process's log: nothing to wait on but its pipe


async def test_instances_and_malformed_announcements_are_logged_once(tmp_path: Path) -> None:
    async with own_vhost(f"{RUN_MARKER}-serve-logs") as url, \
            toolmesh_serve(tmp_path, "--bus", url) as served:
        bus = await connect(url)
        try:
            producer = await bus.producer("notify:tg:tool-descriptors")
            await producer.send(announcement(ttl="soon", instance="broken-1"))
            await producer.send(announcement(instance="good-1", ttl=1))
            await logged(served, lambda line: "good-1 not heard from" in line)
        finally:
            await bus.close()
    log = "".join(served.log)
    assert log.count("ignored an announcement from instance 'broken-1'") == 1, log
    assert log.count("instance good-1 (host pid 1) is up") == 1, log
    assert log.count("instance good-1 not heard from in its ttl") == 1, log
