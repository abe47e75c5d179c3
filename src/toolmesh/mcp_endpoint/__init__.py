"""toolmesh as an MCP server: a workspace's tools for every MCP client (docs/mcp-server.md).

One way in: the gateway serves :class:`McpEndpoint` at ``/mcp``; the agent serves
:class:`ToolCallsService`, which lists and calls its tools for it; ``toolmesh mcp serve
--stdio`` runs :mod:`toolmesh.mcp_endpoint.stdio_bridge`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolmesh.mcp_endpoint.calls import ToolCallsService
    from toolmesh.mcp_endpoint.endpoint import McpEndpoint

__all__ = ["McpEndpoint", "ToolCallsService"]


def __getattr__(name: str) -> object:
    # Each side loads only its own: the agent's calls service needs the agent, the gateway's
    # endpoint the MCP SDK's server, and the stdio bridge neither.
    if name == "ToolCallsService":
        from toolmesh.mcp_endpoint.calls import ToolCallsService

        return ToolCallsService
    if name == "McpEndpoint":
        from toolmesh.mcp_endpoint.endpoint import McpEndpoint

        return McpEndpoint
    raise AttributeError(name)
