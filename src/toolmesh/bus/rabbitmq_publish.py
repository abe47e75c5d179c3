"""The RabbitMQ bus's way out: an :class:`Outbox` per connection that writes what one turn of
the event loop sent in one socket write, and a :class:`Publisher` per bus that publishes with
confirms on its channel (:mod:`toolmesh.bus.rabbitmq`)."""

from __future__ import annotations

import asyncio
import collections
import itertools
import uuid
from collections.abc import Mapping
from typing import Any, cast

import aiormq
import pamqp.frame
from aio_pika.abc import AbstractRobustChannel
from aiormq.abc import ChannelFrame, DeliveredMessage
from pamqp import commands as spec

from toolmesh.bus.rabbitmq_frames import BODY, BODY_HEADER, FRAME_END, content_header


class Outbox:
    """What toolmesh sends on one connection — publishes and acknowledgements — written to
    the socket together, once per turn of the event loop.

    aiormq writes every frame with a call of its own (one ``send`` system call each, and on
    the broker one read each); under load a turn of the loop produces many, so they leave as
    one write. The bytes go through aiormq's write queue like its own frames, so they keep
    their order with everything else on the connection.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        #: the connection's write queue the pending bytes are for (a new one after a
        #: reconnection: bytes for the old one are dropped, the broker forgot that channel)
        self._queue: asyncio.Queue[Any] | None = None
        self._chunks: list[bytes] = []
        self._scheduled = False
        #: writes waiting for room in a full write queue, in order
        self._backlog: collections.deque[ChannelFrame] = collections.deque()
        self._pusher: asyncio.Task[None] | None = None

    def write(self, channel: aiormq.Channel, *chunks: bytes) -> None:
        """Send ``chunks`` (whole frames, marshalled) on ``channel``'s connection soon."""
        queue = channel.write_queue
        if queue is not self._queue:
            self.flush()
            self._drop_backlog()
            self._queue = queue
        self._chunks.extend(chunks)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush_soon)

    def _flush_soon(self) -> None:
        self._scheduled = False
        self.flush()

    def flush(self) -> None:
        """Hand what is pending to the connection's writer now."""
        if not self._chunks or self._queue is None:
            return
        frame = ChannelFrame(payload=b"".join(self._chunks), should_close=False)
        self._chunks = []
        if not self._backlog:
            try:
                self._queue.put_nowait(frame)
                return
            except asyncio.QueueFull:
                pass
        self._backlog.append(frame)
        if self._pusher is None:
            self._pusher = self._loop.create_task(self._push(self._queue))

    async def _push(self, queue: asyncio.Queue[Any]) -> None:
        try:
            while self._backlog:
                await queue.put(self._backlog[0])
                self._backlog.popleft()
        finally:
            self._pusher = None

    def _drop_backlog(self) -> None:
        self._backlog.clear()
        if self._pusher is not None:
            self._pusher.cancel()
            self._pusher = None

    def close(self) -> None:
        self.flush()
        self._drop_backlog()


class Publisher:
    """Publishes on the bus's shared publishing channel, with publisher confirms, through the
    :class:`Outbox` — what aiormq's ``basic_publish`` does, minus a task switch and a write of
    its own per message.

    Each publish takes the channel's next delivery tag and leaves its future where aiormq's
    reader resolves it: the broker's ``Basic.Ack`` confirms it, a ``Basic.Return`` (a
    mandatory publish nobody's queue took) fails it with ``PublishError``, and the channel's
    closing fails it with the reason, as for aiormq's own publishes. (The channel attributes
    this takes part in — ``delivery_tag``, ``confirmations``, ``message_id_delivery_tag``,
    ``write_queue`` — are aiormq's bookkeeping of publishes, alike from 6.8 to 7.2;
    ``tests/bus/test_rabbitmq_publishing.py`` fails if a later aiormq changes them.)
    """

    def __init__(self, channel: AbstractRobustChannel, outbox: Outbox) -> None:
        self._robust = channel
        self._outbox = outbox
        self._channel: aiormq.Channel | None = None
        #: message ids of mandatory publishes (a return names its publish by it)
        self._id_prefix = f"tm-{uuid.uuid4().hex[:12]}-"
        self._ids = itertools.count(1)
        #: the marshalled Basic.Publish frames by (channel number, exchange, mandatory,
        #: routing key)
        self._publish_frames: dict[tuple[int, str, bool, str], bytes] = {}

    async def channel(self) -> aiormq.Channel:
        channel = self._channel
        if channel is None or channel.is_closed:
            if self._robust.is_closed:
                # the connection is down: the caller waits for it, as long as it may (asking
                # the robust channel for its new underlay would wait without a limit)
                raise aiormq.exceptions.ChannelInvalidStateError("the channel is closed")
            # a robust channel's underlay is new after each reconnection
            channel = self._channel = cast(aiormq.Channel,
                                           await self._robust.get_underlay_channel())
        return channel

    async def publish(self, exchange: str, body: bytes, headers: Mapping[str, str] | None,
                      delivery_mode: int, mandatory: bool, routing_key: str = "") -> None:
        """Publish and wait for the broker's confirmation; ``PublishError`` if it returns a
        mandatory publish, a connection error if the channel closes first. ``routing_key``:
        for the default exchange (``""``), the queue it goes to."""
        channel = self._channel
        if channel is None or channel.is_closed:
            channel = await self.channel()
        number = channel.number
        key = (number, exchange, mandatory, routing_key)
        publish = self._publish_frames.get(key)
        if publish is None:
            if len(self._publish_frames) > 4096:
                self._publish_frames.clear()
            publish = self._publish_frames[key] = pamqp.frame.marshal(
                spec.Basic.Publish(exchange=exchange, routing_key=routing_key,
                                   mandatory=mandatory), number)
        message_id = f"{self._id_prefix}{next(self._ids)}" if mandatory else None
        header = content_header(number, len(body), headers, delivery_mode, message_id)
        # what aiormq's basic_publish does under its lock; nothing here awaits in between
        channel.delivery_tag += 1
        tag = channel.delivery_tag
        confirmation = channel.create_future()
        channel.confirmations[tag] = confirmation
        if message_id is not None:
            by_id = channel.message_id_delivery_tag
            by_id[message_id] = tag
            confirmation.add_done_callback(lambda _: by_id.pop(message_id, None))
        limit = channel.max_content_size
        if len(body) <= limit:
            self._outbox.write(channel, publish, header, BODY_HEADER.pack(BODY, number, len(body)),
                               body, FRAME_END)
        else:
            chunks = [publish, header]
            view = memoryview(body)
            for start in range(0, len(body), limit):
                piece = view[start:start + limit]
                chunks += (BODY_HEADER.pack(BODY, number, len(piece)), bytes(piece), FRAME_END)
            self._outbox.write(channel, *chunks)
        try:
            result = await confirmation
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not channel.is_closed or (task is not None and task.cancelling()):
                raise
            # the channel closed under the publish: aiormq cancels what waits on it
            raise aiormq.exceptions.ChannelInvalidStateError("the channel closed") from None
        except aiormq.exceptions.AMQPError:
            raise
        except Exception as e:
            if channel.is_closed:
                raise aiormq.exceptions.ChannelInvalidStateError(
                    f"the channel closed: {e!r}") from None
            raise
        if isinstance(result, DeliveredMessage):  # a return, on a channel that does not raise
            raise aiormq.exceptions.PublishError(result, result.delivery)
