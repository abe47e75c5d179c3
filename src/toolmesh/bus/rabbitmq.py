"""RabbitMQ backend (aio-pika) with TrustGraph's topology, so both systems share one broker.

* each queue id ``class:topicspace:topic`` is a durable fanout exchange
  ``topicspace.class.topic`` (e.g. ``tg.request.joke``);
* ``request``/``flow`` consumers share the named queue ``<exchange>.<subscription>``
  (durable for ``flow``), so they compete for messages;
* each ``response``/``notify`` consumer binds its own exclusive auto-delete queue;
* the body is JSON, the properties (the ``id``) ride in the AMQP headers, ``flow`` messages
  are published persistent.

Recovery: the connection is aio-pika's robust connection, which reconnects and re-declares
exchanges, queues and bindings after the broker drops it; each subscription then consumes
again. A publish that fails because the connection is down waits for the reconnection (up to
``publish_timeout``) and is retried, so producers recover too. Consumers prefetch
``concurrency`` messages and run their handlers concurrently; acknowledgement follows
:mod:`toolmesh.bus.base`. A message of a shared queue that the broker delivers again (its
consumer lost it) is counted: it goes back to its queue carrying how many times it was
delivered, so a service can refuse one delivered too often (:meth:`RabbitMQSubscription._count`,
:func:`toolmesh.bus.delivery.deliveries`).

The hot path (a message out, a message in) skips aio-pika's message objects and aiormq's
per-frame machinery: the bus marshals its publishes (with publisher confirms, ``mandatory``
ones answered by the broker's return) and its acknowledgements itself, and writes all that
one turn of the event loop produced in one write (:mod:`toolmesh.bus.rabbitmq_publish`;
frames: :mod:`toolmesh.bus.rabbitmq_frames`); its consumers are
aiormq's, without aio-pika's wrapper around each delivery. ``bench/rabbitmq_rpc.py`` has the
figures beside a plain aio-pika RPC.

What the log says: a connection that cannot be opened is one :class:`BusError` naming the
cause (:mod:`toolmesh.bus.rabbitmq_errors`); a lost one is one warning, the reason it stays
lost once per distinct reason, and one line when it is back. aio-pika's and aiormq's own
lines about the same events (every attempt, each with its traceback) are left out for
toolmesh's connections — the same news, in a library's words, once a second.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any, cast

import aio_pika
import aiormq
from aio_pika.abc import (
    AbstractRobustChannel,
    AbstractRobustConnection,
    AbstractRobustExchange,
    AbstractRobustQueue,
)
from aiormq.abc import DeliveredMessage
from pamqp import commands as spec

from toolmesh.bus.base import (
    DEFAULT_CONCURRENCY,
    Handler,
    InlineHandler,
    Message,
    encode,
    string_properties,
)
from toolmesh.bus.delivery import Outcome, checked_handler, run_handler, run_inline
from toolmesh.bus.lifecycle import BusLifecycle
from toolmesh.bus.queue_id import QueueId
from toolmesh.bus.rabbitmq_errors import (
    CONNECTION_ERRORS,
    CONNECTION_OR_AMQP_ERRORS,
    connect_failure,
)
from toolmesh.bus.rabbitmq_frames import ACK, REJECT, settle_frame
from toolmesh.bus.rabbitmq_log import (
    ConnectionReport,
    current_report,
    quiet_library_lines,
)
from toolmesh.bus.rabbitmq_publish import Outbox, Publisher
from toolmesh.errors import BusError, NoConsumer
from toolmesh.telemetry import metrics
from toolmesh.urls import mask_url

log = logging.getLogger("toolmesh.bus.rabbitmq")




#: seconds a consumer's cancel may take (the connection can drop while it is under way)
CANCEL_TIMEOUT = 5.0
#: the header of a message delivered again that says how many times, this one included
#: (:meth:`RabbitMQSubscription._count`)
DELIVERIES_HEADER = "x-toolmesh-deliveries"


def _deliveries(header: str | None) -> int:
    """The deliveries a message's :data:`DELIVERIES_HEADER` counts (1: none counted yet)."""
    try:
        return max(int(header), 1) if header is not None else 1
    except ValueError:
        return 1


def exchange_name(queue: QueueId) -> str:
    """TrustGraph's exchange name for a queue id."""
    return f"{queue.topicspace}.{queue.cls}.{queue.topic}"


class RabbitMQProducer:
    """Publishes to one fanout exchange on the bus's shared publishing channel."""

    def __init__(self, bus: RabbitMQBus, queue: QueueId) -> None:
        self.queue = queue
        self._counts = metrics.BusCounts(queue)
        self._bus = bus
        self._exchange = exchange_name(queue)
        self._mode = 2 if queue.persistent else 1  # AMQP delivery modes

    async def send(self, value: Any, *, properties: Mapping[str, str] | None = None,
                   mandatory: bool = False) -> None:
        await self._send(encode(value), properties, mandatory)

    async def send_bytes(self, body: bytes, *, properties: Mapping[str, str] | None = None,
                         mandatory: bool = False) -> None:
        await self._send(bytes(body), properties, mandatory)

    async def _send(self, body: bytes, properties: Mapping[str, str] | None,
                    mandatory: bool) -> None:
        await self._bus.publish(self.queue, self._exchange, body,
                                string_properties(properties), self._mode, mandatory=mandatory)
        self._counts.published()


class RabbitMQSubscription:
    """One consumer on its own channel, with ``prefetch = concurrency``.

    The consumer is aiormq's (each delivery on a task aiormq starts for it), registered
    again whenever the robust channel is reopened after a loss; acknowledgements go out
    through the bus's :class:`Outbox`.
    """

    def __init__(self, bus: RabbitMQBus, queue: QueueId, channel: AbstractRobustChannel,
                 amqp_queue: AbstractRobustQueue, handler: Handler | InlineHandler, *,
                 inline: bool) -> None:
        self.queue = queue
        self._counts = metrics.BusCounts(queue)
        self._bus = bus
        self._channel = channel
        self._amqp_queue = amqp_queue
        self._handler = handler
        self._inline = inline
        self._underlay: aiormq.Channel | None = None
        self._tag: str | None = None
        #: handlers running now, and the future close() waits on until none is
        self._running = 0
        self._idle: asyncio.Future[None] | None = None
        self._closed = False
        self._recovery: asyncio.Task[None] | None = None
        #: the handlers running on tasks of their own (see _on_delivery)
        self._handling: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._channel.reopen_callbacks.add(self._on_reopen)
        await self._consume()

    async def _consume(self) -> None:
        channel = cast(aiormq.Channel, await self._channel.get_underlay_channel())
        cancel_callbacks = getattr(channel, "on_consumer_cancel_callbacks", None)
        if cancel_callbacks is not None:  # aiormq 7: the broker cancelled the consumer
            cancel_callbacks.add(self._on_cancelled)
        ok = await channel.basic_consume(self._amqp_queue.name, self._on_delivery, no_ack=False)
        self._underlay, self._tag = channel, ok.consumer_tag

    async def _on_reopen(self, _channel: Any) -> None:
        """The robust channel is back (queue declared and bound again): consume again."""
        if self._closed:
            return
        try:
            await self._consume()
        except CONNECTION_OR_AMQP_ERRORS as e:
            # lost again already: the next reopening tries again
            log.debug("could not consume %s again after reopening: %r", self.queue, e)

    def _on_cancelled(self, frame: Any) -> None:
        """The broker cancelled the consumer (its queue was deleted): declare the queue and
        its binding again and consume it, as aio-pika does for its own consumers."""
        if self._closed or getattr(frame, "consumer_tag", None) != self._tag \
                or self._recovery is not None:
            return
        log.warning("RabbitMQ cancelled the consumer of %s (was its queue deleted?); "
                    "declaring it again", self.queue)
        self._recovery = asyncio.get_running_loop().create_task(self._recover())

    async def _recover(self) -> None:
        try:
            await self._amqp_queue.restore()
            if not self._closed:
                await self._consume()
        except CONNECTION_OR_AMQP_ERRORS as e:
            log.warning("could not consume %s again: %s", self.queue, e)
        finally:
            self._recovery = None

    async def _on_delivery(self, delivered: DeliveredMessage) -> None:
        if self._closed:
            # arrived as the subscription closes: left unacknowledged, so the broker hands
            # it to another consumer once this channel is closed
            return
        delivery = cast(spec.Basic.Deliver, delivered.delivery)
        properties = string_properties(delivered.header.properties.headers)
        deliveries = _deliveries(properties.pop(DELIVERIES_HEADER, None))
        if delivery.redelivered:
            deliveries += 1
        message = Message(delivered.body, properties)
        if self._inline and not (delivery.redelivered and self.queue.shared):
            self._settle(delivered, run_inline(cast(InlineHandler, self._handler), message,
                                               self._counts, deliveries=deliveries))
            return
        # On a task of its own, not aiormq's: aiormq cancels the tasks of a channel that
        # closes, and a handler cut short by a lost connection leaves its work half done —
        # a tool's side effect among it — while the broker hands the message over again.
        # Run to its end, it answers (once the connection is back) and a repeat can find
        # its result (the tool-service SDK's dedupe, the agent's journal).
        self._running += 1
        task = asyncio.get_running_loop().create_task(
            self._handle(delivered, message, deliveries))
        self._handling.add(task)
        task.add_done_callback(self._handling.discard)

    async def _handle(self, delivered: DeliveredMessage, message: Message,
                      deliveries: int) -> None:
        try:
            if cast(spec.Basic.Deliver, delivered.delivery).redelivered and self.queue.shared:
                outcome = await self._count(delivered, message, deliveries)
            else:
                outcome = await run_handler(cast(Handler, self._handler), message,
                                            self._counts, deliveries=deliveries)
        finally:
            self._running -= 1
            if not self._running and self._idle is not None and not self._idle.done():
                self._idle.set_result(None)
        self._settle(delivered, outcome)

    def _settle(self, delivered: DeliveredMessage, outcome: Outcome) -> None:
        channel = cast(aiormq.Channel, delivered.channel)
        if channel.is_closed:
            # The broker redelivers unacknowledged messages once the channel is back.
            log.warning("could not settle a message from %s (the channel closed); the broker "
                        "will redeliver it", self.queue)
            return
        tag = cast(int, cast(spec.Basic.Deliver, delivered.delivery).delivery_tag)
        if outcome == "ack":
            frame = settle_frame(channel.number, ACK, tag, 0)
        else:  # requeue, or drop
            frame = settle_frame(channel.number, REJECT, tag, outcome == "requeue")
        self._bus.outbox.write(channel, frame)

    async def _count(self, delivered: DeliveredMessage, message: Message,
                     deliveries: int) -> Outcome:
        """A message the broker delivers again: its count goes with it, before it is handled.

        A classic queue says only that a message was delivered before, not how often, so a
        consumer that keeps losing it (a connection that keeps dropping, a process killed on
        it each time) would get it for ever. The count travels in a copy instead: the copy
        goes to the back of the same queue with :data:`DELIVERIES_HEADER`, and the original is
        acknowledged once the broker confirmed the copy. A copy that cannot be published
        leaves the count uncounted: the message is handled now, counted as far as known."""
        headers = {**message.properties, DELIVERIES_HEADER: str(deliveries)}
        mode = delivered.header.properties.delivery_mode or (2 if self.queue.persistent else 1)
        try:
            await self._bus.publish(self.queue, "", delivered.body, headers, mode,
                                    routing_key=self._amqp_queue.name)
        except BusError as e:
            log.warning("could not count a message from %s delivered again (%s); handling "
                        "it now", self.queue, e.message)
            if self._inline:
                return run_inline(cast(InlineHandler, self._handler), message, self._counts,
                                  deliveries=deliveries)
            return await run_handler(cast(Handler, self._handler), message, self._counts,
                                     deliveries=deliveries)
        return "ack"

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._channel.reopen_callbacks.discard(self._on_reopen)
        if self._recovery is not None:
            self._recovery.cancel()
        try:
            # With the connection down the broker has dropped the consumer already, and a
            # cancel would wait for the connection to come back: a process told to stop
            # while its broker is away would never exit.
            channel = self._underlay
            if self._tag is not None and channel is not None and not channel.is_closed \
                    and self._bus.connected.is_set():
                await asyncio.wait_for(channel.basic_cancel(self._tag), CANCEL_TIMEOUT)
        except CONNECTION_OR_AMQP_ERRORS:
            pass
        if self._running:
            self._idle = asyncio.get_running_loop().create_future()
            await self._idle
        self._bus.outbox.flush()  # the last acknowledgements go before the channel's close
        try:
            await self._channel.close()
        except CONNECTION_ERRORS:
            pass


class RabbitMQBus(BusLifecycle[RabbitMQSubscription]):
    """A robust connection to RabbitMQ (see the module docstring)."""

    def __init__(self, url: str, connection: AbstractRobustConnection,
                 channel: AbstractRobustChannel, *, publish_timeout: float,
                 report: ConnectionReport | None = None) -> None:
        self.url = url
        self._connection = connection
        self._channel = channel
        self._publish_timeout = publish_timeout
        self._report = report or ConnectionReport(url, reconnect_interval=1.0)
        self._exchanges: dict[QueueId, AbstractRobustExchange] = {}
        self._exchange_lock = asyncio.Lock()
        self.outbox = Outbox()
        self._publisher = Publisher(channel, self.outbox)
        super().__init__()

    @classmethod
    async def connect(cls, url: str, *, reconnect_interval: float = 1.0,
                      publish_timeout: float = 30.0, connect_timeout: float = 30.0,
                      name: str | None = None) -> RabbitMQBus:
        """Open the connection and the shared publishing channel; a :class:`BusError` that
        names the cause (and what to check) when the broker cannot be reached or refuses.

        ``connect_timeout``: seconds each attempt (the first, and every reconnection) may
        take — a host that drops packets, or a server that is not RabbitMQ, would otherwise
        keep the process waiting without a word.
        """
        quiet_library_lines()
        report = ConnectionReport(url, reconnect_interval=reconnect_interval)

        async def open_connection() -> tuple[AbstractRobustConnection, AbstractRobustChannel]:
            # In a task of its own, so the report is set for the connection's machinery (it
            # inherits this context) and not for the caller.
            current_report.set(report)
            connection = await aio_pika.connect_robust(
                url,
                reconnect_interval=reconnect_interval,
                timeout=connect_timeout,
                client_properties={"connection_name": name or f"toolmesh-{uuid.uuid4().hex[:8]}"},
            )
            try:
                # on_return_raises: a mandatory publish nobody's queue takes fails at once
                channel = await connection.channel(publisher_confirms=True,
                                                   on_return_raises=True)
            except BaseException:
                await connection.close()
                raise
            return connection, channel

        try:
            connection, channel = await asyncio.create_task(open_connection())
        except (TimeoutError, OSError, aiormq.exceptions.AMQPError) as e:
            raise BusError(f"cannot connect to RabbitMQ at {mask_url(url)}: "
                           f"{connect_failure(url, e)}") from None
        report.opened = True
        bus = cls(url, connection, channel, publish_timeout=publish_timeout, report=report)
        connection.close_callbacks.add(bus._on_connection_lost)
        connection.reconnect_callbacks.add(bus._on_reconnected)
        return bus

    def _on_connection_lost(self, _sender: Any, error: BaseException | None = None) -> None:
        if not self.closed:
            self._report.lost(error)

    def _on_reconnected(self, _sender: Any) -> None:
        # Called once the channels, queues and consumers are restored; operators (and the
        # cross-process tests) learn from the log that traffic flows again.
        self._report.reconnected()

    @property
    def connected(self) -> asyncio.Event:
        """Set while the connection is up."""
        return self._connection.connected

    @property
    def connection_name(self) -> str:
        """The name the broker shows for this connection (``rabbitmqctl list_connections``)."""
        props = self._connection.kwargs.get("client_properties") or {}
        return str(props.get("connection_name", ""))

    async def _declare(self, channel: AbstractRobustChannel, queue: QueueId) -> AbstractRobustExchange:
        return await channel.declare_exchange(
            exchange_name(queue), aio_pika.ExchangeType.FANOUT, durable=True)

    async def _exchange(self, queue: QueueId) -> AbstractRobustExchange:
        ex = self._exchanges.get(queue)
        if ex is None:
            async with self._exchange_lock:
                ex = self._exchanges.get(queue)
                if ex is None:
                    ex = self._exchanges[queue] = await self._declare(self._channel, queue)
        return ex

    async def producer(self, queue: str | QueueId) -> RabbitMQProducer:
        q = self._open_queue(queue)
        await self._retrying(q, lambda: self._exchange(q))
        return RabbitMQProducer(self, q)

    async def publish(self, queue: QueueId, exchange: str, body: bytes,
                      headers: Mapping[str, str] | None, delivery_mode: int, *,
                      mandatory: bool = False, routing_key: str = "") -> None:
        """Publish to ``exchange`` (declared by :meth:`producer`) and wait for the broker's
        confirmation, waiting out a reconnection if the connection is down.

        ``mandatory``: :class:`NoConsumer` when no queue is bound to the exchange (the broker
        returns the message). A bound queue keeps the message until a consumer comes, so that
        is not an error here. ``routing_key``: the queue a publish to the default exchange
        (``""``) goes to.
        """
        self._check_open(queue)
        publisher = self._publisher
        try:
            try:
                await publisher.publish(exchange, body, headers, delivery_mode, mandatory,
                                        routing_key)
            except CONNECTION_ERRORS as e:
                await self._retrying(queue, lambda: publisher.publish(
                    exchange, body, headers, delivery_mode, mandatory, routing_key), failed=e)
        except aiormq.exceptions.PublishError as e:
            raise NoConsumer(f"nothing consumes {queue}: no queue is bound to exchange "
                             f"{exchange!r} ({e})") from None
        except aiormq.exceptions.AMQPError as e:
            raise BusError(f"RabbitMQ refused to publish to {queue}: {e}") from None

    async def _retrying(self, queue: QueueId, op: Any, *,
                        failed: BaseException | None = None) -> Any:
        """``op()``, tried again once the connection is back each time it fails for want of
        one, for up to ``publish_timeout`` seconds and ten attempts. ``failed``: the caller's
        own first attempt failed so (this waits for the connection before trying)."""
        deadline = time.monotonic() + self._publish_timeout
        attempts = 0
        error = failed
        while True:
            if error is not None:
                attempts += 1
                remaining = deadline - time.monotonic()
                if self.closed or remaining <= 0 or attempts >= 10:
                    raise BusError(f"cannot publish to {queue} on {mask_url(self.url)}: "
                                   f"{type(error).__name__}: {error}") from None
                log.info("publish to %s failed (%s); waiting for the connection", queue, error)
                try:
                    # `connected` is cleared when the connection drops and set again on
                    # reconnect; the channel then restores itself before it is ready.
                    await asyncio.wait_for(self._connection.connected.wait(), remaining)
                    await asyncio.wait_for(self._channel.ready(), max(remaining, 0.1))
                except TimeoutError:
                    pass
            try:
                return await op()
            except CONNECTION_ERRORS as e:
                error = e
            except aiormq.exceptions.PublishError:
                raise
            except aiormq.exceptions.AMQPError as e:
                raise BusError(f"RabbitMQ refused to publish to {queue}: {e}") from None

    async def subscribe(
        self,
        queue: str | QueueId,
        handler: Handler | InlineHandler,
        *,
        subscription: str,
        concurrency: int = DEFAULT_CONCURRENCY,
        inline: bool = False,
    ) -> RabbitMQSubscription:
        q = self._subscribable(queue, concurrency)
        checked_handler(handler, inline=inline)

        async def open_subscription() -> RabbitMQSubscription:
            # in the connection's context: the callbacks aio-pika registers for the channel
            # inherit it, so the log tells of its restoration as of the connection's
            current_report.set(self._report)
            channel = await self._connection.channel(publisher_confirms=False)
            await channel.set_qos(prefetch_count=concurrency)
            exchange = await self._declare(channel, q)
            name = exchange_name(q)
            if q.shared:
                amqp_queue = await channel.declare_queue(
                    f"{name}.{subscription}", durable=q.persistent,
                    exclusive=False, auto_delete=False)
            else:
                amqp_queue = await channel.declare_queue(
                    f"{name}.{subscription}.{uuid.uuid4().hex[:12]}", durable=False,
                    exclusive=True, auto_delete=True)
            await amqp_queue.bind(exchange, routing_key="")
            sub = RabbitMQSubscription(self, q, channel, amqp_queue, handler, inline=inline)
            await sub.start()
            return sub

        try:
            sub = await asyncio.create_task(open_subscription())
        except (OSError, aiormq.exceptions.AMQPError, RuntimeError) as e:
            raise BusError(f"cannot subscribe to {q} on {mask_url(self.url)}: {e}") from None
        self._subscriptions.add(sub)
        return sub

    async def close(self) -> None:
        if not await self._begin_close():
            return
        self._report.closing = True
        self.outbox.close()
        try:
            await self._connection.close()
        except CONNECTION_ERRORS:
            pass
