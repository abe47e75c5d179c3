"""The message-bus seam: what every backend provides.

Delivery semantics, the same on every backend:

* ``request`` and ``flow`` queues: every consumer with the same ``subscription`` shares one
  queue, so each message goes to exactly one of them (competing consumers); different
  subscriptions each get their own copy.
* ``response`` and ``notify`` queues: every consumer gets its own copy.
* ``flow`` messages are persistent (survive a broker restart on brokers that persist).
* A consumer runs up to ``concurrency`` handlers at once.

Acknowledgement policy: a message is acknowledged after its handler returns. If the handler
raises :class:`Requeue` the message is returned to its queue for redelivery; if it raises
anything else the error is logged with the message's id and the message is dropped (a handler
that failed once on a message would fail again — services turn their own failures into error
responses before this point, so only bugs reach it). A message whose consumer dies before
acknowledging it (process killed, connection lost) is redelivered by the broker.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolmesh import json_codec
from toolmesh.bus.queue_id import QueueId
from toolmesh.errors import MalformedMessage

DEFAULT_CONCURRENCY = 64


@dataclass(frozen=True, slots=True)
class Message:
    """One delivered message: the raw body and its string properties."""

    body: bytes
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str | None:
        """The correlation id property, if any."""
        return self.properties.get("id")

    def json(self) -> Any:
        """The body decoded as JSON; :class:`MalformedMessage` if it is not JSON, is nested
        too deep to decode, or holds a lone surrogate (text no encoder could send on)."""
        try:
            return json_codec.fast_loads(self.body)
        except json_codec.Unsure:
            pass  # the standard library decides (it takes NaN, and says what is wrong)
        try:
            value = json.loads(self.body)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            preview = self.body[:60]
            raise MalformedMessage(f"message body is not JSON ({e}): {preview!r}") from None
        except RecursionError:
            raise MalformedMessage("message body is nested too deep to decode") from None
        except ValueError:
            # Python's guard against slow parsing of huge integers
            raise MalformedMessage("message body holds an integer of more than "
                                   f"{sys.get_int_max_str_digits()} digits") from None
        if b"\\ud" in self.body or b"\\uD" in self.body:
            # only then can decoding have produced a lone surrogate: check by encoding
            try:
                json.dumps(value, ensure_ascii=False).encode()
            except UnicodeEncodeError:
                raise MalformedMessage("message body holds a lone surrogate (like \\ud800), "
                                       "which is not valid Unicode") from None
            except RecursionError:
                raise MalformedMessage("message body is nested too deep to decode") from None
        return value


Handler = Callable[[Message], Awaitable[None]]

#: A handler that is done when it returns and never waits (resolve a waiter, put on a queue),
#: subscribed with ``inline=True``; see :meth:`Bus.subscribe`.
InlineHandler = Callable[[Message], None]


class Requeue(Exception):
    """Raised by a handler to hand the message back to its queue for redelivery."""


class Producer(Protocol):
    """Publishes to one queue."""

    queue: QueueId

    async def send(self, value: Any, *, properties: Mapping[str, str] | None = None,
                   mandatory: bool = False) -> None:
        """Publish ``value`` encoded as JSON.

        ``mandatory``: raise :class:`~toolmesh.errors.NoConsumer` instead of dropping the
        message when the bus can tell that nothing will receive it (see the backends).
        """
        ...

    async def send_bytes(self, body: bytes, *, properties: Mapping[str, str] | None = None,
                         mandatory: bool = False) -> None:
        """Publish an already encoded body."""
        ...


class Subscription(Protocol):
    """A running consumer; :meth:`close` stops delivery and waits for handlers in flight."""

    queue: QueueId

    async def close(self) -> None: ...


class Bus(Protocol):
    """A connection to a message bus (see :func:`toolmesh.connect`)."""

    url: str

    async def producer(self, queue: str | QueueId) -> Producer:
        """A producer for ``queue`` (either spelling)."""
        ...

    async def subscribe(
        self,
        queue: str | QueueId,
        handler: Handler | InlineHandler,
        *,
        subscription: str,
        concurrency: int = DEFAULT_CONCURRENCY,
        inline: bool = False,
    ) -> Subscription:
        """Start consuming ``queue``; the queue is bound when this returns.

        ``inline``: ``handler`` is an :data:`InlineHandler`, a plain function, and the bus
        may call it right where the message arrives instead of starting a task for it — the
        in-process bus calls it within the sender's ``send`` (in the sender's context), so a
        response reaches its waiting caller with no task and no extra turn of the event
        loop. Acknowledgement, :class:`Requeue` and failures are as for any handler;
        ``concurrency`` does not apply (such a handler is never in flight).
        """
        ...

    async def close(self) -> None:
        """Close every producer and subscription and the connection."""
        ...


def encode(value: Any) -> bytes:
    """The JSON encoding used on every bus (:func:`toolmesh.json_codec.dumps`).

    Text holding a lone surrogate cannot be UTF-8: it is sent escaped instead, so the sender
    never fails on it and the receiver refuses it as malformed (see :meth:`Message.json`).
    """
    return json_codec.dumps(value)


def string_properties(properties: Mapping[str, Any] | None) -> dict[str, str]:
    """Properties as a plain ``str -> str`` dict (brokers may hand back bytes or numbers)."""
    if not properties:
        return {}
    out: dict[str, str] = {}
    for k, v in properties.items():
        # str as it is (the usual case, tested first: once per message)
        out[k if type(k) is str else str(k)] = (
            v if type(v) is str else v.decode() if isinstance(v, (bytes, bytearray)) else str(v))
    return out
