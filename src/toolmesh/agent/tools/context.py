"""What tool builders share: the bus, the clients they reuse, the current config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolmesh.bus.base import Bus
from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.rpc.pool import MAX_CLIENTS
from toolmesh.rpc.pool import ClientPool as Pool
from toolmesh.tools.client import ToolServiceClient


class ClientPool(Pool):
    """The agent's clients (:class:`toolmesh.rpc.pool.ClientPool`): shared by every tool and
    every dialog that needs the same queues."""

    def __init__(self, bus: Bus, *, max_clients: int = MAX_CLIENTS) -> None:
        super().__init__(max_clients=max_clients)
        self.bus = bus

    async def tool_service(self, request_queue: str, response_queue: str) -> ToolServiceClient:
        return await self.get(
            ("tool-service", request_queue, response_queue),
            lambda: ToolServiceClient(self.bus, request_queue=request_queue,
                                      response_queue=response_queue))


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
