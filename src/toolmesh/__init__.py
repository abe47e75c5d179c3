"""toolmesh: a ReAct agent whose tools are plugged in by configuration.

The public entry points::

    from toolmesh import connect, DynamicToolService, ToolServiceClient

    bus = await connect("memory://")            # or "amqp://guest:guest@127.0.0.1:5672/"
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from toolmesh.errors import (
    BusError,
    MalformedMessage,
    QueueIdError,
    RequestError,
    RequestTimeout,
    ServiceError,
    ToolmeshError,
)

if TYPE_CHECKING:
    from toolmesh.bus import Bus, Message, QueueId, Requeue, connect, parse_queue_id
    from toolmesh.rpc.client import RequestClient
    from toolmesh.rpc.service import Service
    from toolmesh.tools import DynamicToolService, ToolServiceClient

__version__ = "0.1.0"

#: where each public name that is not an error lives; loaded at first use, so that importing
#: any module of the package (every ``toolmesh`` command does) does not load asyncio, the RPC
#: layer and the tool services along with it
_HOMES = {
    "Bus": "bus", "Message": "bus", "QueueId": "bus", "Requeue": "bus", "connect": "bus",
    "parse_queue_id": "bus", "RequestClient": "rpc.client", "Service": "rpc.service",
    "DynamicToolService": "tools", "ToolServiceClient": "tools",
}

__all__ = [
    "Bus", "BusError", "DynamicToolService", "MalformedMessage", "Message", "QueueId",
    "QueueIdError", "RequestClient", "RequestError", "RequestTimeout", "Requeue", "Service",
    "ServiceError", "ToolServiceClient", "ToolmeshError", "connect", "parse_queue_id",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
