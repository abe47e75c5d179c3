"""Apache Pulsar backend (pulsar-client's asyncio API), with Pulsar's own naming.

* a queue id is its Pulsar topic: ``request:tg:joke`` is ``non-persistent://tg/request/joke``
  (and ``non-persistent://tg/request/joke`` is itself); ``flow`` topics are ``persistent://``;
* ``request``/``flow`` consumers subscribe with a **Shared** subscription named by
  ``subscription``, so replicas compete for messages; other subscription names get copies;
* each ``response``/``notify`` consumer has its own **Exclusive** subscription (a unique
  name), so every consumer gets every message;
* the body is the JSON bytes, the properties (the ``id``) are Pulsar message properties.

What Pulsar itself decides, and toolmesh does not hide: a *non-persistent* topic keeps no
message for a subscription that has no connected consumer, and drops messages a consumer has
no room for (its receiver queue, 1000 messages by default; ``?receiver_queue_size=N`` in the
URL). Request/response traffic is non-persistent in TrustGraph's naming, so a request sent
while no replica is connected (or to a replica that dies holding it) is lost — the caller's
deadline turns that into a timeout. ``flow`` topics are persistent and behave like RabbitMQ's
durable queues.

Acknowledgement follows :mod:`toolmesh.bus.base`. :class:`~toolmesh.bus.base.Requeue` on a
persistent topic is a negative acknowledgement (the broker redelivers, possibly to another
replica); a non-persistent topic cannot redeliver, so the same consumer runs the handler again
after :data:`REDELIVERY_DELAY`.

Recovery: the client reconnects its producers and consumers by itself after the broker drops
(exponential backoff from 100 ms); a send made while the broker is away waits in the
producer's queue until it is back, up to ``publish_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, NoReturn
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from toolmesh.bus.base import (
    DEFAULT_CONCURRENCY,
    Handler,
    InlineHandler,
    Message,
    encode,
    string_properties,
)
from toolmesh.bus.delivery import as_handler, run_handler
from toolmesh.bus.lifecycle import BusLifecycle
from toolmesh.bus.queue_id import QueueId
from toolmesh.errors import BusError
from toolmesh.telemetry import metrics
from toolmesh.urls import mask_url

try:
    import pulsar
    from pulsar.asyncio import Client, Consumer, Producer, PulsarException
except ImportError:  # pragma: no cover - depends on the installed extras
    pulsar = None

log = logging.getLogger("toolmesh.bus.pulsar")


#: whether this process has opened a Pulsar client (see :func:`exit_process`)
opened_clients = 0

#: seconds a close waits for the client's answer before it gives up on it
CLOSE_TIMEOUT = 5.0

#: seconds before a requeued message is handed to a handler again
REDELIVERY_DELAY = 0.1

#: how many messages a consumer of a non-persistent topic may hold: the broker drops what
#: does not fit, so this is the burst a service absorbs without loss
DEFAULT_RECEIVER_QUEUE = 10_000

#: non-persistent sends one connection has unacknowledged at once; a Pulsar broker drops
#: non-persistent messages beyond its ``maxConcurrentNonPersistentMessagePerConnection``
#: (1000 by default, pulsar-lite the same) without telling the producer
MAX_NON_PERSISTENT_IN_FLIGHT = 500


def _client_logger() -> Any:
    """Where the C++ client logs: stderr, warnings and errors only.

    Not a Python logger: the client calls it from its own threads, and at interpreter exit
    that aborts the process ("terminate called without an active exception", still so with
    pulsar-client 3.13); its console logger writes to stdout, which is the CLI's output. So
    these lines cannot be filtered: :func:`_unreachable` keeps the commonest start-up
    failures from reaching the client at all.
    """
    if os.path.exists("/dev/stderr"):
        return pulsar.FileLogger(pulsar.LoggerLevel.Warn, "/dev/stderr")
    return pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)


async def _unreachable(service_url: str, timeout: float) -> str | None:
    """Why no broker can answer at ``service_url`` (nothing listens, the host name does not
    resolve, no answer), found with a plain TCP connection; None when something listens.

    Asked before the client is made: given an address where nothing listens, pulsar-client
    retries until its timeout and prints every attempt to stderr from C++, and its own
    error then says only "no answer" or ``ConnectError``.
    """
    parts = urlsplit(service_url)
    if "," in parts.netloc:
        return None  # several brokers: the client tries each
    try:
        port = parts.port or (6651 if parts.scheme == "pulsar+ssl" else 6650)
    except ValueError:
        return None  # the client says what is wrong with the URL
    host = parts.hostname or "localhost"
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except socket.gaierror:
        return f"cannot resolve the host name {host!r} (check the host in the bus URL)"
    except ConnectionRefusedError:
        return f"nothing is listening at {host}:{port} (is Pulsar running?)"
    except TimeoutError:
        return f"no answer from {host}:{port} within {timeout:g} s (is the host reachable?)"
    except OSError as e:
        return f"cannot reach {host}:{port}: {e.strerror or e}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


def _pulsar_error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


class PulsarProducer:
    """Publishes to one topic through the bus's producer for it."""

    def __init__(self, bus: PulsarBus, queue: QueueId) -> None:
        self.queue = queue
        self._counts = metrics.BusCounts(queue)
        self._bus = bus

    async def send(self, value: Any, *, properties: Mapping[str, str] | None = None,
                   mandatory: bool = False) -> None:
        await self.send_bytes(encode(value), properties=properties, mandatory=mandatory)

    async def send_bytes(self, body: bytes, *, properties: Mapping[str, str] | None = None,
                         mandatory: bool = False) -> None:
        # ``mandatory`` is accepted and ignored: a Pulsar producer cannot tell whether any
        # subscription will read the topic (that needs the admin API), so callers wait out
        # their deadline instead.
        await self._bus.publish(self.queue, bytes(body), string_properties(properties))
        self._counts.published()


class PulsarSubscription:
    """One consumer: a receive loop that runs up to ``concurrency`` handlers at once."""

    def __init__(self, queue: QueueId, consumer: Consumer, handler: Handler,
                 concurrency: int) -> None:
        self.queue = queue
        self._counts = metrics.BusCounts(queue)
        self._consumer = consumer
        self._handler = handler
        self._slots = asyncio.Semaphore(concurrency)
        self._inflight: set[asyncio.Task[None]] = set()
        self._closing = False
        self._loop = asyncio.create_task(self._receive_loop(), name=f"pulsar-consume {queue}")

    async def _receive_loop(self) -> None:
        # A persistent topic waits for a free handler before taking the next message, so the
        # broker holds the backlog (and can give it to another replica). A non-persistent topic
        # would *drop* what does not fit in the receiver queue, so its messages are taken as
        # fast as they come and wait here for a handler instead.
        gate = self.queue.persistent
        while True:
            if gate:
                await self._slots.acquire()
            try:
                # Never cancelled: a cancelled receive loses the message it was about to get.
                received = await self._consumer.receive()
            except PulsarException as e:
                if gate:
                    self._slots.release()
                if self._closing:
                    return
                log.warning("receiving from %s failed (%s); retrying", self.queue, e)
                await asyncio.sleep(REDELIVERY_DELAY)
                continue
            if self._closing and gate:
                # Not acknowledged: the broker hands it to another consumer once we close.
                self._slots.release()
                continue
            task = asyncio.create_task(self._deliver(received, holds_slot=gate))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)

    async def _deliver(self, received: pulsar.Message, *, holds_slot: bool) -> None:
        if not holds_slot:
            await self._slots.acquire()
        try:
            message = Message(received.data(), string_properties(received.properties()))
            deliveries = received.redelivery_count() + 1
            while True:
                outcome = await run_handler(self._handler, message, self._counts,
                                            deliveries=deliveries)
                deliveries += 1  # a non-persistent topic's own retry is a redelivery too
                if outcome != "requeue":
                    break
                if self.queue.persistent:
                    await self._consumer.negative_acknowledge(received)
                    return
                await asyncio.sleep(REDELIVERY_DELAY)
            try:
                await self._consumer.acknowledge(received)
            except PulsarException as e:
                # Persistent topics redeliver unacknowledged messages after a reconnection.
                log.warning("could not acknowledge a message from %s (%s)", self.queue, e)
        finally:
            self._slots.release()

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        while self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)
        try:
            await asyncio.wait_for(self._consumer.close(), CLOSE_TIMEOUT)
        except (PulsarException, TimeoutError):
            pass
        # Closing the consumer fails its pending receive, which ends the loop; should the
        # client never call back (a broker gone for good), cancelling loses nothing now.
        await asyncio.wait([self._loop], timeout=CLOSE_TIMEOUT)
        self._loop.cancel()
        await asyncio.gather(self._loop, return_exceptions=True)


class PulsarBus(BusLifecycle[PulsarSubscription]):
    """A pulsar-client connection (see the module docstring)."""

    def __init__(self, url: str, client: Client, *, publish_timeout: float,
                 options: UrlOptions) -> None:
        self.url = url
        self._client = client
        self._publish_timeout = publish_timeout
        self._receiver_queue_size = options.receiver_queue_size
        self._producers: dict[QueueId, asyncio.Future[Producer]] = {}
        self._non_persistent_slots = asyncio.Semaphore(MAX_NON_PERSISTENT_IN_FLIGHT)
        super().__init__()

    @classmethod
    async def connect(cls, url: str, *, publish_timeout: float = 30.0,
                      connect_timeout: float = 10.0, name: str | None = None) -> PulsarBus:
        """Open a client for ``pulsar://host:6650`` (``pulsar+ssl://`` too) and check that the
        broker answers. Query options: ``receiver_queue_size=N`` (each consumer's receiver
        queue) and ``consumer_id_offset=N`` (see :meth:`_skip_consumer_ids`)."""
        if pulsar is None:
            raise BusError("the Pulsar backend needs pulsar-client: pip install 'toolmesh[pulsar]'")
        service_url, options = _split_url(url)
        reason = await _unreachable(service_url, connect_timeout)
        if reason is not None:
            raise BusError(f"cannot connect to Pulsar at {mask_url(url)}: {reason}")
        try:
            client = Client(service_url, logger=_client_logger(),
                            operation_timeout_seconds=max(1, int(publish_timeout)),
                            connection_timeout_ms=int(connect_timeout * 1000))
        except (ValueError, PulsarException) as e:
            raise BusError(f"invalid Pulsar URL {mask_url(url)}: {_pulsar_error(e)}") from None
        global opened_clients
        opened_clients += 1
        bus = cls(url, client, publish_timeout=publish_timeout, options=options)
        try:
            # A lookup is the cheapest request that proves a broker answers.
            await asyncio.wait_for(
                client.get_topic_partitions(f"non-persistent://tg/request/{name or 'toolmesh'}"),
                connect_timeout)
        except (TimeoutError, PulsarException) as e:
            await bus.close()
            # Something listens (see _unreachable), yet no broker answered: the client's own
            # connection timeout (ConnectError) and ours are the same news.
            if isinstance(e, asyncio.TimeoutError) or e.error() == pulsar.Result.ConnectError:
                detail = (f"no Pulsar broker answered at {urlsplit(service_url).netloc} within "
                          f"{connect_timeout:g} s, though something listens there (is it "
                          "Pulsar's port, 6650 by default? does the broker advertise an "
                          "address this machine can reach?)")
            else:
                # A broker that answers but refuses the lookup usually lacks the namespaces.
                detail = (f"{_pulsar_error(e)} (do the tenant 'tg' and the namespaces "
                          "tg/request, tg/response, tg/notify, tg/flow exist?)")
            raise BusError(f"cannot connect to Pulsar at {mask_url(url)}: {detail}") from None
        if options.consumer_id_offset:
            await bus._skip_consumer_ids(options.consumer_id_offset)
        return bus

    async def _skip_consumer_ids(self, count: int) -> None:
        """Use up ``count`` consumer ids, so this client's consumers get ids no other client
        on the same subscription has.

        The Pulsar protocol scopes consumer ids to a connection, and every client numbers its
        consumers 0, 1, 2, ...; Apache Pulsar keeps them apart by connection. pulsar-lite
        (0.1–0.2) keys a Shared subscription's consumers by the id alone and refuses the
        second replica's consumer ("Consumer 0 already exists"). Giving each replica its own
        offset sidesteps that; the only way to advance the client's counter is to open (and
        close) consumers, about 0.3 ms each.
        """
        topic = "non-persistent://tg/notify/toolmesh-consumer-ids"
        try:
            consumers = await asyncio.gather(*(
                self._client.subscribe(topic, f"skip-{uuid.uuid4().hex}",
                                       consumer_type=pulsar.ConsumerType.Exclusive,
                                       receiver_queue_size=1)
                for _ in range(count)))
            await asyncio.gather(*(c.close() for c in consumers))
        except PulsarException as e:
            await self.close()
            raise BusError(f"cannot skip {count} consumer ids on {mask_url(self.url)}: "
                           f"{_pulsar_error(e)}") from None

    async def _producer(self, queue: QueueId) -> Producer:
        future = self._producers.get(queue)
        if future is None:
            # One Pulsar producer per topic per bus, created once even when many callers race.
            future = self._producers[queue] = asyncio.ensure_future(self._client.create_producer(
                queue.pulsar, batching_enabled=False, block_if_queue_full=False,
                max_pending_messages=10_000,
                send_timeout_millis=int(self._publish_timeout * 1000)))
        try:
            return await asyncio.shield(future)
        except PulsarException as e:
            if self._producers.get(queue) is future:
                del self._producers[queue]
            raise BusError(f"cannot publish to {queue} on {mask_url(self.url)}: "
                           f"{_pulsar_error(e)}") from None

    async def producer(self, queue: str | QueueId) -> PulsarProducer:
        q = self._open_queue(queue)
        await self._producer(q)
        return PulsarProducer(self, q)

    async def publish(self, queue: QueueId, body: bytes, properties: dict[str, str]) -> None:
        """Send one message; waits out a reconnection up to ``publish_timeout``."""
        self._check_open(queue)
        producer = await self._producer(queue)
        try:
            if queue.persistent:
                await producer.send(body, properties=properties or None)
            else:
                async with self._non_persistent_slots:
                    await producer.send(body, properties=properties or None)
        except PulsarException as e:
            raise BusError(f"cannot publish to {queue} on {mask_url(self.url)}: "
                           f"{_pulsar_error(e)}") from None

    async def subscribe(
        self,
        queue: str | QueueId,
        handler: Handler | InlineHandler,
        *,
        subscription: str,
        concurrency: int = DEFAULT_CONCURRENCY,
        inline: bool = False,
    ) -> PulsarSubscription:
        q = self._subscribable(queue, concurrency)
        # each delivery runs on a task of its own anyway: an inline handler is called there
        run = as_handler(handler, inline=inline)
        if q.shared:
            name, kind = subscription, pulsar.ConsumerType.Shared
        else:
            name, kind = f"{subscription}-{uuid.uuid4().hex[:12]}", pulsar.ConsumerType.Exclusive
        try:
            consumer = await self._client.subscribe(
                q.pulsar, name, consumer_type=kind,
                # A persistent topic's broker keeps the backlog: prefetch no more than the
                # handlers can take (as RabbitMQ's prefetch), so replicas share it fairly.
                receiver_queue_size=concurrency if q.persistent else self._receiver_queue_size,
                negative_ack_redelivery_delay_ms=int(REDELIVERY_DELAY * 1000))
        except PulsarException as e:
            raise BusError(f"cannot subscribe to {q} on {mask_url(self.url)}: "
                           f"{_pulsar_error(e)}") from None
        sub = PulsarSubscription(q, consumer, run, concurrency)
        self._subscriptions.add(sub)
        return sub

    async def close(self) -> None:
        if not await self._begin_close():
            return
        for future in self._producers.values():
            if future.done() and not future.cancelled() and future.exception() is None:
                try:
                    await asyncio.wait_for(future.result().close(), CLOSE_TIMEOUT)
                except (PulsarException, TimeoutError):
                    pass
        self._producers.clear()
        try:
            await asyncio.wait_for(self._client.close(), CLOSE_TIMEOUT)
        except (PulsarException, TimeoutError):
            pass


@dataclass(frozen=True, slots=True)
class UrlOptions:
    """toolmesh's own options in a ``pulsar://`` URL's query (pulsar-client never sees them)."""

    #: messages a consumer of a non-persistent topic may hold; the broker drops what does
    #: not fit
    receiver_queue_size: int = DEFAULT_RECEIVER_QUEUE
    #: consumer ids this client skips at connect (the pulsar-lite workaround, see below)
    consumer_id_offset: int = 0


def _split_url(url: str) -> tuple[str, UrlOptions]:
    """The service URL pulsar-client takes, and our own query options."""
    parts = urlsplit(url)
    given = dict(parse_qsl(parts.query))
    known = {f.name for f in fields(UrlOptions)}
    unknown = set(given) - known
    if unknown:
        raise BusError(f"unknown option(s) {', '.join(sorted(unknown))} in Pulsar URL "
                       f"{mask_url(url)}; known: {', '.join(sorted(known))}")
    values: dict[str, int] = {}
    for name, text in given.items():
        try:
            values[name] = int(text)
        except ValueError:
            raise BusError(f"{name} in {mask_url(url)} must be an integer, not {text!r}") from None
        if values[name] < 0 or (name == "receiver_queue_size" and values[name] < 1):
            raise BusError(f"{name} in {mask_url(url)} is out of range: {text}")
    return urlunsplit(parts._replace(query="")), UrlOptions(**values)


def exit_process(code: int) -> NoReturn:
    """End a process that used Pulsar, skipping the interpreter's teardown.

    pulsar-client's C++ threads can still be finishing a closed client when Python tears
    itself down, and then the process dies of SIGSEGV or SIGABRT after a clean shutdown
    (apache/pulsar-client-python#256 and relatives). Every bus has been closed by now, so
    nothing is lost by leaving straight away.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
