"""A tool service as its own process, on each broker: its first announcement reaches a
registry in another process, its goodbye removes it at once, and a SIGKILL after its ttl."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator

import pytest

from tests.conftest import RUN_MARKER
from tests.examples.loading import EXAMPLES
from tests.processes import start_toolmesh
from tests.pulsar_broker import PulsarLite
from tests.rabbit import own_vhost
from toolmesh.bus import connect
from toolmesh.registry.registry import Registry

QUEUE = "non-persistent://tg/request/word-count"
TTL = 2.0


@pytest.fixture(params=[pytest.param("rabbitmq", marks=pytest.mark.rabbitmq),
                        pytest.param("pulsar", marks=pytest.mark.pulsar)])
async def bus_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    if request.param == "pulsar":
        broker: PulsarLite = request.getfixturevalue("pulsar_broker")
        yield broker.url
        return
    async with own_vhost(f"{RUN_MARKER}-announcing") as url:
        yield url


async def test_a_service_process_comes_and_goes(bus_url: str) -> None:
    bus = await connect(bus_url)
    registry = Registry(bus)
    await registry.start()

    def live() -> int | None:
        return registry.live_instances("word-count", QUEUE)

    async def until(predicate: object, timeout: float = 15) -> float:
        start = time.monotonic()
        async with asyncio.timeout(timeout):
            await registry.wait_for(predicate)  # type: ignore[arg-type]
        return time.monotonic() - start

    async def service() -> asyncio.subprocess.Process:
        proc, _ = await start_toolmesh("run", "wordtools:WordCount", "--bus", bus_url,
                                       "--announce-ttl", f"{TTL:g}",
                                       cwd=EXAMPLES / "wordcount", as_user=True)
        return proc

    proc: asyncio.subprocess.Process | None = None
    try:
        proc = await service()
        # announced before its "ready:" line: heard within moments, not a heartbeat
        await until(lambda: live() == 1, timeout=TTL / 3)
        assert set(registry.offered("default")["word-count"].tools) == {"count-words"}
        proc.send_signal(signal.SIGTERM)
        assert await until(lambda: live() == 0) < 1.0  # its goodbye
        assert await proc.wait() == 0

        proc = await service()
        await until(lambda: live() == 1, timeout=TTL / 3)
        proc.kill()
        await proc.wait()
        gone_after = await until(lambda: live() == 0)
        # the last heartbeat came 0 .. ttl/3 before the kill
        assert TTL * 0.5 < gone_after < TTL + 2
        assert registry.offered("default") == {}
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await registry.stop()
        await bus.close()
