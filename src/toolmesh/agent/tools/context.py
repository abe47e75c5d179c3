"""What tool builders share: the bus, the clients they reuse, the current config."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolmesh.bus.base import Bus
from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.tools.client import ToolServiceClient


class ClientPool:
    """Long-lived clients shared by every tool (and every dialog) that needs the same queues.

    Creating a client subscribes a response queue, so it is done once per queue pair, never
    per call or per config reload.
    """

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._clients: dict[tuple[str, ...], Any] = {}
        self._lock = asyncio.Lock()

    async def get(self, key: tuple[str, ...], make: Any) -> Any:
        """The started client for ``key``, made by ``make()`` the first time."""
        client = self._clients.get(key)
        if client is None:
            async with self._lock:
                client = self._clients.get(key)
                if client is None:
                    client = make()
                    await client.start()
                    self._clients[key] = client
        return client

    async def tool_service(self, request_queue: str, response_queue: str) -> ToolServiceClient:
        return await self.get(
            ("tool-service", request_queue, response_queue),
            lambda: ToolServiceClient(self.bus, request_queue=request_queue,
                                      response_queue=response_queue))

    async def close(self) -> None:
        for client in self._clients.values():
            await client.stop()
        self._clients.clear()


@dataclass(kw_only=True)
class BuildContext:
    """Handed to every tool builder."""

    clients: ClientPool
    #: the current config of the types the agent watches: type -> key -> parsed JSON value
    config: Mapping[str, Mapping[str, Any]]
    #: services the agent reaches tools through (prompt client, ...)
    services: dict[str, Any] = field(default_factory=dict)
    #: the workspace the config comes from: the tools call into it (its mcp items, its
    #: prompts) and tell tool services about it
    workspace: str = DEFAULT_WORKSPACE
