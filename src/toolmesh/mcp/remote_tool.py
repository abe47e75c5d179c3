"""A tool as an MCP server lists it: plain data, apart from the MCP SDK.

It lives here, not in :mod:`toolmesh.mcp.connection` (which loads the SDK), so that what only
reads listed tools (the mcp-tool service describing them) loads without the SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool as the server lists it (``tools/list``)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    #: the tool's ``execution.taskSupport``: "required" means the server runs it only as a
    #: task (MCP task augmentation), which this client does not do
    task_support: str | None = None
    #: the tool's ``annotations`` (``readOnlyHint``, ``destructiveHint``...), as listed
    annotations: dict[str, Any] | None = None

    @property
    def needs_task(self) -> bool:
        return self.task_support == "required"
