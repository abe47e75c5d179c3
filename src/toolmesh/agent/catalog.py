"""A workspace's tools as an MCP server lists them (``tools/list``): name, description, the
input schema from their declared (or discovered) arguments, and what an MCP server behind
said of its tool (``annotations``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolmesh.agent.tools import Tool

#: the tools an outside caller is offered: every group, and no dialog state (a tool offered
#: only in some state of a dialog is a step of that dialog, not a tool of its own)
GROUPS = ("*",)


def describe(tool: Tool) -> dict[str, Any]:
    """``tool`` as one entry of ``tools/list``."""
    entry: dict[str, Any] = {"name": tool.name, "description": tool.info.description,
                             "inputSchema": tool.parameters()}
    annotations = _annotations(tool)
    if annotations:
        entry["annotations"] = annotations
    return entry


def catalog(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """The entries of ``tools``, by name (names are unique in a tool set: an item key each)."""
    return [describe(tool) for tool in sorted(tools, key=lambda t: t.name)]


def _annotations(tool: Tool) -> dict[str, Any] | None:
    schemas = getattr(tool, "schemas", None)  # an MCP tool's: its server listed them
    mcp_id = getattr(tool, "mcp_id", None)
    if schemas is None or mcp_id is None:
        return None
    found = schemas.annotations(mcp_id, workspace=getattr(tool, "workspace", "default"))
    return dict(found) if found else None
