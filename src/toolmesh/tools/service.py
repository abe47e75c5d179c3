"""``DynamicToolService``: the base class a tool-service author subclasses
(docs/tool-services.md)."""

from __future__ import annotations

import inspect
import types
from contextvars import ContextVar
from typing import Any, ClassVar

from toolmesh.bus.base import DEFAULT_CONCURRENCY, Bus
from toolmesh.registry.announcer import Announcer, announcement
from toolmesh.registry.wire import (
    ANNOUNCEMENT_QUEUE,
    DEFAULT_TTL,
    DEFAULT_WORKSPACE,
    MAX_TTL,
    MIN_TTL,
    PROBE_QUEUE,
    Announcement,
)
from toolmesh.rpc.service import Reply, Service
from toolmesh.schema import tool_service as wire
from toolmesh.tools.definition import ToolServiceDefinition
from toolmesh.tools.queues import resolve_queues

_call_key: ContextVar[str | None] = ContextVar("toolmesh_call_key", default=None)


def call_key() -> str | None:
    """The idempotency key of the call :meth:`DynamicToolService.invoke` is computing, when
    the caller sent one (an agent's calls carry one): the same on every attempt of one call —
    a broker delivering the request again, an agent taken up again after a crash — so a tool
    that acts on the world can do it once per key (docs/dialogs.md)."""
    return _call_key.get()


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
    it **announces itself** while it runs (docs/announcements.md): agents offer its tools in
    ``workspace`` with no config written, until it stops. ``announce=False`` keeps it silent
    (then ``toolmesh tool-service register MODULE:CLASS`` writes its config items);
    ``announce_ttl``: seconds agents keep it without a heartbeat (it beats every third);
    ``announcement_queue``/``probe_queue``: where it announces (one broker, several meshes).
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
        workspace: str = DEFAULT_WORKSPACE,
        announce: bool = True,
        announce_ttl: float = DEFAULT_TTL,
        announcement_queue: str = ANNOUNCEMENT_QUEUE,
        probe_queue: str = PROBE_QUEUE,
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
        self.workspace = workspace
        self.announce = announce and definition is not None
        if not MIN_TTL <= announce_ttl <= MAX_TTL:
            raise ValueError(f"announce_ttl must be from {MIN_TTL:g} to {MAX_TTL:g} seconds, "
                             f"not {announce_ttl:g}")
        self.announce_ttl = announce_ttl
        self._queues = (req, resp)
        self._announcement_queues = (announcement_queue, probe_queue)
        self.announcer: Announcer | None = None

    async def start(self) -> None:
        """Serve, then announce (the tools are offered once someone consumes their queue)."""
        await super().start()
        if self.announce and self.announcer is None:
            queue, probe_queue = self._announcement_queues
            self.announcer = Announcer(self.bus, self.announcement(), queue=queue,
                                       probe_queue=probe_queue)
            await self.announcer.start()

    async def stop(self) -> None:
        """Say goodbye first (agents stop offering the tools at once), then drain."""
        announcer, self.announcer = self.announcer, None
        if announcer is not None:
            await announcer.stop()
        await super().stop()

    def announcement(self) -> Announcement:
        """What this instance announces: its definition's items with its own id and queues
        (:class:`~toolmesh.tools.definition.DefinitionError` if they are not valid)."""
        assert self.definition is not None
        items = self.definition.items(id=self.id, request_queue=self._queues[0],
                                      response_queue=self._queues[1])
        return announcement(id=self.id, workspace=self.workspace,
                            descriptor=items[("tool-service", self.id)],
                            tools={key: item for (type, key), item in items.items()
                                   if type == "tool"},
                            ttl=self.announce_ttl)

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
        key = request.get(wire.IDEMPOTENCY_KEY)
        token = _call_key.set(key if isinstance(key, str) and key else None)
        try:
            await self._answer(user, config, arguments, reply)
        finally:
            _call_key.reset(token)

    async def _answer(self, user: str, config: dict[str, Any], arguments: dict[str, Any],
                      reply: Reply) -> None:
        result = self.invoke(user, config, arguments)
        if isinstance(result, types.CoroutineType):  # an async def invoke(), the usual kind
            result = await result
        elif inspect.isasyncgen(result):
            async for piece in result:
                await reply(wire.response(wire.observation(piece), end_of_stream=False))
            await reply(wire.response("", end_of_stream=True))
            return
        elif inspect.isawaitable(result):
            result = await result
        await reply(wire.response(wire.observation(result)))
