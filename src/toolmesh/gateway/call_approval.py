"""The gateway's check that no route runs a call a person must approve without that person.

Dialogs (the agent) and ``/mcp`` ask a person before a call whose approval policy says so
(docs/approvals.md). The ``tool-service`` and ``mcp-tool`` routes call a tool service or an MCP
server directly, with no dialog to pause and no one to ask, so such a call is refused there —
``403 approval-required``, naming the policy that asks — unless the caller says yes itself:
a token that may ``approve`` in the workspace sends ``"approved": "<digest>"``, the digest of
this very call (:func:`direct_digest`; the refusal tells it). Anyone else uses a dialog, where
a person with ``approve`` answers.

:data:`ROUTES` names every route that runs a tool; each other route runs none. The tests walk
the gateway's routes against it, so a new route that runs tools must be added here.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolmesh.approvals import Policy
from toolmesh.approvals.digest import call_digest
from toolmesh.approvals.direct import NEEDS_ANNOTATIONS, Decision, mcp_call, tool_service_call
from toolmesh.errors import RequestError, ToolmeshError
from toolmesh.gateway.auth import Identity
from toolmesh.gateway.tool_service import MISSING, ToolServiceEndpoint
from toolmesh.schema.json_object import json_object

log = logging.getLogger("toolmesh.gateway")

#: the request field that carries the caller's own approval of a direct call
APPROVED = "approved"
#: seconds an MCP tool's annotations are trusted before they are listed again
ANNOTATIONS_TTL = 60.0
#: the most MCP items whose annotations are kept
ANNOTATIONS_KEPT = 4096



class ApprovalRequired(ToolmeshError):
    """A direct call that waits for a person, sent without their yes."""

    type = "approval-required"


@dataclass(frozen=True)
class Route:
    """How a route's request names the call it makes."""

    #: the field naming the tool service or the ``mcp`` item
    target: str
    #: the field holding the arguments (an object or its JSON text)
    arguments: str
    #: the config type ``target`` is a key of
    kind: str


#: every gateway route (by its service name) that runs a tool; ``/mcp`` and dialogs go through
#: the agent, which asks a person itself
ROUTES: dict[str, Route] = {
    "tool-service": Route(target="id", arguments="arguments", kind="tool-service"),
    "mcp-tool": Route(target="name", arguments="parameters", kind="mcp"),
}
#: the routes that run tools only through the agent, which applies the approval policy itself
THROUGH_THE_AGENT = frozenset({"agent"})
#: the ``mcp-tool`` operations that call the tool; the others (describe, list-tools, the
#: sign-ins) only ask the server about its tools, and wait for no one
MCP_CALLS = frozenset({"", "invoke", "call"})


def direct_digest(route: str, request: Mapping[str, Any]) -> str:
    """The digest a caller approves a direct call with: of the service or item and the exact
    arguments — for a tool service, its ``config`` too, which the caller also chooses."""
    spec = ROUTES[route]
    arguments = _object(request.get(spec.arguments), spec.arguments)
    if spec.kind == "tool-service":
        arguments = {"config": _object(request.get("config"), "config"),
                     "arguments": arguments}
    return call_digest(str(request.get(spec.target)), arguments)


def _object(value: Any, name: str) -> dict[str, Any]:
    try:
        return json_object(value, name=f"'{name}'")
    except ValueError:
        return {"unreadable": str(value)}  # the route refuses it; the digest just must differ


class CallApproval:
    """Refuses a direct call a person must approve (see the module)."""

    def __init__(self, *, endpoints: Mapping[str, Any], default: Policy) -> None:
        """``endpoints``: the gateway's, by name, as they are when a call comes (a route
        replaced later is the one asked): the ``tool-service`` route's config client, cache
        and announcements are read, and the ``mcp-tool`` route describes MCP tools."""
        self.default = default
        self._endpoints = endpoints
        #: (workspace, flow, mcp id) -> (read at, annotations)
        self._annotations: OrderedDict[tuple[str, str, str],
                                       tuple[float, Mapping[str, Any] | None]] = OrderedDict()

    def _tool_services(self) -> ToolServiceEndpoint:
        route = self._endpoints.get("tool-service")
        if not isinstance(route, ToolServiceEndpoint):
            raise RequestError("the gateway has no tool-service route to read approval "
                               "policies with", type="service-unavailable")
        return route

    async def admit(self, service: str, request: dict[str, Any], *, workspace: str, flow: str,
                    caller: Identity | None) -> dict[str, Any]:
        """``request`` as the route sends it on (without ``approved``), or
        :class:`ApprovalRequired` when the call waits for a person who has not said yes."""
        spec = ROUTES.get(service)
        if spec is None:
            return request
        operation = request.get("operation")
        if service == "mcp-tool" and isinstance(operation, str) and operation not in MCP_CALLS:
            return request  # no tool runs
        approved = request.get(APPROVED)
        if APPROVED in request:
            request = {k: v for k, v in request.items() if k != APPROVED}
        target = request.get(spec.target)
        if not isinstance(target, str) or not target:
            return request  # the route refuses it with its own message
        decision = await self._decide(spec, target, workspace=workspace, flow=flow)
        if not decision.required:
            return request
        digest = direct_digest(service, request)
        may = caller is None or caller.may("approve")
        who = "local" if caller is None else caller.id
        if may and approved == digest:
            log.info("direct %s call of %r (%s) approved by its caller %s (%s)", service,
                     target, digest, who, decision.why)
            return request
        what = f"{spec.kind}/{target}" if spec.kind == "mcp" else f"tool service {target!r}"
        asks = f"a call of {what} waits for a person's approval ({decision.why})"
        if not may:
            raise ApprovalRequired(
                f"{asks}, and this route cannot ask one: call it through the agent (a "
                "dialog pauses until someone with the 'approve' capability answers), or with "
                "a token that may 'approve' in this workspace")
        if approved is None:
            raise ApprovalRequired(
                f"{asks}: to approve it yourself (you may 'approve'), send this very request "
                f"again with \"approved\": \"{digest}\" (the CLI: --approved {digest}); or "
                "call it through the agent")
        raise ApprovalRequired(f"{asks}: 'approved' is not the digest of this call (it is "
                               f"{digest}); an approval covers one exact call")

    async def _decide(self, spec: Route, target: str, *, workspace: str, flow: str) -> Decision:
        tools = await self._values(workspace, "tool")
        configured = {key for key, _ in tools}
        tools += [(key, item) for key, item in self._tool_services().announced_tools(workspace)
                  if key not in configured]
        if spec.kind == "tool-service":
            return tool_service_call(target, tools, default=self.default)
        item = dict(await self._values(workspace, "mcp", key=target)).get(target)
        if item is None:
            return Decision(False)  # no such item: nothing can run (the service says so)
        decision = mcp_call(target, item, tools, default=self.default)
        if decision is NEEDS_ANNOTATIONS:
            annotations = await self._annotations_of(workspace, flow, target)
            decision = mcp_call(target, item, tools, default=self.default,
                                annotations=annotations)
        return decision

    async def _values(self, workspace: str, type: str,
                      key: str | None = None) -> list[tuple[str, Any]]:
        """``(key, value)`` of the items of ``type`` (or of ``type/key`` only), read once per
        config version (the tool-service route's cache, under names of their own)."""
        name = f"\0approval:{type}" + (f"/{key}" if key is not None else "")
        route = self._tool_services()
        cached = route.descriptors.get(workspace, name)
        if cached is MISSING:
            if key is None:
                request = {"operation": "getvalues", "type": type, "workspace": workspace}
            else:
                request = {"operation": "get", "workspace": workspace,
                           "keys": [{"type": type, "key": key}]}
            try:
                answer = await route.config.request(request)
            except RequestError as e:
                # the config service refused the workspace's name (NUL, a lone surrogate):
                # the caller's mistake (400), as on the flows route, not a failed service (502)
                refused = e.type == "config-error"
                raise RequestError(f"the approval policies of workspace {workspace!r} could "
                                   f"not be read: {e.message}",
                                   type="bad-request" if refused else e.type) from None
            pairs = [(str(v.get("key", key)), v.get("value")) for v in answer.get("values") or ()
                     if isinstance(v, dict) and v.get("value") is not None]
            cached = json.dumps(pairs)
            route.descriptors.put(workspace, name, cached, version=answer.get("version"))
        return [tuple(pair) for pair in json.loads(cached or "[]")]  # type: ignore[misc]

    async def _annotations_of(self, workspace: str, flow: str,
                              mcp_id: str) -> Mapping[str, Any] | None:
        key = (workspace, flow, mcp_id)
        kept = self._annotations.get(key)
        now = time.monotonic()
        if kept is not None and now - kept[0] < ANNOTATIONS_TTL:
            return kept[1]
        try:
            annotations = await describe(self._endpoints.get("mcp-tool"), workspace, flow,
                                         mcp_id)
        except ToolmeshError as e:
            # A server that cannot list its tools now marks none (as for the agent, which
            # reads an unknown tool's marks as none): the operator's default decides. Marks
            # are the server's word anyway, and the call itself meets the same server; not
            # kept, so the next call asks again.
            log.info("mcp/%s in workspace %r did not list its tool's annotations (%s): the "
                     "operator's default decides whether the call waits", mcp_id, workspace,
                     e.message)
            return None
        self._annotations[key] = (now, annotations)
        self._annotations.move_to_end(key)
        while len(self._annotations) > ANNOTATIONS_KEPT:
            self._annotations.popitem(last=False)
        return annotations


async def describe(endpoint: Any, workspace: str, flow: str,
                   mcp_id: str) -> Mapping[str, Any] | None:
    """The annotations of the tool of ``mcp`` item ``mcp_id``, as the gateway's ``mcp-tool``
    ``endpoint`` describes it (``None``: it lists none); :class:`ToolmeshError` if it cannot."""
    if endpoint is None:
        raise ToolmeshError("the gateway has no mcp-tool route")
    answer: dict[str, Any] = {}
    async for answer, final in endpoint.call(
            {"name": mcp_id, "operation": "describe", "workspace": workspace},
            workspace=workspace, flow=flow):
        if final:
            break
    error = answer.get("error")
    if isinstance(error, dict):
        raise ToolmeshError(str(error.get("message") or error.get("type")))
    try:
        described = json.loads(answer.get("object") or "null")
    except (TypeError, ValueError):
        described = None
    annotations = described.get("annotations") if isinstance(described, dict) else None
    return annotations if isinstance(annotations, Mapping) else None
