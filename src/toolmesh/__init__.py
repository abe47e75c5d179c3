"""toolmesh: a ReAct agent whose tools are plugged in by configuration.

The public entry points::

    from toolmesh import connect, DynamicToolService, ToolServiceClient

    bus = await connect("memory://")            # or "amqp://guest:guest@127.0.0.1:5672/"
"""

from toolmesh.bus import Bus, Message, QueueId, Requeue, connect, parse_queue_id
from toolmesh.errors import (
    BusError,
    MalformedMessage,
    QueueIdError,
    RequestError,
    RequestTimeout,
    ServiceError,
    ToolmeshError,
)
from toolmesh.rpc.client import RequestClient
from toolmesh.rpc.service import Service
from toolmesh.tools import DynamicToolService, ToolServiceClient

__version__ = "0.1.0"

__all__ = [
    "Bus", "BusError", "DynamicToolService", "MalformedMessage", "Message", "QueueId",
    "QueueIdError", "RequestClient", "RequestError", "RequestTimeout", "Requeue", "Service",
    "ServiceError", "ToolServiceClient", "ToolmeshError", "connect", "parse_queue_id",
]
