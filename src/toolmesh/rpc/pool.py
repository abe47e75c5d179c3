"""Long-lived clients by key, bounded: one per queue pair, never one per call."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Protocol


class Startable(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


#: clients a pool keeps; beyond it the least recently used is closed
MAX_CLIENTS = 256


class ClientPool:
    """Started clients by key (a queue pair, say), made on first use and shared after.

    Creating a client subscribes a response queue, so it is done once per key, never per call
    or per config reload. At most ``max_clients`` are kept: services come and go (announced
    tool services above all, possibly on new queues each time) and each client holds a
    subscription, so the least recently used beyond that is closed. Users ask the pool for the
    client at each call: one closed is made again when it is needed.
    """

    def __init__(self, *, max_clients: int = MAX_CLIENTS) -> None:
        self.max_clients = max_clients
        self._clients: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        return len(self._clients)

    async def get(self, key: Hashable, make: Callable[[], Startable]) -> Any:
        """The started client for ``key``, made by ``make()`` the first time."""
        client = self._clients.get(key)
        if client is not None:
            self._clients.move_to_end(key)
            return client
        async with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = make()
                await client.start()
                self._clients[key] = client
                while len(self._clients) > self.max_clients:
                    _, unused = self._clients.popitem(last=False)
                    await unused.stop()
        return client

    async def close(self) -> None:
        """Stop every client."""
        clients, self._clients = list(self._clients.values()), OrderedDict()
        for client in clients:
            await client.stop()
