"""What every backend does alike: refuse use once closed, check subscribe arguments, close its
subscriptions before its connection."""

from __future__ import annotations

from typing import Generic, TypeVar

from toolmesh.bus.base import Subscription
from toolmesh.bus.queue_id import QueueId, parse_queue_id
from toolmesh.errors import BusError

S = TypeVar("S", bound=Subscription)


class BusLifecycle(Generic[S]):
    """Mixed into each backend; ``closed`` and ``_subscriptions`` are its state."""

    def __init__(self) -> None:
        self.closed = False
        self._subscriptions: set[S] = set()

    def _check_open(self, queue: QueueId) -> None:
        if self.closed:
            raise BusError(f"cannot use {queue}: the bus is closed")

    def _open_queue(self, queue: str | QueueId) -> QueueId:
        """``queue`` parsed, if the bus is still open."""
        q = parse_queue_id(queue)
        self._check_open(q)
        return q

    def _subscribable(self, queue: str | QueueId, concurrency: int) -> QueueId:
        """``queue`` parsed, if the bus is open and ``concurrency`` makes sense."""
        q = self._open_queue(queue)
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        return q

    async def _begin_close(self) -> bool:
        """Mark the bus closed and close its subscriptions (each waits for its handlers);
        False if it was closed already."""
        if self.closed:
            return False
        self.closed = True
        for sub in list(self._subscriptions):
            await sub.close()
        self._subscriptions.clear()
        return True
