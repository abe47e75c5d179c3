"""The names of the operator's MCP address lists (:mod:`toolmesh.mcp.addresses`), here so that
building the command line does not load the MCP client."""

from __future__ import annotations

ALLOW_FLAG = "--mcp-allow"
DENY_FLAG = "--mcp-deny"
ALLOW_ENV = "TOOLMESH_MCP_ALLOW"
DENY_ENV = "TOOLMESH_MCP_DENY"
