"""toolmesh as an MCP server: a workspace's tools for every MCP client (docs/mcp-server.md).

One way in: the gateway serves :class:`McpEndpoint` at ``/mcp``; the agent serves
:class:`ToolCallsService`, which lists and calls its tools for it.
"""

from __future__ import annotations

from toolmesh.mcp_endpoint.calls import (
    TOOL_CALLS_REQUEST_QUEUE,
    TOOL_CALLS_RESPONSE_QUEUE,
    ToolCallsService,
)

__all__ = ["TOOL_CALLS_REQUEST_QUEUE", "TOOL_CALLS_RESPONSE_QUEUE", "McpEndpoint",
           "ToolCallsService"]


def __getattr__(name: str) -> object:
    # the gateway's side loads the MCP SDK's server (~0.5 s): only a gateway needs it
    if name == "McpEndpoint":
        from toolmesh.mcp_endpoint.endpoint import McpEndpoint

        return McpEndpoint
    raise AttributeError(name)
