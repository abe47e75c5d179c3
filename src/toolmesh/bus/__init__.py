"""The message bus: one interface, a backend per broker, chosen by URL."""

from __future__ import annotations

from toolmesh.bus.base import (
    DEFAULT_CONCURRENCY,
    Bus,
    Handler,
    InlineHandler,
    Message,
    Producer,
    Requeue,
    Subscription,
)
from toolmesh.bus.queue_id import QueueId, parse_queue_id
from toolmesh.errors import BusError

__all__ = [
    "DEFAULT_CONCURRENCY", "Bus", "BusError", "Handler", "InlineHandler", "Message", "Producer",
    "QueueId", "Requeue", "Subscription", "connect", "parse_queue_id",
]

SCHEMES = ("memory://", "amqp://", "amqps://", "pulsar://", "pulsar+ssl://")


async def connect(url: str = "memory://", **options: object) -> Bus:
    """Connect to the bus at ``url``.

    * ``memory://`` (or ``memory://NAME``) — the in-process bus, the embedded default;
    * ``amqp://user:password@host:5672/vhost`` — RabbitMQ;
    * ``pulsar://host:6650`` — Apache Pulsar (needs the ``pulsar`` extra).
    """
    if url.startswith("memory://"):
        from toolmesh.bus.memory import MemoryBus

        return MemoryBus(url)
    if url.startswith(("amqp://", "amqps://")):
        from toolmesh.bus.rabbitmq import RabbitMQBus

        return await RabbitMQBus.connect(url, **options)  # type: ignore[arg-type]
    if url.startswith(("pulsar://", "pulsar+ssl://")):
        from toolmesh.bus.pulsar import PulsarBus

        return await PulsarBus.connect(url, **options)  # type: ignore[arg-type]
    raise BusError(f"unsupported bus URL {url!r}; use one of: " + ", ".join(SCHEMES))
