"""RabbitMQ backend (aio-pika) with TrustGraph's topology, so both systems share one broker.

* each queue id ``class:topicspace:topic`` is a durable fanout exchange
  ``topicspace.class.topic`` (e.g. ``tg.request.joke``);
* ``request``/``flow`` consumers share the named queue ``<exchange>.<subscription>``
  (durable for ``flow``), so they compete for messages;
* each ``response``/``notify`` consumer binds its own exclusive auto-delete queue;
* the body is JSON, the properties (the ``id``) ride in the AMQP headers, ``flow`` messages
  are published persistent.

Recovery: the connection is aio-pika's robust connection, which reconnects and re-declares
exchanges, queues, bindings and consumers after the broker drops it. A publish that fails
because the connection is down waits for the reconnection (up to ``publish_timeout``) and is
retried, so producers recover too. Consumers prefetch ``concurrency`` messages and run their
handlers concurrently; acknowledgement follows :mod:`toolmesh.bus.base`.

What the log says: a connection that cannot be opened is one :class:`BusError` naming the
cause (:mod:`toolmesh.bus.rabbitmq_errors`); a lost one is one warning, the reason it stays
lost once per distinct reason, and one line when it is back. aio-pika's and aiormq's own
lines about the same events (every attempt, each with its traceback) are left out for
toolmesh's connections — the same news, in a library's words, once a second.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import (
    AbstractIncomingMessage,
    AbstractRobustChannel,
    AbstractRobustConnection,
    AbstractRobustExchange,
    AbstractRobustQueue,
)

from toolmesh.bus.base import (
    DEFAULT_CONCURRENCY,
    Handler,
    Message,
    encode,
    string_properties,
)
from toolmesh.bus.delivery import run_handler
from toolmesh.bus.lifecycle import BusLifecycle
from toolmesh.bus.queue_id import QueueId
from toolmesh.bus.rabbitmq_errors import connect_failure, loss_reason
from toolmesh.errors import BusError, NoConsumer
from toolmesh.telemetry import metrics
from toolmesh.urls import mask_url

log = logging.getLogger("toolmesh.bus.rabbitmq")

#: errors meaning "the connection or channel went away", worth a retry after reconnecting
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionError,
    aiormq.exceptions.AMQPConnectionError,
    aiormq.exceptions.ChannelInvalidStateError,
    aiormq.exceptions.ChannelClosed,
    RuntimeError,  # aio-pika: "Channel is closed" / "connection closed" while reconnecting
    asyncio.TimeoutError,
)


class ConnectionReport:
    """What one connection tells the log about losing the broker, each thing once.

    The library's records of the connection's attempts reach it through
    :class:`LibraryConnectionLines`; it tells them in toolmesh's words.
    """

    def __init__(self, url: str, *, reconnect_interval: float) -> None:
        self.url = url
        self.reconnect_interval = reconnect_interval
        #: whether the connection worked once (before, a failure is the connect's BusError)
        self.opened = False
        self.closing = False
        self._lost = False
        self._reason: str | None = None

    def lost(self, error: BaseException | None) -> None:
        if self.closing or self._lost:
            return
        self._lost = True
        log.warning("lost the connection to RabbitMQ at %s (%s); reconnecting every %g s",
                    mask_url(self.url), loss_reason(error), self.reconnect_interval)

    def attempt_failed(self, error: BaseException) -> None:
        if self.closing or not self.opened:
            return
        reason = connect_failure(self.url, error)
        if reason != self._reason:  # a new reason is news; the same one again is not
            self._reason = reason
            log.warning("still no connection to RabbitMQ at %s: %s; retrying every %g s",
                        mask_url(self.url), reason, self.reconnect_interval)

    def reconnected(self) -> None:
        self._lost, self._reason = False, None
        log.info("reconnected to RabbitMQ at %s", mask_url(self.url))


#: the report of the connection whose machinery runs in this context: aio-pika starts the
#: connection's tasks in the task that connects, so they inherit it
_report: contextvars.ContextVar[ConnectionReport | None] = contextvars.ContextVar(
    "toolmesh_rabbitmq_report", default=None)

#: aio-pika's and aiormq's records of connection attempts and losses (their format strings)
_ATTEMPT_FAILED = 'Connection attempt to "%s" failed'
_CHURN = ("error when creating transport", "Connection to %s closed. Reconnecting",
          _ATTEMPT_FAILED, "Unexpected connection close from remote",
          "Cancelling cause reader exited abnormally")
#: aio-pika's record of a callback that failed: a channel that tried to restore itself
#: while the connection was still down (the connection restores it once it is back)
_CALLBACK_FAILED = "Callback %r error"
_LIBRARY_LOGGERS = ("aiormq.connection", "aio_pika.robust_connection", "aio_pika.tools")


class LibraryConnectionLines(logging.Filter):
    """Leaves out aio-pika's and aiormq's lines about a toolmesh connection's attempts and
    losses (its :class:`ConnectionReport` says the same once); other records, and those of
    connections toolmesh did not open, pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        report = _report.get()
        if report is None or not isinstance(record.msg, str) or not _is_churn(record):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg.startswith(_ATTEMPT_FAILED) and len(args) > 1 \
                and isinstance(args[1], BaseException):
            report.attempt_failed(args[1])
        return False


def _is_churn(record: logging.LogRecord) -> bool:
    msg = str(record.msg)
    if msg.startswith(_CALLBACK_FAILED):
        args = record.args if isinstance(record.args, tuple) else ()
        return len(args) == 3 and "RobustChannel._on_close" in repr(args[0]) \
            and isinstance(args[2], _CONNECTION_ERRORS)
    return msg.startswith(_CHURN)


def _quiet_library_lines() -> None:
    for name in _LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, LibraryConnectionLines) for f in logger.filters):
            logger.addFilter(LibraryConnectionLines())


#: seconds a consumer's cancel may take (the connection can drop while it is under way)
CANCEL_TIMEOUT = 5.0


def exchange_name(queue: QueueId) -> str:
    """TrustGraph's exchange name for a queue id."""
    return f"{queue.topicspace}.{queue.cls}.{queue.topic}"


class RabbitMQProducer:
    """Publishes to one fanout exchange on the bus's shared publishing channel."""

    def __init__(self, bus: RabbitMQBus, queue: QueueId) -> None:
        self.queue = queue
        self._bus = bus
        self._mode = (aio_pika.DeliveryMode.PERSISTENT if queue.persistent
                      else aio_pika.DeliveryMode.NOT_PERSISTENT)

    async def send(self, value: Any, *, properties: Mapping[str, str] | None = None,
                   mandatory: bool = False) -> None:
        await self.send_bytes(encode(value), properties=properties, mandatory=mandatory)

    async def send_bytes(self, body: bytes, *, properties: Mapping[str, str] | None = None,
                         mandatory: bool = False) -> None:
        message = aio_pika.Message(
            bytes(body),
            headers=dict(string_properties(properties)) or None,
            content_type="application/json",
            delivery_mode=self._mode,
        )
        await self._bus.publish(self.queue, message, mandatory=mandatory)
        metrics.bus_message(self.queue, "published")


class RabbitMQSubscription:
    """One consumer on its own channel, with ``prefetch = concurrency``."""

    def __init__(self, queue: QueueId, channel: AbstractRobustChannel,
                 amqp_queue: AbstractRobustQueue, handler: Handler, *,
                 connected: asyncio.Event) -> None:
        self.queue = queue
        self._channel = channel
        self._connected = connected
        self._amqp_queue = amqp_queue
        self._handler = handler
        self._tag: str | None = None
        self._inflight: set[asyncio.Task[Any]] = set()
        self._closed = False

    async def start(self) -> None:
        self._tag = await self._amqp_queue.consume(self._on_message, no_ack=False)

    async def _on_message(self, incoming: AbstractIncomingMessage) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            message = Message(incoming.body, string_properties(incoming.headers))
            outcome = await run_handler(self._handler, message, self.queue,
                                        redelivered=bool(incoming.redelivered))
            try:
                if outcome == "ack":
                    await incoming.ack()
                elif outcome == "requeue":
                    await incoming.nack(requeue=True)
                else:
                    await incoming.reject(requeue=False)
            except _CONNECTION_ERRORS as e:
                # The broker redelivers unacknowledged messages once the channel is back.
                log.warning("could not settle a message from %s (%s); the broker will "
                            "redeliver it", self.queue, e)
        finally:
            if task is not None:
                self._inflight.discard(task)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            # With the connection down the broker has dropped the consumer already, and a
            # robust queue's cancel would wait for the connection to come back: a process
            # told to stop while its broker is away would never exit.
            if self._tag is not None and self._connected.is_set():
                await asyncio.wait_for(self._amqp_queue.cancel(self._tag), CANCEL_TIMEOUT)
        except _CONNECTION_ERRORS:
            pass
        if self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)
        try:
            await self._channel.close()
        except _CONNECTION_ERRORS:
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
        _quiet_library_lines()
        report = ConnectionReport(url, reconnect_interval=reconnect_interval)

        async def open_connection() -> tuple[AbstractRobustConnection, AbstractRobustChannel]:
            # In a task of its own, so the report is set for the connection's machinery (it
            # inherits this context) and not for the caller.
            _report.set(report)
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

    async def publish(self, queue: QueueId, message: aio_pika.Message, *,
                      mandatory: bool = False) -> None:
        """Publish, waiting out a reconnection if the connection is down.

        ``mandatory``: :class:`NoConsumer` when no queue is bound to the exchange (the broker
        returns the message). A bound queue keeps the message until a consumer comes, so that
        is not an error here.
        """
        self._check_open(queue)

        async def once() -> None:
            exchange = await self._exchange(queue)
            try:
                await exchange.publish(message, routing_key="", mandatory=mandatory)
            except aiormq.exceptions.PublishError as e:
                raise NoConsumer(f"nothing consumes {queue}: no queue is bound to exchange "
                                 f"{exchange_name(queue)!r} ({e})") from None

        await self._retrying(queue, once)

    async def _retrying(self, queue: QueueId, op: Any) -> Any:
        deadline = time.monotonic() + self._publish_timeout
        attempts = 0
        while True:
            try:
                return await op()
            except _CONNECTION_ERRORS as e:
                attempts += 1
                remaining = deadline - time.monotonic()
                if self.closed or remaining <= 0 or attempts >= 10:
                    raise BusError(f"cannot publish to {queue} on {mask_url(self.url)}: "
                                   f"{type(e).__name__}: {e}") from None
                log.info("publish to %s failed (%s); waiting for the connection", queue, e)
                try:
                    # `connected` is cleared when the connection drops and set again on
                    # reconnect; the channel then restores itself before it is ready.
                    await asyncio.wait_for(self._connection.connected.wait(), remaining)
                    await asyncio.wait_for(self._channel.ready(), max(remaining, 0.1))
                except TimeoutError:
                    continue
            except aiormq.exceptions.AMQPError as e:
                raise BusError(f"RabbitMQ refused to publish to {queue}: {e}") from None

    async def subscribe(
        self,
        queue: str | QueueId,
        handler: Handler,
        *,
        subscription: str,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> RabbitMQSubscription:
        q = self._subscribable(queue, concurrency)

        async def open_subscription() -> RabbitMQSubscription:
            # in the connection's context: the callbacks aio-pika registers for the channel
            # inherit it, so the log tells of its restoration as of the connection's
            _report.set(self._report)
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
            sub = RabbitMQSubscription(q, channel, amqp_queue, handler,
                                       connected=self._connection.connected)
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
        try:
            await self._connection.close()
        except _CONNECTION_ERRORS:
            pass
