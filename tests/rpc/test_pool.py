"""The client pool stays bounded: services that come and go on new queues do not leave a
subscription each behind, and a client closed for being unused is made again when needed."""

from __future__ import annotations

from tests.conftest import Backend
from toolmesh.agent.tools.context import ClientPool
from toolmesh.tools.services.joke import JokeService


async def test_the_least_recently_used_client_is_closed_and_made_again(memory: Backend) -> None:
    bus = await memory.connect()
    pool = ClientPool(bus, max_clients=2)
    services = [JokeService(bus, topic=f"pool-{i}", announce=False) for i in range(3)]
    for service in services:
        await service.start()
    try:
        queues = [(str(s.request_queue), str(s.response_queue)) for s in services]
        first = await pool.tool_service(*queues[0])
        second = await pool.tool_service(*queues[1])
        assert await pool.tool_service(*queues[0]) is first  # shared; now the most recent
        await pool.tool_service(*queues[2])  # a third: the least recently used (1) goes
        assert len(pool) == 2
        assert await pool.tool_service(*queues[0]) is first
        again = await pool.tool_service(*queues[1])  # made again, and it works
        assert again is not second
        answer = await again.call(user="u", config={}, arguments={"topic": "food"}, timeout=5)
        assert answer.startswith("Hey u!")
        assert len(pool) == 2
    finally:
        await pool.close()
        for service in services:
            await service.stop()
    assert len(pool) == 0
