"""Redelivery after a connection loss, on the real RabbitMQ: each delivery of a message is
counted (the broker says only "delivered before"), a service refuses a request delivered too
often, and a tool service written with the SDK runs a call once however often the broker's
connections are closed under it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Backend
from toolmesh import DynamicToolService, RequestError
from toolmesh.bus.base import Message
from toolmesh.bus.delivery import deliveries
from toolmesh.rpc.service import Reply, Service
from toolmesh.tools import ToolServiceClient
from toolmesh.tools.dedupe import Claim, MemoryDedupe
from toolmesh.tools.queues import topic_queues

pytestmark = pytest.mark.rabbitmq

WAIT = 30


class Held:
    """A handler that records each delivery's count and holds it until released."""

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.arrived = asyncio.Condition()
        self.release = asyncio.Event()

    async def __call__(self, message: Message) -> None:
        async with self.arrived:
            self.counts.append(deliveries())
            self.arrived.notify_all()
        await self.release.wait()

    async def wait_for(self, n: int) -> None:
        async with asyncio.timeout(WAIT), self.arrived:
            await self.arrived.wait_for(lambda: len(self.counts) >= n)


async def test_each_delivery_after_a_lost_connection_is_counted(rabbitmq: Backend) -> None:
    assert rabbitmq.break_connections is not None
    queue = f"request:tg:{rabbitmq.topic()}"
    consumer = await rabbitmq.connect()
    held = Held()
    sub = await consumer.subscribe(queue, held, subscription="s")
    await (await (await rabbitmq.connect()).producer(queue)).send({"n": 1},
                                                                 properties={"id": "r1"})
    for n in range(1, 4):
        await held.wait_for(n)
        await rabbitmq.break_connections([consumer])  # the handler is cut off mid-way
    await held.wait_for(4)
    held.release.set()
    await sub.close()
    assert held.counts == [1, 2, 3, 4]


class Slow(Service):
    """Answers ``{"ok": true}`` once released; counts how often it began."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.began = Held()

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        await self.began(Message(b"{}"))
        await reply({"ok": True})


async def test_a_request_delivered_too_often_is_answered_with_an_error(
        rabbitmq: Backend) -> None:
    from toolmesh import RequestClient

    assert rabbitmq.break_connections is not None
    topic = rabbitmq.topic("cap")
    request_queue, response_queue = f"request:tg:{topic}", f"response:tg:{topic}"
    service_bus = await rabbitmq.connect()
    service = Slow(service_bus, request_queue=request_queue, response_queue=response_queue,
                   subscription="slow", max_deliveries=2)
    await service.start()
    try:
        async with RequestClient(await rabbitmq.connect(), request_queue=request_queue,
                                 response_queue=response_queue) as client:
            call = asyncio.ensure_future(client.request({"x": 1}, timeout=WAIT))
            for n in (1, 2):
                await service.began.wait_for(n)
                await rabbitmq.break_connections([service_bus])
            with pytest.raises(RequestError) as e:
                async with asyncio.timeout(WAIT):
                    await call
    finally:
        service.began.release.set()
        await service.stop()
    assert e.value.type == "too-many-deliveries"
    assert "got this request 3 times" in e.value.message and "after 2" in e.value.message
    assert service.began.counts == [1, 2]  # the third delivery was not handled


class Mailer(DynamicToolService):
    """Records each run; a run waits until released."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runs = Held()

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        await self.runs(Message(b"{}"))
        return f"sent to {arguments['to']}"


class Watched(MemoryDedupe):
    """The SDK's memory store, counting the deliveries that reach it."""

    def __init__(self) -> None:
        super().__init__()
        self.claims = Held()
        self.claims.release.set()

    async def claim(self, key: str, fingerprint: str, *, lease: float) -> Claim:
        await self.claims(Message(b"{}"))
        return await super().claim(key, fingerprint, lease=lease)


class Reconnections(logging.Handler):
    """Counts the RabbitMQ bus's "reconnected" lines (each bus logs one when it is back,
    its queues and consumers restored)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.changed = asyncio.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("reconnected to RabbitMQ"):
            self.count += 1
            asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def wait_for(self, n: int) -> None:
        async with asyncio.timeout(WAIT), self.changed:
            await self.changed.wait_for(lambda: self.count >= n)


@pytest.fixture
def reconnections() -> Iterator[Reconnections]:
    handler = Reconnections()
    logger = logging.getLogger("toolmesh.bus.rabbitmq")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.mark.parametrize("dedupe", [True, False])
async def test_a_tool_written_with_the_sdk_runs_once_when_connections_close_mid_call(
        rabbitmq: Backend, reconnections: Reconnections, dedupe: bool) -> None:
    """Every connection the broker has with the service and its caller closed twice while
    the call runs: the caller gets its answer, and the tool ran once (without the SDK's
    dedupe: once per delivery, three times)."""
    assert rabbitmq.break_connections is not None
    topic = rabbitmq.topic("mail")
    request_queue, response_queue = topic_queues(topic)
    service_bus, client_bus = await rabbitmq.connect(), await rabbitmq.connect()
    store = Watched()
    mailer = Mailer(service_bus, topic=topic, dedupe=store if dedupe else False)
    arrived = store.claims if dedupe else mailer.runs  # where each delivery shows
    await mailer.start()
    try:
        async with ToolServiceClient(client_bus, request_queue=request_queue,
                                     response_queue=response_queue) as client:
            call = asyncio.ensure_future(client.call(user="u", arguments={"to": "bob"},
                                                     key="d1/1/c1", timeout=WAIT))
            await mailer.runs.wait_for(1)
            for n in (2, 3):
                await rabbitmq.break_connections([service_bus, client_bus])
                await arrived.wait_for(n)  # the broker delivered the call again
            await reconnections.wait_for(4)  # the caller hears answers again
            mailer.runs.release.set()
            async with asyncio.timeout(WAIT):
                answer = await call
    finally:
        mailer.runs.release.set()
        await mailer.stop()
    assert answer == "sent to bob"
    assert arrived.counts == [1, 2, 3]  # each delivery counted
    assert mailer.runs.counts == ([1] if dedupe else [1, 2, 3])
