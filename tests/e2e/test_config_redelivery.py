"""Config puts are applied once when the config service is SIGKILLed in the middle of them.

On the real RabbitMQ and PostgreSQL of this machine: ``toolmesh run config`` as a process, many
puts sent at once from here, the process killed while it is handling them, a new one started.
RabbitMQ redelivers every request the dead process had not acknowledged — some of them already
committed — and a client re-sends the unanswered ones with the same request ids; the store
applies each request id once.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.conftest import RUN_MARKER
from tests.e2e.cluster import cluster
from tests.rabbit import own_vhost
from toolmesh import connect
from toolmesh.config.client import ConfigClient
from toolmesh.config.store import open_store

POSTGRES = "postgresql://root@127.0.0.1:5432/test"
PUTS = 400


@pytest.fixture
async def vhost_url() -> AsyncIterator[str]:
    """The URL of a RabbitMQ vhost of this test's own (the config queues have fixed names)."""
    async with own_vhost(f"{RUN_MARKER}-redelivery") as url:
        yield url


@pytest.fixture
async def store_url() -> AsyncIterator[str]:
    """A PostgreSQL config store in a schema of this test's own, dropped afterwards."""
    schema = f"tm_redelivery_{uuid.uuid4().hex[:8]}"
    yield f"{POSTGRES}?schema={schema}"
    conn = await asyncpg.connect(POSTGRES)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def item(i: int) -> dict[tuple[str, str], str]:
    return {("e2e", f"k{i:04}"): json.dumps({"n": i})}


@pytest.mark.rabbitmq
@pytest.mark.postgres
async def test_puts_redelivered_after_the_config_service_is_killed_are_applied_once(
        vhost_url: str, store_url: str) -> None:
    args = ("run", "config", "--bus", vhost_url, "--config-store", store_url)
    ids = [str(uuid.uuid4()) for _ in range(PUTS)]
    answered: dict[int, int] = {}
    quarter = asyncio.Event()
    async with cluster() as c:
        first = await c.toolmesh("config-1", *args)
        store = await open_store(store_url)
        bus = await connect(vhost_url)
        try:
            async with ConfigClient(bus, timeout=30) as client, \
                    ConfigClient(bus, timeout=30) as retrying:

                async def put(i: int) -> int:
                    answered[i] = await client.put(item(i), request_id=ids[i])
                    if len(answered) >= PUTS // 4:
                        quarter.set()
                    return answered[i]

                calls = [asyncio.ensure_future(put(i)) for i in range(PUTS)]
                async with asyncio.timeout(15):
                    await quarter.wait()
                first.kill()  # SIGKILL, with puts committed but not yet answered or acked
                await first.proc.wait()
                acknowledged = dict(answered)
                assert len(acknowledged) < PUTS, "every put was answered before the kill"

                # every put answered before the kill is in the store, each at its own version
                committed = await store.version()
                stored = await store.dump("default")
                assert {f"k{i:04}" for i in acknowledged} <= set(stored.get("e2e", {}))
                assert sorted(acknowledged.values()) == sorted(set(acknowledged.values()))
                # committed but not answered (nor acknowledged): RabbitMQ redelivers these
                at_risk = (f"at the kill, {committed} put(s) were committed and"
                           f" {len(acknowledged)} answered")

                # a client whose puts went unanswered sends them again, with the same ids
                unanswered = [i for i in range(PUTS) if i not in acknowledged]
                retries = [asyncio.ensure_future(retrying.put(item(i), request_id=ids[i]))
                           for i in unanswered]
                await c.toolmesh("config-2", *args)
                async with asyncio.timeout(20):
                    versions = await asyncio.gather(*calls)
                    retried = await asyncio.gather(*retries)

                # each put applied once: as many versions as puts, every answer its own version
                assert sorted(versions) == list(range(1, PUTS + 1)), at_risk
                assert await store.version() == PUTS
                assert {i: versions[i] for i in acknowledged} == acknowledged
                assert retried == [versions[i] for i in unanswered]
                stored = await store.dump("default")
                assert stored == {"e2e": {k: v for i in range(PUTS) for (_, k), v in
                                          item(i).items()}}

                # and once more, every put with its id: nothing changes, the same answers
                async with asyncio.timeout(20):
                    again = await asyncio.gather(*(client.put(item(i), request_id=ids[i])
                                                   for i in range(PUTS)))
                assert again == versions
                assert await store.version() == PUTS
        finally:
            await bus.close()
            await store.close()
