"""The open registry of tool types: ``type`` field of a tool config item -> builder.

Adding a type (``mcp-tool``, a user's own) is one :func:`register_tool_type` call; the ReAct
loop never changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from toolmesh.agent.tools.base import Tool, ToolBuildError
from toolmesh.agent.tools.context import BuildContext
from toolmesh.schema.tool_types import not_available

Builder = Callable[[str, Mapping[str, Any], BuildContext], Awaitable[Tool]]

_BUILDERS: dict[str, Builder] = {}


def register_tool_type(name: str, builder: Builder) -> None:
    """Make ``type: name`` tool config items buildable by ``builder(key, config, context)``."""
    _BUILDERS[name] = builder


def tool_types() -> list[str]:
    return sorted(_BUILDERS)


async def build_tool(key: str, config: Mapping[str, Any], context: BuildContext) -> Tool:
    """Build the tool of one config item, or raise :class:`ToolBuildError`."""
    tool_type = config.get("type")
    builder = _BUILDERS.get(tool_type) if isinstance(tool_type, str) else None
    if builder is None:
        # an item stored before its type was refused on put (or put straight into the store)
        unavailable = not_available(tool_type) if isinstance(tool_type, str) else None
        if unavailable is not None:
            raise ToolBuildError(f"tool/{key}: {unavailable}")
        raise ToolBuildError(f"tool/{key}: tool type {tool_type!r} is not available in this "
                             f"agent (available: {', '.join(tool_types())})")
    return await builder(key, config, context)
