"""The gateway's ``tool-service`` route: call a configured tool service by its descriptor id.

Request (REST ``POST /api/v1/flow/{flow}/service/tool-service`` or a WebSocket frame with
``"service": "tool-service"``)::

    {"id": "<key of a tool-service config item>",
     "config": {...} | "<JSON text>", "arguments": {...} | "<JSON text>",
     "user"?: str, "timeout"?: seconds, "streaming"?: bool, "workspace"?: str,
     "idempotency-key"?: str}

(``idempotency-key``: the client's name for the call, the same on each retry; the gateway
sends one either way: :mod:`toolmesh.gateway.call_keys`.)

Responses: ``{"response": "<text>", "end_of_stream": bool}`` — one per response of the tool
service when streaming (the WebSocket default), else one with the whole observation (REST);
a failure is ``{"error": {"type", "message"}, "end_of_stream": true}``. A service that does not
answer in time raises :class:`RequestTimeout`, which the gateway shows as a ``timeout`` error.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolmesh.bus.base import Bus, Message, Subscription
from toolmesh.bus.queue_id import parse_queue_id
from toolmesh.config.client import ConfigClient
from toolmesh.config.service import CONFIG_PUSH_QUEUE
from toolmesh.errors import (
    MalformedMessage,
    RequestError,
    RequestTimeout,
    ServiceError,
    ToolmeshError,
)
from toolmesh.registry.registry import Registry
from toolmesh.rpc.pool import ClientPool
from toolmesh.schema.json_object import json_object
from toolmesh.schema.json_text import loads
from toolmesh.schema.tool_service import DEFAULT_USER, IDEMPOTENCY_KEY
from toolmesh.tools.client import ToolServiceClient
from toolmesh.tools.queues import resolve_queues

log = logging.getLogger("toolmesh.gateway")

NAME = "tool-service"
DEFAULT_CALL_TIMEOUT = 60.0


def _bad(message: str) -> ServiceError:
    return ServiceError(message, type="bad-request")


@dataclass(frozen=True, kw_only=True)
class ToolServiceCall:
    """One direct call, as a request to the route describes it."""

    id: str
    config: dict[str, Any] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)
    user: str = DEFAULT_USER
    timeout: float = DEFAULT_CALL_TIMEOUT
    streaming: bool = True
    #: the call's idempotency key (the gateway puts one in every request: .call_keys)
    key: str | None = None

    @classmethod
    def parse(cls, request: Mapping[str, Any], *, max_timeout: float) -> ToolServiceCall:
        """The call ``request`` asks for, or a ``bad-request`` :class:`ServiceError`."""
        id = request.get("id")
        if not isinstance(id, str) or not id.strip():
            raise _bad("a tool-service request needs 'id': the key of a tool-service config "
                       "item, e.g. {\"id\": \"joke-service\", \"arguments\": {...}}")
        try:
            # JSON text here was not seen by the gateway's body check: json_object decodes it
            # and refuses nesting too deep and lone surrogates, which would fail on the bus
            config = json_object(request.get("config"), name="'config'")
            arguments = json_object(request.get("arguments"), name="'arguments'")
        except ValueError as e:
            raise _bad(str(e)) from None
        user = request.get("user")
        if user is None or user == "":
            user = DEFAULT_USER
        elif not isinstance(user, str):  # 0, [] or {} too: refused, not taken as the default
            raise _bad(f"'user' must be a string, not {type(user).__name__}")
        timeout = request.get("timeout", min(DEFAULT_CALL_TIMEOUT, max_timeout))
        if (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                or not 0 < timeout <= max_timeout):
            raise _bad(f"'timeout' must be a number of seconds above 0 and at most "
                       f"{max_timeout:g}, not {json.dumps(timeout)}")
        streaming = request.get("streaming", True)
        if not isinstance(streaming, bool):
            raise _bad("'streaming' must be true or false")
        key = request.get(IDEMPOTENCY_KEY)
        if key is not None and not isinstance(key, str):
            raise _bad(f"'{IDEMPOTENCY_KEY}' must be a string, not {type(key).__name__}")
        return cls(id=id, config=config, arguments=arguments, user=user,
                   timeout=float(timeout), streaming=streaming, key=key or None)


@dataclass(frozen=True, kw_only=True)
class Descriptor:
    """The parts of a ``tool-service`` item a call needs (queues in one canonical spelling,
    so both spellings of a queue share one client)."""

    id: str
    request_queue: str
    response_queue: str
    required_params: tuple[str, ...] = ()

    @classmethod
    def parse(cls, id: str, value: str) -> Descriptor:
        # The config service validates tool-service items on put; this guards against a
        # store written by something else, with the same kind of message.
        try:
            item = loads(value, what="the value")  # never RecursionError, whatever is stored
            if not isinstance(item, dict):
                raise ValueError("the value is not a JSON object")
            if item.get("enabled", True) is False:
                raise ServiceError(f"tool service {id!r} is disabled by its config item "
                                   "(\"enabled\": false)", type="bad-request")
            request_queue, response_queue = (parse_queue_id(q) for q in resolve_queues(
                topic=None, request_queue=item.get("request-queue"),
                response_queue=item.get("response-queue")))
            if "notify" in (request_queue.cls, response_queue.cls):
                # a store written around validation must not turn a call into a broadcast
                # (the announcement queue among them)
                raise ValueError("a notify (broadcast) queue is no tool service's queue")
            params = item.get("config-params") or []
            required = tuple(p["name"] for p in params if p.get("required", False))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise ServiceError(f"config item tool-service/{id} is not a valid descriptor: {e}",
                               type="config-error") from None
        return cls(id=id, request_queue=str(request_queue),
                   response_queue=str(response_queue), required_params=required)

    def check(self, config: Mapping[str, Any]) -> None:
        """Refuse a config that leaves out a config-param marked required, as the agent
        refuses such a tool — so a direct call fails where the agent would."""
        missing = [p for p in self.required_params if p not in config]
        if missing:
            raise _bad(f"tool service {self.id!r} requires config "
                       + ", ".join(repr(p) for p in missing) + " (its config-params); "
                       "give it in 'config'")


def _error(e: ToolmeshError) -> tuple[dict[str, Any], bool]:
    return {"error": e.to_wire(), "end_of_stream": True}, True


class ToolServiceEndpoint:
    """Calls the tool service a ``tool-service`` config item describes, per request.

    The descriptor comes from the config service — or, when the workspace has no item of that
    id, from a live instance's announcement (``announcements=True``: the endpoint listens to
    them, as an agent does); one client per queue pair is kept, because creating one
    subscribes a queue.

    Descriptors read are kept (:class:`DescriptorCache`) as long as no newer config version
    is known: a config push, or a config response passing through this gateway
    (:meth:`saw_config_version` — so a put through the gateway applies to the very next
    call, before its push arrives). A call then costs one bus round trip, not two.
    """

    name = NAME
    per_flow = True  # addressed like the other per-flow services; the flow does not matter

    def __init__(self, bus: Bus, *, max_timeout: float = 600.0, config_timeout: float = 30.0,
                 config_queues: Mapping[str, str] | None = None,
                 announcements: bool = True) -> None:
        """``max_timeout`` caps a request's ``timeout``; ``config_queues`` (``request_queue``,
        ``response_queue``, ``push_queue``) reach a config service on other than the default
        queues."""
        self.max_timeout = max_timeout
        self._bus = bus
        queues = dict(config_queues or {})
        push_queue = queues.pop("push_queue", CONFIG_PUSH_QUEUE)
        self._config = ConfigClient(bus, timeout=config_timeout, when_no_consumer="fail",
                                    **queues)
        self.descriptors = DescriptorCache(bus, push_queue=push_queue)
        self._clients = ClientPool()
        # quiet: the agent's registry logs the instances (often in the same process)
        self.registry = Registry(bus, quiet=True) if announcements else None

    async def start(self) -> None:
        await self._config.start()
        await self.descriptors.start()
        if self.registry is not None:
            await self.registry.start()

    async def stop(self) -> None:
        if self.registry is not None:
            await self.registry.stop()
        await self._clients.close()
        await self.descriptors.stop()
        await self._config.stop()

    @property
    def config(self) -> ConfigClient:
        """The client of the config service this route reads its items from."""
        return self._config

    def announced_tools(self, workspace: str) -> list[tuple[str, Any]]:
        """``(key, tool item)`` of every tool the live services of ``workspace`` announce."""
        if self.registry is None:
            return []
        return [(key, dict(item)) for announcement in self.registry.offered(workspace).values()
                for key, item in announcement.tools.items()]

    def saw_config_version(self, response: Mapping[str, Any]) -> None:
        """Note the ``version`` of a config response the gateway passed on (see the class)."""
        self.descriptors.saw(response.get("version"))

    async def call(self, request: dict[str, Any], *, workspace: str,
                   flow: str) -> AsyncIterator[tuple[dict[str, Any], bool]]:
        try:
            call = ToolServiceCall.parse(request, max_timeout=self.max_timeout)
            named = request.get("workspace")
            if named is not None and not isinstance(named, str):
                raise _bad(f"'workspace' must be a string, not {type(named).__name__}")
            workspace = named if isinstance(named, str) and named else workspace
            descriptor = await self._descriptor(call.id, workspace)
            descriptor.check(call.config)
            self._check_live(descriptor)
            client = await self._client(descriptor)
        except RequestError as e:
            if e.type in ("timeout", "service-unavailable"):
                raise  # the gateway answers these with 504 / 503
            yield _error(e)
            return
        except ToolmeshError as e:
            yield _error(e)
            return
        try:
            if call.streaming:
                async for text, final in client.responses(
                        user=call.user, config=call.config, arguments=call.arguments,
                        timeout=call.timeout, workspace=workspace, key=call.key):
                    yield {"response": text, "end_of_stream": final}, final
            else:
                text = await client.call(user=call.user, config=call.config,
                                         arguments=call.arguments, timeout=call.timeout,
                                         workspace=workspace, key=call.key)
                yield {"response": text, "end_of_stream": True}, True
        except RequestTimeout as e:
            raise RequestTimeout(f"tool service {call.id!r} did not answer: {e.message}") from None
        except RequestError as e:
            if e.type == "service-unavailable":
                raise
            yield _error(e)
        except ToolmeshError as e:  # the service's own error, passed through as it is
            yield _error(e)

    def rest_result(self, responses: list[dict[str, Any]]) -> dict[str, Any]:
        """One REST body for a streamed call: the pieces joined (or the error)."""
        last = responses[-1]
        if last.get("error"):
            return last
        return {"response": "".join(str(r.get("response") or "") for r in responses),
                "end_of_stream": True}

    async def _descriptor(self, id: str, workspace: str) -> Descriptor:
        value = self.descriptors.get(workspace, id)
        if value is MISSING:
            value = await self._read(id, workspace)
        if value is None:
            announced = self.registry.offered(workspace).get(id) if self.registry else None
            if announced is not None:
                return Descriptor.parse(id, json.dumps(announced.descriptor))
            raise ServiceError(
                f"no tool service {id!r} in workspace {workspace!r}: no config item "
                f"tool-service/{id} and no running instance announces it; start it "
                f"(toolmesh run MODULE:CLASS) or store its descriptor, e.g. "
                f"'toolmesh config put tool-service/{id} descriptor.json'",
                type="unknown-tool-service")
        return Descriptor.parse(id, value)

    async def _read(self, id: str, workspace: str) -> str | None:
        """The stored value of ``tool-service/id`` (``None``: none), kept in the cache."""
        try:
            answer = await self._config.request({"operation": "get", "workspace": workspace,
                                                 "keys": [{"type": NAME, "key": id}]})
        except RequestTimeout as e:
            raise RequestTimeout(f"tool-service/{id} could not be read: {e.message}") from None
        values = answer.get("values") or [{}]
        value = values[0].get("value")
        value = value if isinstance(value, str) else None
        self.descriptors.put(workspace, id, value, version=answer.get("version"))
        return value

    def _check_live(self, descriptor: Descriptor) -> None:
        """A service that announced its queue and has no live instance left fails at once
        (503), as the agent's tools do, instead of waiting out the call's timeout."""
        if self.registry is None:
            return
        if self.registry.live_instances(descriptor.id, descriptor.request_queue) == 0:
            raise RequestError(f"no live instance of tool service {descriptor.id!r}: every "
                               "instance that announced itself is gone; start one (toolmesh "
                               "run MODULE:CLASS)", type="service-unavailable")

    async def _client(self, descriptor: Descriptor) -> ToolServiceClient:
        key = (descriptor.request_queue, descriptor.response_queue)
        return await self._clients.get(key, lambda: ToolServiceClient(
            self._bus, request_queue=key[0], response_queue=key[1], when_no_consumer="fail",
            hint=f"is the tool service {descriptor.id!r} (which consumes {key[0]}) running?"))


#: what :meth:`DescriptorCache.get` answers for an entry it does not hold (``None`` is a
#: value: "no such item")
MISSING: Any = object()


class DescriptorCache:
    """Stored ``tool-service`` values by ``(workspace, id)``, each with the config version it
    was read at, kept while no newer version is known.

    Any change to the config makes every entry stale (the version is global; changes are
    rare and a miss is one config read). A push with no change list — a config service that
    (re)started, perhaps on another store — empties it. At most ``limit`` entries, the least
    recently used going first.
    """

    def __init__(self, bus: Bus, *, push_queue: str = CONFIG_PUSH_QUEUE,
                 limit: int = 4096) -> None:
        self._bus = bus
        self._push_queue = push_queue
        self._limit = limit
        self._entries: OrderedDict[tuple[str, str], tuple[int, str | None]] = OrderedDict()
        #: the newest config version this gateway has heard of
        self.latest = -1
        self._subscription: Subscription | None = None
        #: (version, future) of callers of :meth:`caught_up` still waiting
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    async def start(self) -> None:
        self._subscription = await self._bus.subscribe(
            self._push_queue, self._on_push, subscription="gateway-tool-services",
            concurrency=1)

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None
        self._entries.clear()

    def get(self, workspace: str, id: str) -> str | None:
        """The value read at the newest known version, or :data:`MISSING`."""
        entry = self._entries.get((workspace, id))
        if entry is None or entry[0] < self.latest:
            return MISSING
        self._entries.move_to_end((workspace, id))
        return entry[1]

    def put(self, workspace: str, id: str, value: str | None, *, version: Any) -> None:
        """Keep ``value``, read at config ``version`` (not kept without a version)."""
        if not isinstance(version, int) or isinstance(version, bool):
            return
        self.saw(version)
        self._entries[(workspace, id)] = (version, value)
        self._entries.move_to_end((workspace, id))
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)

    def saw(self, version: Any) -> None:
        """A config version exists: entries read before it are stale."""
        if isinstance(version, int) and not isinstance(version, bool) and version > self.latest:
            self.latest = version
            self._wake()

    async def caught_up(self, version: int) -> None:
        """Return once config ``version`` (or a newer one) is known here: calls made after
        that read what it holds."""
        if self.latest >= version:
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((version, future))
        try:
            await future
        finally:
            self._waiters = [(v, f) for v, f in self._waiters if f is not future]

    def _wake(self) -> None:
        for version, future in self._waiters:
            if version <= self.latest and not future.done():
                future.set_result(None)

    async def _on_push(self, message: Message) -> None:
        try:
            push = message.json()
        except MalformedMessage as e:
            log.warning("config push not understood: %s", e.message)
            self._entries.clear()
            return
        changes = push.get("changes") if isinstance(push, dict) else None
        version = push.get("version") if isinstance(push, dict) else None
        if not isinstance(changes, dict) or not changes:
            # a config service (re)started: its versions may not follow the ones we hold
            self._entries.clear()
            if isinstance(version, int) and not isinstance(version, bool):
                self.latest = version
                self._wake()
            return
        self.saw(version)
