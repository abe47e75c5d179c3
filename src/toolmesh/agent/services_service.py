"""The agent's ``agent-services`` service: every tool service of a workspace, configured or
announced, its live instances, and what became of its tools.

Request ``{"workspace"?: str, "version"?: int}`` on ``request:tg:agent-services:{flow}`` → one
response::

    {"workspace", "version", "accepts-announcements": bool,
     "services": [{"id", "configured", "announced", "enabled", "request-queue",
                   "descriptor", "live",
                   "instances": [{"instance", "host", "pid", "started", "last-heartbeat",
                                  "ttl"}],
                   "last-seen",
                   "tools": [{"key", "name", "source", "status", "reason"?}]}, ...]}

``services`` are the workspace's ``tool-service`` config items and the services its agent's
registry heard announce there (live or gone), by id. ``live`` counts the announced instances
serving the service's request queue (``null``: none ever announced it, so nothing is known).
A tool's ``status`` is ``offered``, ``no-live-instance`` (offered, but every announced
instance is gone: a call fails at once), ``overridden`` (an announced tool a configured item
of its key replaces) or ``not-offered`` (``reason`` says why). Times are ISO 8601 UTC.
``descriptor`` is the one the agent uses: the configured item's, else the one the live
announcement offers (``null`` when neither parses), so a client can show an announced
service's ``config-params`` before anyone configures it.
``version``: as for ``agent-tools`` (read your writes). The gateway serves it as
``POST /api/v1/flow/{flow}/service/agent-services``; `toolmesh services` prints it.

This is the agent's view, not the config's: a TrustGraph-style config read shows configured
items only, while this shows what the agent offers from both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from toolmesh.agent.status import ToolStatus
from toolmesh.agent.status_service import read_your_writes
from toolmesh.agent.toolset import ToolSet, parse_snapshot
from toolmesh.bus.base import Bus
from toolmesh.config.client import ConfigSnapshot
from toolmesh.config.workspaces import request_workspace
from toolmesh.registry.registry import Registry, ServiceRecord
from toolmesh.rpc.service import Reply, Service

AGENT_SERVICES_REQUEST_QUEUE = "request:tg:agent-services:default"
AGENT_SERVICES_RESPONSE_QUEUE = "response:tg:agent-services:default"


class AgentServicesService(Service):
    """Answers ``agent-services`` requests from the tool set ``toolset(workspace)``, the config
    ``snapshot(workspace)`` it was built from and the ``registry`` of announced services
    (``None``: announcements are off). ``load(workspace)`` first: a workspace no dialog has
    named yet is loaded for it; ``reload(workspace)`` when the caller has seen a newer config."""

    error_type = "agent-error"

    def __init__(self, bus: Bus, *, toolset: Callable[[str], ToolSet],
                 snapshot: Callable[[str], ConfigSnapshot | None],
                 load: Callable[[str], Awaitable[None]],
                 reload: Callable[[str], Awaitable[None]] | None = None,
                 registry: Registry | None, workspace: str,
                 request_queue: str = AGENT_SERVICES_REQUEST_QUEUE,
                 response_queue: str = AGENT_SERVICES_RESPONSE_QUEUE,
                 id: str = "agent") -> None:
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=f"{id}-services-request", concurrency=16)
        self._toolset = toolset
        self._snapshot = snapshot
        self._load = load
        self._reload = reload
        self.registry = registry
        self.workspace = workspace

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        workspace = request_workspace(request, default=self.workspace)
        await read_your_writes(request, workspace, toolset=self._toolset, load=self._load,
                               reload=self._reload)
        await reply(listing(workspace, self._toolset(workspace), self._snapshot(workspace),
                            self.registry))


def listing(workspace: str, toolset: ToolSet, snapshot: ConfigSnapshot | None,
            registry: Registry | None) -> dict[str, Any]:
    """The ``agent-services`` answer for ``workspace`` (see the module docstring)."""
    items: Mapping[str, Mapping[str, Any]] = {}
    configured_ids: set[str] = set()
    if snapshot is not None:
        items, _ = parse_snapshot(snapshot)
        # a key whose value is not JSON is still a configured service (its tools say why
        # they are not offered)
        configured_ids = set(snapshot.of("tool-service"))
    records = {r.id: r for r in registry.services(workspace)} if registry is not None else {}
    accepts = registry is not None and toolset.accepts_announcements
    statuses = {status.key: status for status in toolset.statuses()}
    services = []
    for id in sorted(configured_ids | set(records)):
        descriptor = items.get("tool-service", {}).get(id)
        record = records.get(id)
        live = _live(id, descriptor, record, registry)
        services.append(_service(id, descriptor, id in configured_ids, record, live=live,
                                 tools=_tools(id, items.get("tool", {}), toolset, statuses,
                                              record, accepts=accepts, live=live,
                                              workspace=workspace)))
    return {"workspace": workspace, "version": toolset.version,
            "accepts-announcements": accepts, "services": services}


def _request_queue(descriptor: Mapping[str, Any] | None,
                   record: ServiceRecord | None) -> str | None:
    # the configured descriptor's: it is the one the agent's tools call (configured items win)
    queue = descriptor.get("request-queue") if descriptor is not None else None
    if isinstance(queue, str):
        return queue
    if record is not None:
        offered = record.offered.descriptor.get("request-queue") if record.offered else None
        return offered if isinstance(offered, str) else record.request_queue
    return None


def _descriptor(descriptor: Mapping[str, Any] | None,
                record: ServiceRecord | None) -> dict[str, Any] | None:
    # configured items win, as for the request queue
    if isinstance(descriptor, Mapping):
        return dict(descriptor)
    if record is not None and record.offered is not None:
        return dict(record.offered.descriptor)
    return None


def _live(id: str, descriptor: Mapping[str, Any] | None, record: ServiceRecord | None,
          registry: Registry | None) -> int | None:
    queue = _request_queue(descriptor, record)
    if registry is None or queue is None:
        return None
    return registry.live_instances(id, queue)


def _service(id: str, descriptor: Mapping[str, Any] | None, configured: bool,
             record: ServiceRecord | None, *, live: int | None,
             tools: list[dict[str, Any]]) -> dict[str, Any]:
    instances = [] if record is None else [
        {"instance": name, "host": i.announcement.host, "pid": i.announcement.pid,
         "started": iso(i.announcement.started), "last-heartbeat": iso(i.last_seen),
         "ttl": i.announcement.ttl}
        for name, i in sorted(record.instances.items())]
    return {"id": id, "configured": configured, "announced": record is not None,
            "enabled": descriptor is None or descriptor.get("enabled", True) is not False,
            "request-queue": _request_queue(descriptor, record),
            "descriptor": _descriptor(descriptor, record),
            "live": live, "instances": instances,
            "last-seen": iso(record.last_seen) if record is not None else None,
            "tools": tools}


def _tools(id: str, configured: Mapping[str, Any], toolset: ToolSet,
           statuses: Mapping[str, ToolStatus], record: ServiceRecord | None, *,
           accepts: bool, live: int | None, workspace: str) -> list[dict[str, Any]]:
    """The tools of service ``id``: its configured tool items, the announced tools offered
    or refused, and the announced ones a configured item overrides (listed beside the
    configured item that does, when that item is one of this service's too)."""
    tools: list[dict[str, Any]] = []
    for key, item in configured.items():
        if item.get("type") == "tool-service" and item.get("service") == id:
            tools.append(_tool(key, item.get("name"), "configured", statuses.get(key), id,
                               live, version=toolset.version))
    for key, service in toolset.announced.items():
        if service == id:
            tools.append(_tool(key, _announced_name(record, key), "announced",
                               statuses.get(key), id, live, version=toolset.version))
    for key, service in toolset.overridden.items():
        if service == id:
            tools.append({"key": key, "name": _announced_name(record, key),
                          "source": "announced", "status": "overridden",
                          "reason": f"the configured item tool/{key} overrides it"})
    if not accepts and record is not None and record.offered is not None:
        # the workspace takes no announced tools: say so rather than hide them
        why = (f"workspace {workspace!r} does not take announced tools (settings/workspace "
               "has \"accept-announcements\": false)")
        tools.extend({"key": key, "name": _announced_name(record, key), "source": "announced",
                      "status": "not-offered", "reason": why}
                     for key in record.offered.tools)
    return sorted(tools, key=lambda t: (t["key"], t["source"] != "configured"))


def _tool(key: str, name: Any, source: str, status: ToolStatus | None, id: str,
          live: int | None, *, version: int) -> dict[str, Any]:
    tool: dict[str, Any] = {"key": key, "name": name if isinstance(name, str) else None,
                            "source": source}
    if status is None:  # the tool set is being rebuilt from a newer snapshot
        tool.update(status="not-offered",
                    reason=f"not built yet (the agent's tools are of config version {version})")
    elif status.status != "available":
        tool.update(name=status.name or tool["name"], status="not-offered",
                    reason=status.reason or "no reason given")
    elif live == 0:
        tool.update(name=status.name, status="no-live-instance",
                    reason=f"no live instance of tool service {id}; calls fail at once")
    else:
        tool.update(name=status.name, status="offered")
    return tool


def _announced_name(record: ServiceRecord | None, key: str) -> str | None:
    item = record.offered.tools.get(key) if record is not None and record.offered else None
    name = item.get("name") if item is not None else None
    return name if isinstance(name, str) else None


def iso(when: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC (``2025-01-31T12:00:00.123Z``), like the
    config store's times; ``None`` stays ``None``."""
    if when is None:
        return None
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
