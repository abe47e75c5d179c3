"""toolmesh as an MCP server: a workspace's tools for every MCP client (docs/mcp-server.md).

One way in: the gateway serves :class:`McpEndpoint` at ``/mcp``, which lists and calls the
workspace's tools through the agent's ``tool-calls`` service
(:mod:`toolmesh.agent.tool_calls`); ``toolmesh mcp serve --stdio`` runs
:mod:`toolmesh.mcp_endpoint.stdio_bridge`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolmesh.mcp_endpoint.endpoint import McpEndpoint

__all__ = ["McpEndpoint"]


def __getattr__(name: str) -> object:
    # loaded at first use: the stdio bridge needs neither the MCP SDK's server nor the agent
    if name == "McpEndpoint":
        from toolmesh.mcp_endpoint.endpoint import McpEndpoint

        return McpEndpoint
    raise AttributeError(name)
