"""The in-process bus: asyncio queues with the same semantics as the brokers.

``memory://NAME`` names an in-process broker; every :func:`connect` to the same name in one
process reaches the same broker (``memory://`` is the process's default one), so the parts of
``toolmesh serve`` connect by URL exactly as separate processes would to RabbitMQ. Bodies
travel encoded, as on a real broker, so no two parts ever share a mutable object.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

from toolmesh.bus.base import DEFAULT_CONCURRENCY, Handler, Message, encode, string_properties
from toolmesh.bus.delivery import run_handler
from toolmesh.bus.queue_id import QueueId, parse_queue_id
from toolmesh.errors import BusError


class _Queue:
    """One broker-side queue; consumers attached to it compete for its messages."""

    def __init__(self) -> None:
        self.items: asyncio.Queue[Message] = asyncio.Queue()


class _Exchange:
    """Fans each message out to every bound queue, like a RabbitMQ fanout exchange."""

    def __init__(self) -> None:
        self.shared: dict[str, _Queue] = {}
        self.exclusive: set[_Queue] = set()

    def publish(self, message: Message) -> None:
        for q in self.shared.values():
            q.items.put_nowait(message)
        for q in self.exclusive:
            q.items.put_nowait(message)


class MemoryBroker:
    """The broker state behind every :class:`MemoryBus` of one name."""

    def __init__(self) -> None:
        self.exchanges: dict[QueueId, _Exchange] = {}

    def exchange(self, queue: QueueId) -> _Exchange:
        ex = self.exchanges.get(queue)
        if ex is None:
            ex = self.exchanges[queue] = _Exchange()
        return ex


_brokers: dict[str, MemoryBroker] = {}


class MemoryProducer:
    """Publishes to one in-process exchange."""

    def __init__(self, bus: MemoryBus, queue: QueueId, exchange: _Exchange) -> None:
        self.queue = queue
        self._bus = bus
        self._exchange = exchange

    async def send(self, value: Any, *, properties: Mapping[str, str] | None = None) -> None:
        await self.send_bytes(encode(value), properties=properties)

    async def send_bytes(self, body: bytes, *, properties: Mapping[str, str] | None = None) -> None:
        if self._bus.closed:
            raise BusError(f"cannot publish to {self.queue}: the bus is closed")
        self._exchange.publish(Message(bytes(body), string_properties(properties)))


class MemorySubscription:
    """Takes messages from one queue and runs up to ``concurrency`` handlers at once."""

    def __init__(self, queue: QueueId, source: _Queue, handler: Handler, concurrency: int,
                 on_close: Any) -> None:
        self.queue = queue
        self._source = source
        self._handler = handler
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._on_close = on_close
        self._pump = asyncio.create_task(self._run(), name=f"memory-consumer {queue}")

    async def _run(self) -> None:
        while True:
            await self._slots.acquire()
            try:
                message = await self._source.items.get()
            except asyncio.CancelledError:
                self._slots.release()
                raise
            task = asyncio.create_task(self._handle(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _handle(self, message: Message) -> None:
        try:
            if await run_handler(self._handler, message, self.queue) == "requeue":
                self._source.items.put_nowait(message)
        finally:
            self._slots.release()

    async def close(self) -> None:
        if self._pump.done():
            return
        self._pump.cancel()
        await asyncio.gather(self._pump, return_exceptions=True)
        self._on_close(self)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


class MemoryBus:
    """A connection to an in-process broker (see the module docstring)."""

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        name = url.removeprefix("memory://")
        self._broker = _brokers.setdefault(name, MemoryBroker())
        self._subscriptions: set[MemorySubscription] = set()
        self.closed = False

    async def producer(self, queue: str | QueueId) -> MemoryProducer:
        q = parse_queue_id(queue)
        self._check_open(q)
        return MemoryProducer(self, q, self._broker.exchange(q))

    async def subscribe(
        self,
        queue: str | QueueId,
        handler: Handler,
        *,
        subscription: str,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> MemorySubscription:
        q = parse_queue_id(queue)
        self._check_open(q)
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        exchange = self._broker.exchange(q)
        if q.shared:
            source = exchange.shared.get(subscription)
            if source is None:
                source = exchange.shared[subscription] = _Queue()
            detach = self._subscriptions.discard
        else:
            source = _Queue()
            exchange.exclusive.add(source)

            def detach(sub: MemorySubscription) -> None:
                exchange.exclusive.discard(source)
                self._subscriptions.discard(sub)

        sub = MemorySubscription(q, source, handler, concurrency, detach)
        self._subscriptions.add(sub)
        return sub

    def _check_open(self, queue: QueueId) -> None:
        if self.closed:
            raise BusError(f"cannot use {queue}: the bus is closed")

    async def close(self) -> None:
        self.closed = True
        for sub in list(self._subscriptions):
            await sub.close()


def new_memory_url() -> str:
    """A ``memory://`` URL naming a fresh, private in-process broker (handy in tests)."""
    return f"memory://{uuid.uuid4().hex}"
