"""``DynamicToolService``: the base class a tool-service author subclasses
(docs/tool-services.md)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import types
from contextvars import ContextVar
from typing import Any, ClassVar

from toolmesh import json_codec
from toolmesh.bus.base import DEFAULT_CONCURRENCY, Bus
from toolmesh.errors import ServiceError
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
from toolmesh.rpc import deadline
from toolmesh.rpc.service import Reply, Service, current_request_id
from toolmesh.schema import tool_service as wire
from toolmesh.tools.dedupe import (
    Claimed,
    DedupeError,
    DedupeStore,
    Kept,
    MemoryDedupe,
    Reused,
)
from toolmesh.tools.dedupe.store import DEFAULT_LEASE, entry_key, fingerprint
from toolmesh.tools.definition import ToolServiceDefinition
from toolmesh.tools.queues import resolve_queues

log = logging.getLogger("toolmesh.tools")

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

    **Each call once** (docs/tool-services.md): a call that carries an idempotency key runs
    once per key — a repeat (the broker delivering the request again, an agent taken up after
    a crash, a client retrying) gets the responses the first run sent, and a repeat that
    comes while the first still runs waits for it. ``dedupe``: where the completed calls are
    kept — ``True`` (the default, unless the class sets :attr:`dedupe_calls` to ``False``):
    this process's memory (:class:`~toolmesh.tools.dedupe.MemoryDedupe`); a
    :class:`~toolmesh.tools.dedupe.DedupeStore` shared by the replicas (e.g.
    :class:`~toolmesh.tools.dedupe.postgres.PostgresDedupe`; opened at :meth:`start`, closed
    by whoever made it); ``False``: every delivery runs.
    """

    error_type = "tool-service-error"
    #: the service's descriptor and tools (see :mod:`toolmesh.tools.definition`)
    definition: ClassVar[ToolServiceDefinition | None] = None
    #: whether calls are run once per idempotency key unless ``dedupe`` says otherwise: a
    #: service whose calls are harmless to repeat, or whose results are too big to keep, may
    #: set ``False``
    dedupe_calls: ClassVar[bool] = True

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
        dedupe: DedupeStore | bool | None = None,
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
        if dedupe is None:
            dedupe = self.dedupe_calls
        if not isinstance(dedupe, (bool, DedupeStore)):
            raise TypeError(f"dedupe must be True, False or a DedupeStore, not {dedupe!r}")
        #: where completed calls are kept by key (``None``: every delivery runs)
        self.dedupe: DedupeStore | None = (MemoryDedupe() if dedupe is True
                                           else None if dedupe is False else dedupe)
        self._owns_dedupe = dedupe is True

    async def start(self) -> None:
        """Serve, then announce (the tools are offered once someone consumes their queue)."""
        if self.dedupe is not None:
            await self.dedupe.open()
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
        if self.dedupe is not None and self._owns_dedupe:
            await self.dedupe.close()

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
        key = key if isinstance(key, str) and key else None
        token = _call_key.set(key)
        try:
            # a call without a key is still the same call on every delivery of its request
            # (a caller that knows no keys: TrustGraph's agent, a plain client)
            request_id = current_request_id()
            once = key if key is not None else \
                None if request_id is None else f"request:{request_id}"
            if once is None or self.dedupe is None:
                await self._answer(user, config, arguments, reply, reply)
            else:
                workspace = request.get("workspace")
                await self.__answer_once(self.dedupe, once,
                                         workspace if isinstance(workspace, str) else None,
                                         user, config, arguments, reply)
        finally:
            _call_key.reset(token)

    async def _answer(self, user: str, config: dict[str, Any], arguments: dict[str, Any],
                      send: Reply, last: Reply) -> None:
        """Run :meth:`invoke`: each piece of a streamed answer goes to ``send``, the final
        response to ``last``."""
        await self._answered(self.invoke(user, config, arguments), send, last)

    async def _answered(self, result: Any, send: Reply, last: Reply) -> None:
        """Answer with what :meth:`invoke` returned (see :meth:`_answer`)."""
        if isinstance(result, types.CoroutineType):  # an async def invoke(), the usual kind
            result = await result
        elif inspect.isasyncgen(result):
            async for piece in result:
                await send(wire.response(wire.observation(piece), end_of_stream=False))
            await last(wire.response("", end_of_stream=True))
            return
        elif inspect.isawaitable(result):
            result = await result
        await last(wire.response(wire.observation(result)))

    async def __answer_once(self, store: DedupeStore, key: str, workspace: str | None,
                            user: str, config: dict[str, Any], arguments: dict[str, Any],
                            reply: Reply) -> None:
        """Answer a call with a key: run it if no run of the key completed (or runs now),
        else send what that run sent."""
        remaining = deadline.remaining()
        lease = DEFAULT_LEASE if remaining is None else remaining + 1.0
        try:
            claim = await store.claim(entry_key(self.id, workspace, key),
                                      fingerprint(user, config, arguments), lease=lease)
        except DedupeError as e:
            # refused rather than run unchecked: the call may have run already
            raise ServiceError(f"tool service {self.id} cannot tell whether this call "
                               f"(idempotency key {key!r}) already ran, so it does not run "
                               f"it: {e.message}", type="dedupe-error") from None
        if isinstance(claim, Reused):
            raise ServiceError(f"the idempotency key {key!r} was used for another call of "
                               f"tool service {self.id} (another user, config or arguments); "
                               "send a new key with a new call", type="idempotency-key-reused")
        if isinstance(claim, Kept):
            if claim.responses is None:
                raise ServiceError(
                    f"this call (idempotency key {key!r}) already ran; its result "
                    f"({claim.size} bytes) was bigger than tool service {self.id} keeps "
                    f"({store.limits.max_result} bytes), so it is not sent again",
                    type="already-ran")
            for response in claim.responses:
                await reply(response)
            return
        recording = _Recording(reply, limit=store.limits.max_result)

        async def last(response: dict[str, Any]) -> None:
            recording.keep(response)
            # the call ran: kept before it is answered, whatever comes next — and never
            # released, even if the completion is cut short (a repeat then waits out the
            # claim's lease rather than run the call twice)
            recording.ran = True
            try:
                await store.complete(claim, recording.responses, size=recording.size)
            except DedupeError as e:
                log.warning("tool service %s: the result of call %r was not kept (a repeat "
                            "will run it again): %s", self.id, key, e.message)
            await reply(response)

        try:
            result = self.invoke(user, config, arguments)
            if isinstance(result, types.CoroutineType):  # the usual kind, without a detour
                await last(wire.response(wire.observation(await result)))
            else:
                await self._answered(result, recording.send, last)
        except BaseException:
            if not recording.ran:
                await asyncio.shield(self.__release(store, claim))
            raise

    async def __release(self, store: DedupeStore, claim: Claimed) -> None:
        try:
            await store.release(claim)
        except DedupeError as e:
            log.warning("tool service %s: a failed call's key was not released (a repeat "
                        "waits until its lease runs out): %s", self.id, e.message)


#: bytes a response takes beyond its text: its fields as JSON, or a dict's keys
_RESPONSE_OVERHEAD = 48


class _Recording:
    """The responses of one run as they are sent, while they fit in ``limit`` bytes (their
    text's size in memory, plus :data:`_RESPONSE_OVERHEAD` each)."""

    __slots__ = ("_limit", "_reply", "ran", "responses", "size")

    def __init__(self, reply: Reply, *, limit: int) -> None:
        self._reply = reply
        self._limit = limit
        #: what was sent so far (``None``: more than ``limit`` bytes, not kept)
        self.responses: list[dict[str, Any]] | None = []
        #: bytes of the responses (see the class)
        self.size = 0
        #: the run is over and its answer is being kept (not to be released from now on)
        self.ran = False

    def keep(self, response: dict[str, Any]) -> None:
        text = response.get("response")
        # the text is what a response holds: its size in memory (a bound on its UTF-8,
        # found without encoding it), plus the rest of the response
        self.size += (sys.getsizeof(text) if type(text) is str
                      else len(json_codec.dumps(response))) + _RESPONSE_OVERHEAD
        if self.responses is not None:
            if self.size > self._limit:
                self.responses = None
            else:
                self.responses.append(response)

    async def send(self, response: dict[str, Any]) -> None:
        self.keep(response)
        await self._reply(response)
