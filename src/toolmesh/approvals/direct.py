"""Whether a call made *around* the agent — straight to a tool service or an MCP item, as the
gateway's ``tool-service`` and ``mcp-tool`` routes make them — waits for a person.

Approval is a property of the call, not of the route that carries it (docs/approvals.md): the
same sources decide as for the agent's tools, in the same order. A direct call names a service
or an MCP item, not a ``tool`` item, and its caller picks the config and arguments, so it may
stand in for any tool item that uses that service or item: it waits when **any** of those
would. A service or item that no tool item uses is decided by its own policy (an ``mcp``
item's ``approval``, then its tool's annotations) and then the operator's default.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from toolmesh.approvals.policy import Policy, PolicyError, parse_policy, required


@dataclass(frozen=True)
class Decision:
    """Whether a direct call waits for a person, and the source that said so."""

    required: bool
    #: the policy that decided, as a user can find it (``tool/send says "approval":
    #: "always"``, ``the operator's default is --approval always``)
    why: str = ""


#: a decision that annotations are needed for (``mcp``: the server's tool marks)
NEEDS_ANNOTATIONS = Decision(required=False, why="annotations")


def _item(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _policy(item: Mapping[str, Any], where: str) -> Policy | None:
    try:
        return parse_policy(item.get("approval"), where=where)
    except PolicyError:
        return "always"  # refused when put; an item stored around the check asks, to be safe


def _said(where: str, policy: Policy) -> str:
    return f'{where} says "approval": "{policy}"'


def _default(default: Policy) -> Decision:
    return Decision(required=default == "always",
                    why=f"the operator's default is --approval {default}")


def tool_service_call(service: str, tools: Iterable[tuple[str, Any]], *,
                      default: Policy) -> Decision:
    """A direct call of tool service ``service``; ``tools``: the workspace's ``tool`` items as
    ``(key, value)``."""
    used = False
    for key, value in tools:
        item = _item(value)
        if item is None or item.get("type") != "tool-service" or item.get("service") != service:
            continue
        used = True
        own = _policy(item, f"tool/{key}")
        if required(tool=own, default=default):
            return Decision(True, _said(f"tool/{key}", own) if own else _default(default).why)
    return _default(default) if not used else Decision(False)


def mcp_call(mcp_id: str, item: Any, tools: Iterable[tuple[str, Any]], *, default: Policy,
             annotations: Mapping[str, Any] | None | object = NEEDS_ANNOTATIONS) -> Decision:
    """A direct call of ``mcp`` item ``mcp_id`` (its stored ``item``). Returns
    :data:`NEEDS_ANNOTATIONS` when the answer depends on the annotations its server lists and
    ``annotations`` were not given; call again with them (``None``: the server lists none)."""
    server = _policy(_item(item) or {}, f"mcp/{mcp_id}")
    owns: list[tuple[str, Policy | None]] = []
    for key, value in tools:
        tool = _item(value)
        if tool is not None and tool.get("type") == "mcp-tool" \
                and str(tool.get("mcp-tool")) == mcp_id:
            owns.append((f"tool/{key}", _policy(tool, f"tool/{key}")))
    if not owns:
        owns.append(("", None))  # no tool item: the item's own policy, then on
    for where, own in owns:
        if own == "always":
            return Decision(True, _said(where, own))
        if own is None and server is not None:
            if server == "always":
                return Decision(True, _said(f"mcp/{mcp_id}", server))
            continue
        if own is None:
            if annotations is NEEDS_ANNOTATIONS:
                return NEEDS_ANNOTATIONS
            marks = annotations if isinstance(annotations, Mapping) else None
            if marks and marks.get("destructiveHint") is True:
                return Decision(True, f"its MCP server marks the tool destructiveHint (mcp/{mcp_id})")
            if not (marks and marks.get("readOnlyHint") is True) and default == "always":
                return _default(default)
    return Decision(False)
