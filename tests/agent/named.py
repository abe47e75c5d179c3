"""Tools built straight from config-like fields, whose calls answer their own name: for
tests of what the agent shows and checks (selection, grounding), not of what tools do."""

from __future__ import annotations

from typing import Any

from toolmesh.agent.arguments import arguments_from_config
from toolmesh.agent.tools import Tool, ToolInfo
from toolmesh.agent.tools.base import Call


class Named(Tool):
    async def invoke(self, arguments: dict[str, Any], call: Call) -> str:
        return self.name


def tool(name: str, description: str, *arguments: dict[str, Any]) -> Tool:
    """A tool of ``name`` with ``description`` and the config-form ``arguments``."""
    return Named(ToolInfo(key=name, name=name, description=description,
                          arguments=arguments_from_config(list(arguments))))
