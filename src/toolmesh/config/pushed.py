"""Which changes this config service process has pushed, by request id.

A request the bus delivers twice (a redelivery, a client's retry with the same id) is applied
once — the store records its request id with the write (see
:mod:`toolmesh.config.store.base`) — and answered each time with the version it produced. Should
the duplicate push that version again? The store cannot say whether the push went out: the
process that applied the request may have died between the commit and the push. So the rule is:

    push, unless *this process* has already pushed that version for that request id.

A redelivery after a crash lands in another process, which pushes again: a duplicate push is
harmless (watchers ignore versions they have seen), a lost one is not (watchers would serve
stale config until the next change). A duplicate reaching the process that applied it — the
common case of a client retrying — is answered without a second push.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator

from toolmesh.config.store.base import REMEMBERED_REQUESTS


class PushedRequests:
    """The ``request id -> version`` pushes of this process (the last ``size``), and one
    delivery per request id at a time, so two copies handled at once cannot both push."""

    def __init__(self, *, size: int = REMEMBERED_REQUESTS) -> None:
        self.size = size
        self._pushed: OrderedDict[str, int] = OrderedDict()
        # request id -> (its lock, how many deliveries hold or wait for it)
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def turn(self, request_id: str | None) -> AsyncIterator[None]:
        """Hold the request id while handling one delivery of it (nothing for ``None``)."""
        if request_id is None:
            yield
            return
        lock, holders = self._turns.get(request_id, (asyncio.Lock(), 0))
        self._turns[request_id] = (lock, holders + 1)
        try:
            async with lock:
                yield
        finally:
            lock, holders = self._turns[request_id]
            if holders == 1:
                del self._turns[request_id]
            else:
                self._turns[request_id] = (lock, holders - 1)

    def pushed(self, request_id: str | None, version: int) -> bool:
        """Whether this process has pushed ``version`` for ``request_id``.

        The version matters: a store that has forgotten a very old id applies it again, as a
        new version, and that one must be pushed.
        """
        return request_id is not None and self._pushed.get(request_id) == version

    def add(self, request_id: str | None, version: int) -> None:
        """Remember that ``version`` has been pushed for ``request_id``."""
        if request_id is None:
            return
        self._pushed[request_id] = version
        self._pushed.move_to_end(request_id)
        while len(self._pushed) > self.size:
            self._pushed.popitem(last=False)
