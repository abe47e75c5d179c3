"""The RabbitMQ backend's own publishing and consuming path (toolmesh.bus.rabbitmq): frames it
marshals itself, publishes and acknowledgements written together once per turn of the event
loop, its own consumer — and the delivery semantics of toolmesh.bus.base kept through all of
it, against the real broker."""

from __future__ import annotations

import asyncio
import collections
from typing import Any, cast

import aio_pika
import pamqp.frame
import pytest
from pamqp import commands as spec
from pamqp.header import ContentHeader

from tests.bus.tcp_proxy import TcpProxy
from tests.bus.test_contract import Collector
from tests.conftest import Backend
from toolmesh import Message, Requeue, connect
from toolmesh.bus.rabbitmq import RabbitMQBus
from toolmesh.bus.rabbitmq_frames import content_header, settle_frame
from toolmesh.errors import BusError, NoConsumer

WAIT = 15.0


@pytest.fixture
def backend(rabbitmq: Backend) -> Backend:
    return rabbitmq


# --- the frames it marshals itself are the bytes pamqp writes -----------------------------

@pytest.mark.parametrize("headers", [
    None, {}, {"id": "req-1"}, {"id": "x", "timeout": "59.875", "traceparent": "00-ab-cd-01"},
    {"user": "ünïcødé", "empty": "", "b": "2", "a": "1"}, {"k" * 128: "longest name kept"},
    {"k" * 129: "a name pamqp truncates"},
])
@pytest.mark.parametrize("delivery_mode", [1, 2])
@pytest.mark.parametrize("message_id", [None, "tm-0123456789ab-42"])
def test_content_headers_are_the_bytes_pamqp_writes(
        headers: dict[str, str] | None, delivery_mode: int, message_id: str | None) -> None:
    properties = spec.Basic.Properties(content_type="application/json",
                                       headers=cast(dict[str, Any], headers) or None,
                                       delivery_mode=delivery_mode, message_id=message_id)
    for size in (0, 17, 1 << 20):
        assert content_header(7, size, headers, delivery_mode, message_id) == \
            pamqp.frame.marshal(ContentHeader(body_size=size, properties=properties), 7)
    # and they read back as sent
    _, _, read = pamqp.frame.unmarshal(content_header(7, 17, headers, delivery_mode, message_id))
    frame = cast(ContentHeader, read)
    assert frame.properties.headers == ({k[:128]: v for k, v in headers.items()} or None
                                        if headers else None)
    assert frame.properties.delivery_mode == delivery_mode
    assert frame.properties.message_id == message_id


@pytest.mark.parametrize(("method", "frame"), [
    (80, spec.Basic.Ack(delivery_tag=(1 << 40) + 3)),
    (90, spec.Basic.Reject(delivery_tag=5, requeue=True)),
    (90, spec.Basic.Reject(delivery_tag=5, requeue=False)),
])
def test_settling_frames_are_the_bytes_pamqp_writes(method: int, frame: Any) -> None:
    flags = int(getattr(frame, "requeue", False) or getattr(frame, "multiple", False))
    assert settle_frame(9, method, frame.delivery_tag, flags) == pamqp.frame.marshal(frame, 9)


# --- batched publishing keeps every message, in order ------------------------------------

async def test_a_burst_of_publishes_arrives_whole_and_in_order_per_producer(
        backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    c = Collector()
    await (await backend.connect()).subscribe(queue, c, subscription="s", concurrency=1)
    bus = await backend.connect()
    first, second = await bus.producer(queue), await bus.producer(queue)
    big = "x" * (300 * 1024)  # bigger than a frame: split in body frames amid the small ones
    # all sent in the same turns of the event loop, so they leave in shared writes
    await asyncio.gather(*[first.send({"p": 1, "n": i, **({"big": big} if i == 500 else {})})
                           for i in range(1500)],
                         *[second.send({"p": 2, "n": i}) for i in range(1500)])
    await c.wait_for(3000)
    by_producer = collections.defaultdict(list)
    for value in c.values:
        by_producer[value["p"]].append(value["n"])
    assert by_producer[1] == list(range(1500))
    assert by_producer[2] == list(range(1500))
    assert next(v for v in c.values if v["p"] == 1 and v["n"] == 500)["big"] == big


async def test_mandatory_publishes_in_one_burst_each_learn_their_own_fate(
        backend: Backend) -> None:
    """Returns name their publish by its message id: in a batch where half the publishes go
    to an exchange nobody's queue is bound to, exactly those fail with NoConsumer."""
    bound, unbound = f"request:tg:{backend.topic()}", f"request:tg:{backend.topic()}"
    c = Collector()
    await (await backend.connect()).subscribe(bound, c, subscription="s")
    bus = await backend.connect()
    to_bound, to_unbound = await bus.producer(bound), await bus.producer(unbound)
    sends = []
    for i in range(200):
        sends.append(to_bound.send({"n": i}, mandatory=True))
        sends.append(to_unbound.send({"n": i}, mandatory=True))
    results = await asyncio.gather(*sends, return_exceptions=True)
    assert all(r is None for r in results[0::2]), results[0::2]
    assert all(isinstance(r, NoConsumer) for r in results[1::2]), results[1::2]
    await c.wait_for(200)
    assert sorted(v["n"] for v in c.values) == list(range(200))
    # and the channel goes on publishing afterwards
    with pytest.raises(NoConsumer, match="nothing consumes"):
        await to_unbound.send("again", mandatory=True)
    await to_bound.send({"n": 200}, mandatory=True)
    await c.wait_for(201)


# --- acknowledgement after the handler ----------------------------------------------------

async def test_a_message_whose_consumer_dies_mid_handler_goes_to_another(
        backend: Backend) -> None:
    """The consumer reaches the broker through a proxy that then goes away for good: the
    message it was handling (not acknowledged yet) goes to the other consumer."""
    queue = f"request:tg:{backend.topic()}"
    proxy = TcpProxy(5672)
    await proxy.start()
    dying = await connect(backend.url.replace("127.0.0.1:5672", f"127.0.0.1:{proxy.port}"))
    started, release = asyncio.Event(), asyncio.Event()
    seen_by_dying: list[Any] = []

    async def stuck(message: Message) -> None:
        seen_by_dying.append(message.json())
        started.set()
        await release.wait()

    try:
        await dying.subscribe(queue, stuck, subscription="workers", concurrency=1)
        await (await (await backend.connect()).producer(queue)).send({"job": 1},
                                                                     properties={"id": "j1"})
        async with asyncio.timeout(WAIT):
            await started.wait()
        survivor = Collector()
        await (await backend.connect()).subscribe(queue, survivor, subscription="workers")
        await asyncio.sleep(0.5)  # the survivor is idle: the job is still the dying one's
        assert survivor.messages == []
        await proxy.stop()  # the consumer's process is gone, as far as the broker can tell
        await survivor.wait_for(1)
        assert survivor.values == [{"job": 1}] and survivor.messages[0].id == "j1"
        assert seen_by_dying == [{"job": 1}]
    finally:
        release.set()
        await dying.close()


async def test_requeue_failure_and_success_settle_each_message_of_a_burst(
        backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    attempts: collections.Counter[int] = collections.Counter()
    done = Collector()

    async def handler(message: Message) -> None:
        n = message.json()
        attempts[n] += 1
        if n % 3 == 0 and attempts[n] == 1:
            raise Requeue()
        if n % 3 == 1:
            raise RuntimeError("a handler bug: this message is dropped")
        await done(message)

    bus = await backend.connect()
    await bus.subscribe(queue, handler, subscription="s", concurrency=8)
    producer = await bus.producer(queue)
    await asyncio.gather(*[producer.send(n) for n in range(90)])
    await done.wait_for(60)
    await asyncio.sleep(0.5)  # nothing more comes: the dropped ones are gone, not redelivered
    assert sorted(done.values) == [n for n in range(90) if n % 3 != 1]
    assert all(attempts[n] == (2 if n % 3 == 0 else 1) for n in range(90)), attempts


# --- inline handlers ----------------------------------------------------------------------

async def test_inline_handlers_are_called_and_settled_like_any_other(backend: Backend) -> None:
    queue = f"response:tg:{backend.topic()}"
    got: list[Any] = []
    attempts: collections.Counter[str] = collections.Counter()
    finished = asyncio.Event()

    def handler(message: Message) -> None:
        value = message.json()
        attempts[value] += 1
        if value == "again" and attempts[value] == 1:
            raise Requeue()
        if value == "boom":
            raise RuntimeError("a handler bug")
        got.append(value)
        if value == "last":
            finished.set()

    bus = await backend.connect()
    await bus.subscribe(queue, handler, subscription="s", inline=True)
    producer = await bus.producer(queue)
    for value in ("first", "again", "boom", "last"):
        await producer.send(value)
    async with asyncio.timeout(WAIT):
        await finished.wait()
        while "again" not in got:
            await asyncio.sleep(0.01)
    assert sorted(got) == ["again", "first", "last"]
    assert attempts == {"first": 1, "again": 2, "boom": 1, "last": 1}


async def test_inline_refuses_an_async_handler(backend: Backend) -> None:
    async def handler(message: Message) -> None:
        return None

    with pytest.raises(TypeError, match="inline"):
        await (await backend.connect()).subscribe(f"response:tg:{backend.topic()}", handler,
                                                  subscription="s", inline=True)


# --- the consumer comes back --------------------------------------------------------------

async def test_a_consumer_whose_queue_is_deleted_declares_it_again(backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    c = Collector()
    bus = await backend.connect()
    await bus.subscribe(queue, c, subscription="s")
    producer = await bus.producer(queue)
    await producer.send("before")
    await c.wait_for(1)
    connection = await aio_pika.connect(backend.url)
    try:
        channel = await connection.channel()
        await channel.queue_delete(f"tg.request.{queue.rsplit(':', 1)[1]}.s")
    finally:
        await connection.close()
    async with asyncio.timeout(WAIT):
        while True:  # until the queue is declared and bound again
            try:
                await producer.send("after", mandatory=True)
                break
            except NoConsumer:
                await asyncio.sleep(0.05)
    await c.wait_for(2)
    assert c.values == ["before", "after"]


async def test_publishing_waits_out_a_reconnection_with_batches_in_flight(
        backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    c = Collector()
    consumer = await backend.connect()
    await consumer.subscribe(queue, c, subscription="s")
    bus = await backend.connect()
    assert isinstance(bus, RabbitMQBus)
    producer = await bus.producer(queue)
    await producer.send(-1)
    await c.wait_for(1)
    assert backend.break_connections is not None
    breaking = asyncio.ensure_future(backend.break_connections([bus]))
    # sends in flight while the connection goes: each either made it before, or waits for
    # the connection and is sent again (at least once, as the contract says)
    await asyncio.gather(*[producer.send(i) for i in range(300)], breaking)
    await asyncio.gather(*[producer.send(i) for i in range(300, 400)])
    async with asyncio.timeout(WAIT):
        while not set(range(400)) <= set(c.values):
            await c.wait_for(len(c.messages) + 1)


async def test_a_publish_while_the_broker_is_away_waits_up_to_publish_timeout(
        backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    c = Collector()
    await (await backend.connect()).subscribe(queue, c, subscription="s")
    proxy = TcpProxy(5672)
    await proxy.start()
    bus = await RabbitMQBus.connect(
        backend.url.replace("127.0.0.1:5672", f"127.0.0.1:{proxy.port}"), publish_timeout=1.5)
    try:
        producer = await bus.producer(queue)
        await producer.send("before")
        await proxy.stop()
        started = asyncio.get_running_loop().time()
        with pytest.raises(BusError, match="cannot publish"):
            await asyncio.wait_for(producer.send("lost"), 10)
        assert asyncio.get_running_loop().time() - started < 5
        # back within the timeout: the publish waits for it and goes out
        sending = asyncio.create_task(producer.send("after"))
        await asyncio.sleep(0.3)
        assert not sending.done()
        await proxy.start()
        await asyncio.wait_for(sending, 10)
        await c.wait_for(2)
        assert c.values == ["before", "after"]
    finally:
        await bus.close()
        await proxy.stop()
