"""The schemas of the ``mcp-tool`` route: calls, descriptions, and sign-ins (docs/mcp-oauth.md)."""

from __future__ import annotations

from toolmesh.gateway.openapi.schemas import (
    APPROVED,
    IDEMPOTENCY_KEY,
    WORKSPACE,
    Schema,
    object_or_jsontext,
    ref,
    text,
)


def mcp_tool_schemas() -> dict[str, Schema]:
    return {
        "McpToolRequest": {
            "type": "object",
            "description": "A call (`invoke`, the default), a description, or a sign-in "
                           "operation of an item with OAuth `auth` (docs/mcp-oauth.md). Every "
                           "operation but `logins` and `login-finish` names the item.",
            "properties": {
                "name": text("the id of an `mcp` config item", minLength=1),
                "parameters": object_or_jsontext("the tool's arguments"),
                "approved": APPROVED,
                "idempotency-key": IDEMPOTENCY_KEY,
                "operation": {"enum": ["invoke", "call", "describe", "list-tools", "login",
                                       "login-finish", "logins", "logout"],
                              "default": "invoke",
                              "description": "`describe` answers `object` = the JSON text of "
                                             "the remote tool's name, description and "
                                             "inputSchema; `list-tools` answers `object` = "
                                             "the JSON text of a list of those, one per "
                                             "tool the item's server lists. `login` starts "
                                             "a sign-in for the caller (`object`: url, "
                                             "state, expires, item, host, issuer); "
                                             "`login-finish` keeps it (only for the identity "
                                             "that started it); `logins` lists the caller's "
                                             "and the workspace's sign-ins (never a token); "
                                             "`logout` forgets one"},
                "redirect-uri": text("`login`: where the browser comes back, an http "
                                     "loopback address only (`toolmesh mcp login` "
                                     "listens there); default: the gateway's callback"),
                "scope": text("`login`: scopes to ask for besides the server's"),
                "state": text("`login-finish`: the callback's `state`"),
                "code": text("`login-finish`: the callback's `code`"),
                "iss": text("`login-finish`: the callback's `iss` (RFC 9207)"),
                "error": text("`login-finish`: the callback's `error` (the person said no)"),
                "timeout": {"type": "number", "exclusiveMinimum": 0,
                            "description": "seconds the MCP call may take; each progress "
                                           "report of the server grants this much more"},
                "max-timeout": {"type": "number", "exclusiveMinimum": 0,
                                "description": "the most the call may take while the server "
                                               "reports progress (default 600, and never "
                                               "past the route's deadline)"},
                "progress": {"type": "boolean", "default": False,
                             "description": "send each progress report as a response "
                                          "(`end_of_stream: false`) before the final one "
                                          "(WebSocket; a REST call returns the final one)"},
                "workspace": WORKSPACE}},
        "McpToolResponse": {
            "description": "`text` and/or `object`, or `error` (a tool that ran and failed: "
                           "type `tool-error`).",
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "object": text("the JSON text of the tool's structured content"),
                "progress": {"type": "object",
                             "description": "a progress report (only with `progress: true`)",
                             "properties": {"progress": {"type": "number"},
                                            "total": {"type": "number"},
                                            "message": {"type": "string"}}},
                "end_of_stream": {"type": "boolean",
                                  "description": "false on progress reports; absent on the "
                                                 "final response"},
                "error": ref("ServiceError")}},
    }
