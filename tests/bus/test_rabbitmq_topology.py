"""toolmesh's RabbitMQ layout is TrustGraph's, checked with a plain AMQP client beside it."""

from __future__ import annotations

import asyncio
import json

import aio_pika
import pytest

from tests.conftest import Backend
from toolmesh import Message

pytestmark = pytest.mark.rabbitmq


@pytest.fixture
def backend(rabbitmq: Backend) -> Backend:
    return rabbitmq


@pytest.fixture
async def raw_channel(backend: Backend):  # type: ignore[no-untyped-def]
    connection = await aio_pika.connect(backend.url)
    yield await connection.channel()
    await connection.close()


async def test_a_foreign_publisher_on_the_trustgraph_exchange_reaches_a_toolmesh_consumer(
        backend: Backend, raw_channel: aio_pika.abc.AbstractChannel) -> None:
    topic = backend.topic()
    got: asyncio.Future[Message] = asyncio.get_running_loop().create_future()

    async def handler(message: Message) -> None:
        got.set_result(message)

    await (await backend.connect()).subscribe(f"non-persistent://tg/request/{topic}", handler,
                                              subscription="joke-request")
    # What a TrustGraph process does: publish JSON to the fanout exchange tg.<class>.<topic>
    # with the id in the AMQP headers.
    exchange = await raw_channel.get_exchange(f"tg.request.{topic}")
    await exchange.publish(aio_pika.Message(b'{"user": "bob"}', headers={"id": "x1"}), routing_key="")
    message = await asyncio.wait_for(got, 10)
    assert message.json() == {"user": "bob"} and message.id == "x1"
    # competing consumers share the queue named <exchange>.<subscription>
    queue = await raw_channel.declare_queue(f"tg.request.{topic}.joke-request", passive=True)
    assert queue.name == f"tg.request.{topic}.joke-request"


@pytest.mark.parametrize(("cls", "mode"), [("flow", aio_pika.DeliveryMode.PERSISTENT),
                                           ("request", aio_pika.DeliveryMode.NOT_PERSISTENT)])
async def test_toolmesh_publishes_json_with_headers_and_flow_messages_persistent(
        backend: Backend, raw_channel: aio_pika.abc.AbstractChannel, cls: str,
        mode: aio_pika.DeliveryMode) -> None:
    topic = backend.topic()
    producer = await (await backend.connect()).producer(f"{cls}:tg:{topic}")
    exchange = await raw_channel.get_exchange(f"tg.{cls}.{topic}")
    probe = await raw_channel.declare_queue(exclusive=True, auto_delete=True)
    await probe.bind(exchange)
    await producer.send({"q": "é"}, properties={"id": "abc"})
    async with asyncio.timeout(10):
        async with probe.iterator() as messages:
            async for incoming in messages:
                await incoming.ack()
                break
    assert json.loads(incoming.body) == {"q": "é"}
    assert incoming.headers == {"id": "abc"}
    assert incoming.content_type == "application/json"
    assert incoming.delivery_mode == mode


async def test_flow_queues_are_durable_and_request_queues_are_not(
        backend: Backend, raw_channel: aio_pika.abc.AbstractChannel) -> None:
    topic = backend.topic()
    bus = await backend.connect()

    async def ignore(message: Message) -> None:
        return None

    await bus.subscribe(f"flow:tg:{topic}", ignore, subscription="s")
    await bus.subscribe(f"request:tg:{topic}", ignore, subscription="s")
    # Redeclaring with the wrong durability fails with PRECONDITION_FAILED: a precise probe.
    await raw_channel.declare_queue(f"tg.flow.{topic}.s", durable=True, passive=False)
    await raw_channel.declare_queue(f"tg.request.{topic}.s", durable=False, passive=False)
