"""Which flows exist: ``default`` always, plus one per ``flow`` config item of the workspace.

The gateway serves per-flow routes only for these, so a request for any other name is refused
at once (``404 unknown-flow``) instead of opening a bus subscription for a queue nobody
consumes. A flow is defined the way TrustGraph stores its flow instances: a ``flow/<id>``
config item whose value is a JSON object (``{"description": "..."}``; other fields are kept
and shown as they are). ``toolmesh run agent --flow ID`` (and ``mcp-tool``) serves it.

The registry caches each workspace's flow ids and forgets them when a config push says the
``flow`` type changed there, so a new flow is served as soon as its put is acknowledged. The
cache holds at most ``max_workspaces`` workspaces, so no stream of names grows it without end.

The same module answers TrustGraph's global ``flow`` service (``tg-show-flows``):
``{"operation": "list-flows"}`` → ``{"flow-ids": [...]}`` and
``{"operation": "get-flow", "flow-id": ID}`` → ``{"flow": "<JSON text>"}``.

Every toolmesh flow is an instance of the same set of services, so the gateway shows them as
TrustGraph shows a flow's class: one blueprint, :data:`BLUEPRINT`, whose interfaces are the
per-flow queues with ``{id}`` for the flow id. ``get-flow`` names it in ``blueprint-name``
(``tg-show-flow-state`` reads it), ``list-blueprints`` → ``{"blueprint-names": ["toolmesh"]}``
and ``get-blueprint`` → ``{"blueprint-definition": "<JSON text>"}`` (``tg-verify-system-status``,
``tg-show-flow-blueprints``). Blueprints cannot be written: a flow is a config item.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from toolmesh.bus.base import Bus, Message, Subscription
from toolmesh.config.client import ConfigClient
from toolmesh.config.service import CONFIG_PUSH_QUEUE
from toolmesh.errors import MalformedMessage, RequestError, ServiceError
from toolmesh.schema.flow import DEFAULT_FLOW, FLOW_ID_RULE, valid_flow_id

__all__ = ["DEFAULT_FLOW", "FLOW_ID_RULE", "FlowRegistry", "FlowService", "valid_flow_id"]

log = logging.getLogger("toolmesh.gateway.flows")

FLOW_TYPE = "flow"
#: the one blueprint every flow is an instance of (module docstring)
BLUEPRINT = "toolmesh"

#: the per-flow services the gateway reaches, and their queues (for ``get-flow``)
FLOW_SERVICES = ("agent", "mcp-tool", "agent-tools", "agent-services", "dialogs", "approvals",
                 "prompt", "text-completion")


def unknown_flow(flow: str, workspace: str, known: list[str] | None = None) -> ServiceError:
    """The ``unknown-flow`` error for ``flow``."""
    if not valid_flow_id(flow):
        return ServiceError(f"no flow {flow!r}: {FLOW_ID_RULE}", type="unknown-flow")
    listed = f"; flows: {', '.join(known)}" if known else ""
    return ServiceError(
        f"no flow {flow!r} in workspace {workspace!r}{listed}. Define it with "
        f"`echo '{{\"description\": \"...\"}}' | toolmesh config put flow/{flow}` and serve "
        f"it with `toolmesh run agent --flow {flow}`", type="unknown-flow")


def interfaces(flow: str) -> dict[str, dict[str, str]]:
    """The queues of flow ``flow``'s services (``{id}`` in a blueprint)."""
    return {service: {"request": f"request:tg:{service}:{flow}",
                      "response": f"response:tg:{service}:{flow}"}
            for service in FLOW_SERVICES}


def blueprint() -> dict[str, Any]:
    """The definition of :data:`BLUEPRINT`, as ``get-blueprint`` returns it."""
    return {"description": "toolmesh's per-flow services: the agent, its tools, prompts and "
                           "the LLM (a flow is a 'flow' config item)",
            "interfaces": interfaces("{id}")}


def describe(flow: str, value: str | None) -> dict[str, Any]:
    """The definition ``get-flow`` returns: the item's fields plus the flow's blueprint
    and queues."""
    definition: dict[str, Any] = {"blueprint-name": BLUEPRINT}
    if value is not None:
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            definition.update(parsed)
    elif flow == DEFAULT_FLOW:
        definition["description"] = "the default flow"
    definition["interfaces"] = interfaces(flow)
    return definition


class FlowRegistry:
    """The flow ids of each workspace, cached and kept current by config pushes."""

    def __init__(self, bus: Bus, config: ConfigClient, *, max_workspaces: int = 1024,
                 push_queue: str = CONFIG_PUSH_QUEUE) -> None:
        self._bus = bus
        self._config = config
        self._max = max_workspaces
        self._push_queue = push_queue
        #: workspace -> its flow ids (a load in progress is a future)
        self._known: OrderedDict[str, asyncio.Future[frozenset[str]]] = OrderedDict()
        self._subscription: Subscription | None = None

    async def start(self) -> None:
        self._subscription = await self._bus.subscribe(
            self._push_queue, self._on_push, subscription="gateway-flows", concurrency=1)

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None
        for future in self._known.values():
            future.cancel()
        self._known.clear()

    async def check(self, workspace: str, flow: str) -> None:
        """Return if ``flow`` exists in ``workspace``; raise ``unknown-flow`` otherwise.

        ``default`` needs no lookup, so the common case never waits on the config service.
        """
        if flow == DEFAULT_FLOW:
            return
        if not valid_flow_id(flow):
            raise unknown_flow(flow, workspace)
        if flow not in await self.flows(workspace):
            raise unknown_flow(flow, workspace)

    async def flows(self, workspace: str) -> frozenset[str]:
        """The flow ids ``workspace`` defines (``default`` not included)."""
        future = self._known.get(workspace)
        if future is None:
            # one load per workspace however many requests ask at once
            future = asyncio.ensure_future(self._load(workspace))
            self._known[workspace] = future
            future.add_done_callback(lambda done: self._loaded(workspace, done))
            while len(self._known) > self._max:
                self._known.popitem(last=False)[1].cancel()
        else:
            self._known.move_to_end(workspace)
        return await asyncio.shield(future)

    async def _load(self, workspace: str) -> frozenset[str]:
        keys = await self._config.list(FLOW_TYPE, workspace=workspace)
        return frozenset(k for k in keys if valid_flow_id(k))

    def _loaded(self, workspace: str, future: asyncio.Future[frozenset[str]]) -> None:
        if future.cancelled() or future.exception() is not None:
            # not cached: the next request asks again (the config service may be back)
            if self._known.get(workspace) is future:
                del self._known[workspace]

    async def _on_push(self, message: Message) -> None:
        try:
            push = message.json()
        except MalformedMessage as e:
            log.warning("config push not understood: %s", e.message)
            self._known.clear()
            return
        changes = push.get("changes") if isinstance(push, dict) else None
        if not isinstance(changes, dict) or not changes:
            self._known.clear()  # a config service (re)started: forget everything
            return
        for workspace in changes.get(FLOW_TYPE) or ():
            if isinstance(workspace, str):
                self._known.pop(workspace, None)


class FlowService:
    """TrustGraph's global ``flow`` service, answered by the gateway from configuration."""

    name = "flow"
    per_flow = False

    def __init__(self, registry: FlowRegistry, config: ConfigClient) -> None:
        self._registry = registry
        self._config = config

    async def start(self) -> None:
        return None  # the registry and the config client are started by the gateway

    async def stop(self) -> None:
        return None

    async def call(self, request: dict[str, Any], *, workspace: str,
                   flow: str) -> AsyncIterator[tuple[dict[str, Any], bool]]:
        named = request.get("workspace")
        workspace = named if isinstance(named, str) and named else workspace
        operation = request.get("operation")
        try:
            async for answer in self._answer(operation, request, workspace):
                yield answer, True
        except RequestError as e:
            if e.type != "config-error":
                raise
            # the config service refused the workspace name (NUL, lone surrogates): the
            # caller's mistake, refused like any other bad field, not a failed service (502)
            yield _error("bad-request", e.message), True

    async def _answer(self, operation: Any, request: dict[str, Any],
                      workspace: str) -> AsyncIterator[dict[str, Any]]:
        if operation == "list-flows":
            ids = sorted({DEFAULT_FLOW, *await self._registry.flows(workspace)})
            yield {"flow-ids": ids}
        elif operation == "get-flow":
            flow_id = request.get("flow-id", request.get("flow_id"))
            if not isinstance(flow_id, str):
                yield _error("bad-request", "get-flow needs 'flow-id' (a string)")
                return
            value = None
            if valid_flow_id(flow_id):
                value = await self._config.get(FLOW_TYPE, flow_id, workspace=workspace)
            if value is None and flow_id != DEFAULT_FLOW:
                e = unknown_flow(flow_id, workspace)
                yield _error(e.type, e.message)
                return
            yield {"flow": json.dumps(describe(flow_id, value))}
        elif operation == "list-blueprints":
            yield {"blueprint-names": [BLUEPRINT]}
        elif operation == "get-blueprint":
            name = request.get("blueprint-name")
            if name != BLUEPRINT:
                yield _error("bad-request", f"no flow blueprint {name!r}; toolmesh has one, "
                                            f"{BLUEPRINT!r}")
                return
            yield {"blueprint-definition": json.dumps(blueprint())}
        else:
            yield _error("bad-request", f"unknown flow operation {operation!r}; this gateway "
                                        "answers list-flows, get-flow, list-blueprints and "
                                        "get-blueprint (flows are defined by 'flow' config "
                                        "items)")


def _error(type: str, message: str) -> dict[str, Any]:
    return {"error": {"type": type, "message": message}}
