"""The in-process bus: asyncio queues with the same semantics as the brokers.

A mandatory send (see :meth:`~toolmesh.bus.base.Producer.send`) fails with
:class:`~toolmesh.errors.NoConsumer` when no consumer is attached to any queue of the exchange.

``memory://NAME`` names an in-process broker; every :func:`connect` to the same name in one
process reaches the same broker (``memory://`` is the process's default one), so the parts of
``toolmesh serve`` connect by URL exactly as separate processes would to RabbitMQ. Bodies
travel encoded, as on a real broker, so no two parts ever share a mutable object.

A handler subscribed ``inline`` (see :meth:`~toolmesh.bus.base.Bus.subscribe`) is called
within the sender's ``send``: a response reaches the caller waiting for it with no task
and no turn of the event loop in between.
"""

from __future__ import annotations

import asyncio
import collections
import uuid
from collections.abc import Mapping
from typing import Any, cast

from toolmesh.bus.base import (
    DEFAULT_CONCURRENCY,
    Handler,
    InlineHandler,
    Message,
    encode,
    string_properties,
)
from toolmesh.bus.batch import Batches
from toolmesh.bus.delivery import checked_handler, run_handler, run_inline
from toolmesh.bus.lifecycle import BusLifecycle
from toolmesh.bus.queue_id import QueueId
from toolmesh.errors import BusError, NoConsumer
from toolmesh.telemetry import metrics


class _Queue:
    """One broker-side queue; consumers attached to it compete for its messages.

    Messages are handed straight to a consumer with a free slot (round robin) when published;
    only when every consumer is busy do they wait in the backlog. No pump task sits between
    the publisher and the handler, which saves two event-loop hops per message.
    """

    def __init__(self) -> None:
        self.backlog: collections.deque[Message] = collections.deque()
        #: the ids of backlog messages a handler handed back (each object is alive while
        #: its id is here): delivered again, they count as redelivered, as a broker marks them
        self.requeued: set[int] = set()
        self.consumers: list[MemorySubscription] = []
        self._next = 0

    def put(self, message: Message) -> None:
        consumers = self.consumers
        if len(consumers) == 1:  # the usual case: no round to take turns in
            consumer = consumers[0]
            if consumer.free:
                consumer.dispatch(message)
            else:
                self.backlog.append(message)
            return
        for i in range(len(consumers)):
            consumer = consumers[(self._next + i) % len(consumers)]
            if consumer.free:
                self._next = (self._next + i + 1) % len(consumers)
                consumer.dispatch(message)
                return
        self.backlog.append(message)

    def attach(self, consumer: MemorySubscription) -> None:
        self.consumers.append(consumer)
        self.drain_into(consumer)

    def drain_into(self, consumer: MemorySubscription) -> None:
        while self.backlog and consumer.free:
            consumer.dispatch(self.backlog.popleft())

    def detach(self, consumer: MemorySubscription) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)


class _Exchange:
    """The queues bound to one exchange: a message published to it goes to each of them,
    like a RabbitMQ fanout exchange (:meth:`MemoryProducer._publish` fans it out)."""

    def __init__(self) -> None:
        self.shared: dict[str, _Queue] = {}
        self.exclusive: set[_Queue] = set()

    @property
    def consumed(self) -> bool:
        """True when some queue of the exchange has a consumer attached."""
        # loops, not any() over generators: asked on every request sent
        for q in self.shared.values():
            if q.consumers:
                return True
        for q in self.exclusive:
            if q.consumers:
                return True
        return False


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
        self._counts = metrics.BusCounts(queue)
        self._bus = bus
        self._exchange = exchange

    async def send(self, value: Any, *, properties: Mapping[str, str] | None = None,
                   mandatory: bool = False) -> None:
        self._publish(encode(value), properties, mandatory)

    async def send_bytes(self, body: bytes, *, properties: Mapping[str, str] | None = None,
                         mandatory: bool = False) -> None:
        self._publish(bytes(body), properties, mandatory)

    def _publish(self, body: bytes, properties: Mapping[str, str] | None,
                 mandatory: bool) -> None:
        if self._bus.closed:
            raise BusError(f"cannot publish to {self.queue}: the bus is closed")
        exchange = self._exchange
        if mandatory and not exchange.consumed:
            # in one process the bus sees every consumer: nobody reads this queue now
            raise NoConsumer(f"nothing consumes {self.queue}")
        # counted before it is handed over: an inline handler is consumed within publish()
        self._counts.published()
        message = Message(body, string_properties(properties))
        # fanned out to every bound queue, here rather than in a method of the exchange: one
        # call less per message, and nearly always one queue
        for q in exchange.shared.values():
            q.put(message)
        if exchange.exclusive:
            for q in exchange.exclusive:
                q.put(message)


class MemorySubscription:
    """Runs up to ``concurrency`` handlers at once on messages from one queue (an inline
    handler: each message at once, within the sender's ``send``)."""

    def __init__(self, queue: QueueId, source: _Queue, handler: Handler | InlineHandler,
                 concurrency: int, on_close: Any, *, inline: bool = False) -> None:
        self.queue = queue
        self._counts = metrics.BusCounts(queue)
        self._source = source
        self._handler = handler
        self._inline = inline
        self._free = concurrency
        self._batches = Batches(self._handle)
        self._on_close = on_close
        self._closed = False
        source.attach(self)

    @property
    def free(self) -> bool:
        # an inline handler is never in flight: it always has room
        return (self._inline or self._free > 0) and not self._closed

    def dispatch(self, message: Message) -> None:
        if self._inline:
            self._handle_inline(message)
            return
        self._free -= 1
        self._batches.add(message)

    def _redelivered(self, message: Message) -> bool:
        requeued = self._source.requeued
        if not requeued:
            return False
        redelivered = id(message) in requeued
        requeued.discard(id(message))
        return redelivered

    def _handle_inline(self, message: Message) -> None:
        if run_inline(cast(InlineHandler, self._handler), message, self._counts,
                      redelivered=self._redelivered(message)) == "requeue":
            self._source.requeued.add(id(message))
            # back to the queue on the next turn of the loop, not now: the handler would get
            # it again within this same send, and again, without end
            asyncio.get_running_loop().call_soon(self._source.put, message)

    async def _handle(self, message: Message) -> None:
        redelivered = self._redelivered(message)
        try:
            if await run_handler(cast(Handler, self._handler), message, self._counts,
                                 redelivered=redelivered) == "requeue":
                self._source.requeued.add(id(message))
                self._source.backlog.append(message)
        finally:
            self._free += 1
            if self._source.backlog:
                # closing: what waits goes to the other consumers of the queue (or stays)
                for consumer in [self] if not self._closed else self._source.consumers:
                    self._source.drain_into(consumer)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._source.detach(self)
        self._on_close(self)
        await self._batches.wait()


class MemoryBus(BusLifecycle["MemorySubscription"]):
    """A connection to an in-process broker (see the module docstring)."""

    def __init__(self, url: str = "memory://") -> None:
        super().__init__()
        self.url = url
        name = url.removeprefix("memory://")
        self._broker = _brokers.setdefault(name, MemoryBroker())

    async def producer(self, queue: str | QueueId) -> MemoryProducer:
        q = self._open_queue(queue)
        return MemoryProducer(self, q, self._broker.exchange(q))

    async def subscribe(
        self,
        queue: str | QueueId,
        handler: Handler | InlineHandler,
        *,
        subscription: str,
        concurrency: int = DEFAULT_CONCURRENCY,
        inline: bool = False,
    ) -> MemorySubscription:
        q = self._subscribable(queue, concurrency)
        checked_handler(handler, inline=inline)
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

        sub = MemorySubscription(q, source, handler, concurrency, detach, inline=inline)
        self._subscriptions.add(sub)
        return sub

    async def close(self) -> None:
        await self._begin_close()


def new_memory_url() -> str:
    """A ``memory://`` URL naming a fresh, private in-process broker (handy in tests)."""
    return f"memory://{uuid.uuid4().hex}"
