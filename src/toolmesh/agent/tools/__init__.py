"""Tool types the agent can offer, and the registry they plug into."""

from toolmesh.agent.tools import mcp_tool, prompting, tool_service
from toolmesh.agent.tools.base import Call, Tool, ToolBuildError, ToolError, ToolInfo
from toolmesh.agent.tools.registry import build_tool, register_tool_type, tool_types

register_tool_type("tool-service", tool_service.build)
register_tool_type("text-completion", prompting.build_text_completion)
register_tool_type("prompt", prompting.build_prompt)
register_tool_type("mcp-tool", mcp_tool.build)

__all__ = ["Call", "Tool", "ToolBuildError", "ToolError", "ToolInfo", "build_tool",
           "register_tool_type", "tool_types"]
