"""``DynamicToolService``: the base class a tool-service author subclasses
(docs/tool-services.md)."""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

from toolmesh.bus.base import DEFAULT_CONCURRENCY, Bus
from toolmesh.rpc.service import Reply, Service
from toolmesh.schema import tool_service as wire
from toolmesh.tools.definition import ToolServiceDefinition
from toolmesh.tools.queues import resolve_queues


class DynamicToolService(Service):
    """A tool service on the bus; subclasses override only :meth:`invoke`.

    ``invoke`` may return a string (the observation), a JSON-able object (sent JSON-encoded),
    or be an async generator: each yielded piece is sent as one response with
    ``end_of_stream: false``, then a last empty response with ``end_of_stream: true``.
    An exception in ``invoke`` becomes an error response of type ``tool-service-error``
    (``KeyError: 'text' (raised by the tool service ID)``; the traceback goes to the log); a
    :class:`~toolmesh.errors.ServiceError` raised on purpose keeps its type and message.

    Construct with ``topic="joke"`` (queues ``non-persistent://tg/request/joke`` and
    ``.../response/joke``) or explicit ``request_queue=``/``response_queue=``; run it with
    ``async with service:`` or ``start()``/``stop()``. Replicas with the same ``id`` share the
    work (competing consumers on ``<exchange>.<id>-request``, as TrustGraph names it).

    A subclass may declare what it offers in :attr:`definition`: its id, topic, config-params
    and tools. Then it needs no ``topic``/``id`` here (the definition's are the defaults), and
    ``toolmesh tool-service register MODULE:CLASS`` writes its config items.
    """

    error_type = "tool-service-error"
    #: the service's descriptor and tools (see :mod:`toolmesh.tools.definition`)
    definition: ClassVar[ToolServiceDefinition | None] = None

    def __init__(
        self,
        bus: Bus,
        *,
        topic: str | None = None,
        request_queue: str | None = None,
        response_queue: str | None = None,
        id: str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        definition = self.definition
        if definition is not None and topic is None and request_queue is None \
                and response_queue is None:
            topic = definition.topic or definition.id
        req, resp = resolve_queues(topic=topic, request_queue=request_queue,
                                   response_queue=response_queue)
        self.id = id or (definition.id if definition else None) or topic \
            or type(self).__name__.lower()
        super().__init__(bus, request_queue=req, response_queue=resp,
                         subscription=f"{self.id}-request", concurrency=concurrency)

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> Any:
        """Compute the observation for one call. Override this."""
        raise NotImplementedError(f"{type(self).__name__} must implement invoke()")

    def error_response(self, error: dict[str, str]) -> dict[str, Any]:
        return wire.error_response(error)

    def describe_failure(self, error: Exception) -> str:
        """An exception ``invoke`` did not mean to raise, and which service raised it: the
        caller (an agent, the LLM, a person) cannot see this process's log. A ServiceError
        raised on purpose is sent as it is instead."""
        return f"{super().describe_failure(error)} (raised by the tool service {self.id})"

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        user, config, arguments = wire.parse_request(request)
        result = self.invoke(user, config, arguments)
        if inspect.isasyncgen(result):
            async for piece in result:
                await reply(wire.response(wire.observation(piece), end_of_stream=False))
            await reply(wire.response("", end_of_stream=True))
            return
        if inspect.isawaitable(result):
            result = await result
        await reply(wire.response(wire.observation(result)))
