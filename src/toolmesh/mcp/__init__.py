"""The MCP tool layer: pooled, supervised sessions to MCP servers and the mcp-tool service.

    from toolmesh.mcp import McpServer, SessionPool

    pool = SessionPool()
    server = McpServer.from_config("weather", {"url": "http://127.0.0.1:8000/mcp"})
    result = await pool.call_tool(server, {"city": "Paris"}, timeout=30)
    await pool.close()

On the bus, :class:`McpToolService` serves TrustGraph's ``mcp-tool`` requests for the servers
in ``mcp`` config items, and :class:`McpToolClient` calls it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolmesh.mcp.client import MCP_TOOL_REQUEST_QUEUE, MCP_TOOL_RESPONSE_QUEUE, McpToolClient
    from toolmesh.mcp.config import McpServer, Transport
    from toolmesh.mcp.errors import McpError
    from toolmesh.mcp.remote_tool import RemoteTool
    from toolmesh.mcp.results import McpResult, content_text, result_text, to_result
    from toolmesh.mcp.service import McpToolService, parse_parameters
    from toolmesh.mcp.sessions import SessionPool

#: where each public name lives; loaded at first use, so that importing one light module of
#: this package (a CLI reading progress reports) does not load the MCP SDK (~1 s)
_HOMES = {
    "McpServer": "config", "Transport": "config", "McpError": "errors",
    "McpResult": "results", "content_text": "results", "result_text": "results",
    "to_result": "results", "MCP_TOOL_REQUEST_QUEUE": "client",
    "MCP_TOOL_RESPONSE_QUEUE": "client", "McpToolClient": "client",
    "McpToolService": "service", "parse_parameters": "service", "RemoteTool": "remote_tool",
    "SessionPool": "sessions",
}

__all__ = [
    "MCP_TOOL_REQUEST_QUEUE", "MCP_TOOL_RESPONSE_QUEUE", "McpError", "McpResult", "McpServer",
    "McpToolClient", "McpToolService", "RemoteTool", "SessionPool", "Transport",
    "content_text", "parse_parameters", "result_text", "to_result",
]
assert sorted(__all__) == sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
