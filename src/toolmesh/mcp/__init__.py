"""The MCP tool layer: pooled, supervised sessions to MCP servers and the mcp-tool service.

    from toolmesh.mcp import McpServer, SessionPool

    pool = SessionPool()
    server = McpServer.from_config("weather", {"url": "http://127.0.0.1:8000/mcp"})
    result = await pool.call_tool(server, {"city": "Paris"}, timeout=30)
    await pool.close()

On the bus, :class:`McpToolService` serves TrustGraph's ``mcp-tool`` requests for the servers
in ``mcp`` config items, and :class:`McpToolClient` calls it.
"""

from toolmesh.mcp.config import McpServer, Transport
from toolmesh.mcp.errors import McpError
from toolmesh.mcp.results import McpResult, content_text, result_text, to_result
from toolmesh.mcp.service import (
    MCP_TOOL_REQUEST_QUEUE,
    MCP_TOOL_RESPONSE_QUEUE,
    McpToolClient,
    McpToolService,
    parse_parameters,
)
from toolmesh.mcp.sessions import RemoteTool, SessionPool

__all__ = [
    "MCP_TOOL_REQUEST_QUEUE", "MCP_TOOL_RESPONSE_QUEUE", "McpError", "McpResult", "McpServer",
    "McpToolClient", "McpToolService", "RemoteTool", "SessionPool", "Transport",
    "content_text", "parse_parameters", "result_text", "to_result",
]
