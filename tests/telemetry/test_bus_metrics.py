"""The bus counts what it carries, on every backend: each message published, consumed,
handed back and delivered again, or dropped by a failing handler — by queue."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY

from tests.conftest import Backend
from toolmesh import Message, Requeue
from toolmesh.bus.queue_id import parse_queue_id


def count(queue: str, event: str) -> float:
    return REGISTRY.get_sample_value("toolmesh_bus_messages_total",
                                     {"queue": str(parse_queue_id(queue)), "event": event}) or 0.0


async def test_each_message_event_is_counted_by_queue(backend: Backend) -> None:
    queue = f"request:tg:{backend.topic('metrics')}"
    seen: dict[str, int] = {}
    done = asyncio.Event()

    async def handler(message: Message) -> None:
        value = message.json()
        seen[value] = seen.get(value, 0) + 1
        if value == "again" and seen[value] == 1:
            raise Requeue()
        if value == "bad":
            raise ValueError("a bug in the handler")
        if seen.get("again") == 2 and "fine" in seen and "bad" in seen:
            done.set()

    bus = await backend.connect()
    await bus.subscribe(queue, handler, subscription="s", concurrency=1)
    producer = await bus.producer(queue)
    for value in ("fine", "bad", "again"):
        await producer.send(value)
    async with asyncio.timeout(20):
        await done.wait()
    assert count(queue, "published") == 3
    # the one handed back comes again, marked as a redelivery
    assert count(queue, "consumed") == 3
    assert count(queue, "requeued") == 1
    assert count(queue, "redelivered") == 1
    assert count(queue, "dropped") == 1
