"""The bus contract: written once, run against every backend (see ``backend`` in conftest)."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest

from tests.conftest import Backend
from toolmesh import BusError, MalformedMessage, Message, Requeue

WAIT = 15.0  # generous: the machine is shared; tests wait on events, never on fixed sleeps


class Collector:
    """A handler that records what it got and lets a test wait for a count."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._changed = asyncio.Event()

    async def __call__(self, message: Message) -> None:
        self.messages.append(message)
        self._changed.set()

    @property
    def values(self) -> list[Any]:
        return [m.json() for m in self.messages]

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(WAIT):
            while len(self.messages) < count:
                self._changed.clear()
                await self._changed.wait()


async def test_request_messages_go_to_exactly_one_competing_consumer(backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    total = Collector()
    per_consumer: list[list[int]] = [[], []]

    def consumer(index: int) -> Any:
        async def handler(message: Message) -> None:
            per_consumer[index].append(message.json()["n"])
            await total(message)
        return handler

    for i in range(2):
        await (await backend.connect()).subscribe(queue, consumer(i), subscription="workers",
                                                  concurrency=4)
    producer = await (await backend.connect()).producer(queue)
    for i in range(200):
        await producer.send({"n": i})
    await total.wait_for(200)
    assert sorted(per_consumer[0] + per_consumer[1]) == list(range(200))  # each exactly once
    assert all(per_consumer), "both competing consumers should get work"


async def test_each_subscription_gets_its_own_copy_of_request_messages(backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    a, b = Collector(), Collector()
    bus = await backend.connect()
    await bus.subscribe(queue, a, subscription="audit")
    await bus.subscribe(queue, b, subscription="workers")
    producer = await bus.producer(queue)
    for i in range(5):
        await producer.send(i)
    await a.wait_for(5)
    await b.wait_for(5)
    assert a.values == b.values == list(range(5))


@pytest.mark.parametrize("cls", ["response", "notify"])
async def test_every_response_and_notify_consumer_gets_every_message(backend: Backend, cls: str) -> None:
    queue = f"{cls}:tg:{backend.topic()}"
    collectors = [Collector() for _ in range(3)]
    for c in collectors:
        # the same subscription name on purpose: these classes never share a queue
        await (await backend.connect()).subscribe(queue, c, subscription="same")
    producer = await (await backend.connect()).producer(queue)
    for i in range(10):
        await producer.send({"i": i})
    for c in collectors:
        await c.wait_for(10)
        assert [v["i"] for v in c.values] == list(range(10))


async def test_pulsar_and_trustgraph_spellings_reach_the_same_queue(backend: Backend) -> None:
    topic = backend.topic()
    c = Collector()
    await (await backend.connect()).subscribe(f"non-persistent://tg/request/{topic}", c,
                                              subscription="s")
    await (await (await backend.connect()).producer(f"request:tg:{topic}")).send("hello")
    await c.wait_for(1)
    assert c.values == ["hello"]


async def test_properties_round_trip(backend: Backend) -> None:
    queue = f"flow:tg:{backend.topic()}"
    c = Collector()
    await (await backend.connect()).subscribe(queue, c, subscription="s")
    producer = await (await backend.connect()).producer(queue)
    props = {"id": "req-1", "user": "ünïcødé", "empty": ""}
    await producer.send({"k": "v"}, properties=props)
    await c.wait_for(1)
    assert dict(c.messages[0].properties) == props
    assert c.messages[0].id == "req-1"
    assert c.values == [{"k": "v"}]


async def test_one_mebibyte_messages(backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    c = Collector()
    await (await backend.connect()).subscribe(queue, c, subscription="s")
    big = "x" * (1 << 20)
    await (await (await backend.connect()).producer(queue)).send({"blob": big})
    await c.wait_for(1)
    assert c.values[0]["blob"] == big


async def test_a_non_json_body_does_not_kill_the_consumer(backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    seen: list[Any] = []
    errors: list[MalformedMessage] = []
    done = asyncio.Event()

    async def handler(message: Message) -> None:
        try:
            seen.append(message.json())
        except MalformedMessage as e:
            errors.append(e)
            raise  # a handler bug: the bus must log it, drop the message, and carry on
        if seen[-1] == "after":
            done.set()

    bus = await backend.connect()
    await bus.subscribe(queue, handler, subscription="s", concurrency=1)
    producer = await bus.producer(queue)
    await producer.send_bytes(b"\xff\xfe not json {")
    await producer.send("after")
    async with asyncio.timeout(WAIT):
        await done.wait()
    assert len(errors) == 1 and "not JSON" in errors[0].message
    assert seen == ["after"]


async def test_handler_failure_drops_the_message_and_the_consumer_goes_on(backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    c = Collector()

    async def handler(message: Message) -> None:
        if message.json() == "boom":
            raise RuntimeError("handler bug")
        await c(message)

    bus = await backend.connect()
    await bus.subscribe(queue, handler, subscription="s", concurrency=1)
    producer = await bus.producer(queue)
    for v in ["a", "boom", "b"]:
        await producer.send(v)
    await c.wait_for(2)
    assert c.values == ["a", "b"]


@pytest.mark.parametrize("cls", ["request", "flow"])
async def test_requeue_redelivers_the_message(backend: Backend, cls: str) -> None:
    queue = f"{cls}:tg:{backend.topic()}"
    attempts: collections.Counter[str] = collections.Counter()
    c = Collector()

    async def handler(message: Message) -> None:
        value = message.json()
        attempts[value] += 1
        if attempts[value] == 1:
            raise Requeue()
        await c(message)

    bus = await backend.connect()
    await bus.subscribe(queue, handler, subscription="s", concurrency=1)
    await (await bus.producer(queue)).send("again")
    await c.wait_for(1)
    assert attempts["again"] == 2


async def test_a_consumer_handles_many_messages_concurrently_up_to_its_bound(backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    bound = 5
    running = 0
    peak = 0
    release = asyncio.Event()
    reached = asyncio.Event()
    finished = Collector()

    async def handler(message: Message) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == bound:
            reached.set()
        await release.wait()
        running -= 1
        await finished(message)

    bus = await backend.connect()
    await bus.subscribe(queue, handler, subscription="s", concurrency=bound)
    producer = await bus.producer(queue)
    for i in range(3 * bound):
        await producer.send(i)
    async with asyncio.timeout(WAIT):
        await reached.wait()
    # Give the consumer every chance to exceed its bound before releasing the handlers.
    for _ in range(50):
        await asyncio.sleep(0)
    assert peak == bound
    release.set()
    await finished.wait_for(3 * bound)
    assert peak == bound
    assert sorted(finished.values) == list(range(3 * bound))


async def test_close_waits_for_handlers_in_flight_and_stops_delivery(backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    started = asyncio.Event()
    release = asyncio.Event()
    completed: list[Any] = []

    async def handler(message: Message) -> None:
        started.set()
        await release.wait()
        completed.append(message.json())

    bus = await backend.connect()
    sub = await bus.subscribe(queue, handler, subscription="s", concurrency=1)
    await (await bus.producer(queue)).send("in-flight")
    async with asyncio.timeout(WAIT):
        await started.wait()
    closing = asyncio.ensure_future(sub.close())
    await asyncio.sleep(0)
    assert not closing.done()
    release.set()
    async with asyncio.timeout(WAIT):
        await closing
    assert completed == ["in-flight"]


def retained_class(backend: Backend) -> str:
    """A shared queue class that keeps messages while no consumer is connected."""
    return "request" if backend.keeps_unconsumed_requests else "flow"


async def test_messages_survive_on_a_shared_queue_until_a_consumer_comes(backend: Backend) -> None:
    queue = f"{retained_class(backend)}:tg:{backend.topic()}"
    bus = await backend.connect()
    first = Collector()
    sub = await bus.subscribe(queue, first, subscription="s")
    await sub.close()  # the shared queue now exists, with no consumer
    await (await bus.producer(queue)).send("waiting")
    later = Collector()
    await (await backend.connect()).subscribe(queue, later, subscription="s")
    await later.wait_for(1)
    assert later.values == ["waiting"] and first.values == []


async def test_traffic_flows_again_after_the_broker_closes_the_connection(backend: Backend) -> None:
    if backend.break_connections is None:
        pytest.skip(f"the {backend.name} bus has no connection to lose")
    # On Pulsar the break is a broker restart; only a persistent topic keeps what is sent
    # before the consumer is back.
    queue = f"{retained_class(backend)}:tg:{backend.topic()}"
    consumer_bus = await backend.connect()
    producer_bus = await backend.connect()
    c = Collector()
    await consumer_bus.subscribe(queue, c, subscription="s")
    producer = await producer_bus.producer(queue)
    await producer.send("before")
    await c.wait_for(1)

    await backend.break_connections([consumer_bus, producer_bus])

    # The first send after the break waits out the reconnection instead of failing.
    await producer.send("after-1")
    await producer.send("after-2")
    async with asyncio.timeout(WAIT):
        while "after-2" not in c.values:
            await c.wait_for(len(c.messages) + 1)
    # Nothing lost, in order. A broker that died before an acknowledgement reached it may
    # hand that message over once more (at-least-once), so only "before" may repeat.
    assert [v for v in c.values if v != "before"] == ["after-1", "after-2"]
    assert c.values[0] == "before"


async def test_closed_bus_refuses_with_a_clear_error(backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    bus = await backend.connect()
    producer = await bus.producer(queue)
    await bus.close()
    with pytest.raises(BusError, match="closed"):
        await producer.send("x")
    with pytest.raises(BusError, match="closed"):
        await bus.subscribe(queue, Collector(), subscription="s")


# -- inline handlers: subscribe(..., inline=True) -------------------------------------------------

async def test_an_inline_handler_gets_every_message_in_order(backend: Backend) -> None:
    queue = f"response:tg:{backend.topic()}"
    got: list[Any] = []
    done = asyncio.Event()

    def handler(message: Message) -> None:
        got.append(message.json())
        if len(got) == 100:
            done.set()

    await (await backend.connect()).subscribe(queue, handler, subscription="s", inline=True)
    producer = await (await backend.connect()).producer(queue)
    for i in range(100):
        await producer.send(i)
    async with asyncio.timeout(WAIT):
        await done.wait()
    assert got == list(range(100))


async def test_an_inline_handler_that_fails_loses_the_message_not_the_consumer(
        backend: Backend) -> None:
    queue = f"request:tg:{backend.topic()}"
    got: list[Any] = []
    done = asyncio.Event()

    def handler(message: Message) -> None:
        value = message.json()
        if value == "boom":
            raise RuntimeError("handler bug")
        got.append(value)
        if value == "b":
            done.set()

    bus = await backend.connect()
    await bus.subscribe(queue, handler, subscription="s", inline=True)
    producer = await bus.producer(queue)
    for value in ["a", "boom", "b"]:
        await producer.send(value)  # the handler's failure never reaches the sender
    async with asyncio.timeout(WAIT):
        await done.wait()
    assert got == ["a", "b"]


@pytest.mark.parametrize("cls", ["request", "flow"])
async def test_an_inline_handler_may_hand_a_message_back(backend: Backend, cls: str) -> None:
    queue = f"{cls}:tg:{backend.topic()}"
    attempts: collections.Counter[str] = collections.Counter()
    done = asyncio.Event()

    def handler(message: Message) -> None:
        value = message.json()
        attempts[value] += 1
        if attempts[value] == 1:
            raise Requeue()
        done.set()

    bus = await backend.connect()
    await bus.subscribe(queue, handler, subscription="s", inline=True)
    await (await bus.producer(queue)).send("again")
    async with asyncio.timeout(WAIT):
        await done.wait()
    assert attempts["again"] == 2


async def test_inline_takes_a_plain_function_not_an_async_one(backend: Backend) -> None:
    async def handler(message: Message) -> None:
        pass

    bus = await backend.connect()
    with pytest.raises(TypeError, match="plain function"):
        await bus.subscribe(f"response:tg:{backend.topic()}", handler, subscription="s",
                            inline=True)
