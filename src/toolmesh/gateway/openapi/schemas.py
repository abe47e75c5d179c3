"""The request and response bodies of the gateway's routes, as JSON Schema (OpenAPI 3.1).

One function per service returns its ``{name: schema}`` components; :mod:`.document` puts them
under ``components/schemas`` and refers to them from the paths. The shapes are the wire's own
(``toolmesh.schema``, the config service, the mcp-tool service, the tool-service route):
where they change, change these too — the tests validate real responses against them.

Bodies forwarded from a service stay open (``additionalProperties`` allowed): a service on
the bus may add fields, and TrustGraph's clients ignore what they do not know. The gateway's
own bodies (errors, health, config) are closed, so a new field shows up here first.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _text(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


#: a field TrustGraph sends as JSON text and toolmesh's own callers as the object itself
def _object_or_json_text(description: str) -> Schema:
    return {"description": description,
            "oneOf": [{"type": "object"}, {"type": "string", "description": "the JSON text "
                                                                             "of an object"}]}


_WORKSPACE = _text("the workspace to act in; overrides the X-Workspace header "
                   "(default: `default`)")


def error_schemas() -> dict[str, Schema]:
    return {
        "Error": {
            "description": "How the gateway itself refuses or fails a request (any status "
                           "≥ 400). `type` is a short machine-readable string; `message` says "
                           "what went wrong and what to do.",
            "type": "object", "required": ["error"], "additionalProperties": False,
            "properties": {"error": {
                "type": "object", "required": ["type", "message"],
                "additionalProperties": False,
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}}}},
        },
        "ServiceError": {
            "description": "An error a service answered with, inside its HTTP 200 body "
                           "(TrustGraph's convention: clients look for an `error` field).",
            "type": "object", "required": ["type", "message"],
            "properties": {"type": {"type": "string", "examples": [
                "config-error", "agent-error", "mcp-error", "tool-error", "bad-request",
                "unknown-tool-service", "malformed-request", "service-stopping"]},
                "message": {"type": "string"}},
        },
    }


def health_schemas() -> dict[str, Schema]:
    return {"Health": {
        "type": "object", "required": ["status", "services"], "additionalProperties": False,
        "properties": {
            "status": {"const": "ok"},
            "services": {"type": "array", "items": {"type": "string"},
                         "description": "the names of the services the gateway forwards to "
                                        "(global and per-flow)"}}}}


def config_schemas() -> dict[str, Schema]:
    key = {"type": "object", "required": ["type", "key"],
           "properties": {"type": _text("the config type, e.g. `tool`, `tool-service`, `mcp`",
                                        minLength=1),
                          "key": _text("the item's key within its type", minLength=1)}}
    value = {"type": "object", "required": ["type", "key", "value"],
             "properties": {**key["properties"],
                            "value": _text("the item's value: JSON text by convention")}}
    got = {"type": "object", "required": ["type", "key", "value"],
           "properties": {**key["properties"],
                          "value": {"type": ["string", "null"],
                                    "description": "the value (secrets shown as `***`); null "
                                                   "for a key that is not stored"}}}
    operations = {
        "get": ({"keys": {"type": "array", "items": ref("ConfigKey")}}, ["keys"],
                "the values of `keys` (a missing key: value null)"),
        "list": ({"type": _text("a config type", minLength=1)}, ["type"],
                 "the keys of `type`, in `directory`"),
        "getvalues": ({"type": _text("a config type", minLength=1)}, ["type"],
                      "every item of `type`, in `values`"),
        "config": ({}, [], "the whole workspace, in `config`"),
        "put": ({"values": {"type": "array", "minItems": 1, "items": ref("ConfigValue")}},
                ["values"], "store `values` (one version for all; `tool-service`, `tool` and "
                            "`mcp` items are validated and the whole put refused if one is bad;"
                            " a secret sent back as `***` keeps the stored one)"),
        "delete": ({"keys": {"type": "array", "minItems": 1, "items": ref("ConfigKey")}},
                   ["keys"], "delete `keys`"),
    }
    return {
        "ConfigKey": key,
        "ConfigValue": value,
        "ConfigRequest": {
            "description": "One of TrustGraph's config operations, chosen by `operation`.",
            "oneOf": [{"title": op, "description": what, "type": "object",
                       "required": ["operation", *required],
                       "properties": {"operation": {"const": op}, "workspace": _WORKSPACE,
                                      **fields}}
                      for op, (fields, required, what) in operations.items()],
        },
        "ConfigResponse": {
            "description": "Fields that are null are left out. A refused operation answers "
                           "HTTP 200 with only `error` (type `config-error`).",
            "type": "object", "additionalProperties": False,
            "properties": {
                "version": {"type": "integer", "description": "the config version after the "
                                                              "operation"},
                "values": {"type": "array", "items": got, "description": "get, getvalues"},
                "directory": {"type": "array", "items": {"type": "string"},
                              "description": "list"},
                "config": {"type": "object", "description": "config: `{type: {key: value}}`",
                           "additionalProperties": {"type": "object",
                                                    "additionalProperties": {"type": "string"}}},
                "error": ref("ServiceError")}},
    }


def flow_schemas() -> dict[str, Schema]:
    return {
        "FlowRequest": {
            "description": "TrustGraph's flow service (global).",
            "oneOf": [
                {"title": "list-flows", "type": "object", "required": ["operation"],
                 "properties": {"operation": {"const": "list-flows"}, "workspace": _WORKSPACE}},
                {"title": "get-flow", "type": "object", "required": ["operation", "flow-id"],
                 "properties": {"operation": {"const": "get-flow"}, "workspace": _WORKSPACE,
                                "flow-id": _text("the flow's id", minLength=1)}}],
        },
        "FlowResponse": {
            "type": "object",
            "properties": {
                "flow-ids": {"type": "array", "items": {"type": "string"},
                             "description": "list-flows: the flows' ids"},
                "flow": _text("get-flow: the JSON text of the flow's definition: the fields of "
                              "its config item, `class-name` and `interfaces` (each per-flow "
                              "service's request and response queues)"),
                "error": ref("ServiceError")}},
    }


def agent_schemas() -> dict[str, Schema]:
    step = {"type": "object", "description": "one earlier ReAct step",
            "properties": {"thought": {"type": "string"}, "action": {"type": "string"},
                           "arguments": {}, "observation": {"type": "string"}}}
    return {
        "AgentRequest": {
            "type": "object", "required": ["question"],
            "properties": {
                "question": _text("what to ask the agent", minLength=1),
                "state": _text("the dialog's state: only tools applicable in it are offered"),
                "group": {"description": "tool groups to offer (default: every tool)",
                          "oneOf": [{"type": "string"},
                                    {"type": "array", "items": {"type": "string"}}]},
                "history": {"type": "array", "items": step},
                "user": _text("the user the tools run for (default `trustgraph`)"),
                "streaming": {"type": "boolean", "description": "REST answers one body "
                              "whatever this says; over the WebSocket, true streams chunks"},
                "workspace": _WORKSPACE}},
        "AgentMessage": {
            "description": "One agent message; over REST, the dialog's last one "
                           "(`end_of_dialog: true`). A failed dialog ends with "
                           "`message_type: error` and an `error`.",
            "type": "object",
            "required": ["message_type", "content", "end_of_message", "end_of_dialog"],
            "properties": {
                "message_type": {"enum": ["thought", "observation", "answer", "error",
                                          "progress"],
                                 "description": "`progress`: a tool's progress report "
                                                "(toolmesh's own; TrustGraph's clients skip it)"},
                "content": {"type": "string"},
                "end_of_message": {"type": "boolean"},
                "end_of_dialog": {"type": "boolean"},
                "message_id": {"type": "string"},
                "answer": _text("the whole answer, on the final answer message (for older "
                                "clients)"),
                "progress": {"type": "object",
                             "description": "on `progress` messages: the tool and its report",
                             "properties": {"tool": {"type": "string"},
                                            "progress": {"type": "number"},
                                            "total": {"type": "number"},
                                            "message": {"type": "string"}}},
                "error": ref("ServiceError")}},
    }


def mcp_tool_schemas() -> dict[str, Schema]:
    return {
        "McpToolRequest": {
            "type": "object", "required": ["name"],
            "properties": {
                "name": _text("the id of an `mcp` config item", minLength=1),
                "parameters": _object_or_json_text("the tool's arguments"),
                "operation": {"enum": ["invoke", "call", "describe"], "default": "invoke",
                              "description": "`describe` answers `object` = the JSON text of "
                                             "the remote tool's name, description and "
                                             "inputSchema"},
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
                "workspace": _WORKSPACE}},
        "McpToolResponse": {
            "description": "`text` and/or `object`, or `error` (a tool that ran and failed: "
                           "type `tool-error`).",
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "object": _text("the JSON text of the tool's structured content"),
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


def tool_service_schemas() -> dict[str, Schema]:
    return {
        "ToolServiceRequest": {
            "type": "object", "required": ["id"],
            "properties": {
                "id": _text("the key of a `tool-service` config item", minLength=1),
                "config": _object_or_json_text("the tool's config (its config-params)"),
                "arguments": _object_or_json_text("the call's arguments"),
                "user": _text("the user the call runs for (default `trustgraph`)"),
                "timeout": {"type": "number", "exclusiveMinimum": 0,
                            "description": "seconds to wait for the service (default 60; at "
                                           "most the route's deadline, 130 s by default)"},
                "streaming": {"type": "boolean",
                              "description": "REST joins the pieces into one body"},
                "workspace": _WORKSPACE}},
        "ToolServiceResponse": {
            "type": "object", "required": ["end_of_stream"],
            "properties": {
                "response": _text("the observation text"),
                "end_of_stream": {"type": "boolean"},
                "error": ref("ServiceError")}},
    }


def agent_tools_schemas() -> dict[str, Schema]:
    return {
        "AgentToolsRequest": {
            "type": "object", "properties": {
                "workspace": _WORKSPACE,
                "version": {"type": "integer",
                            "description": "the config version the caller last saw (from a "
                                           "config answer): an agent with older tools loads "
                                           "the config first, so a put shows at once"}}},
        "AgentToolsResponse": {
            "description": "The agent's tool items by key, each offered to the LLM or not and "
                           "why; or `error` (`bad-request`: the agent serves another "
                           "workspace).",
            "type": "object",
            "properties": {
                "workspace": _text("the workspace the agent serves"),
                "version": {"type": "integer", "description": "the config version the tools "
                                                              "were built from"},
                "tools": {"type": "array", "items": ref("ToolStatus")},
                "error": ref("ServiceError")}},
        "ToolStatus": {
            "type": "object", "required": ["key", "status"],
            "properties": {
                "key": _text("the key of the `tool` config item"),
                "name": {"type": ["string", "null"], "description": "the name the LLM "
                                                                    "calls it by"},
                "type": {"type": ["string", "null"], "description": "the item's `type`"},
                "status": {"enum": ["available", "not-offered"]},
                "reason": _text("why it is not offered: its `mcp` or `tool-service` item is "
                                "missing, its MCP server lacks the remote tool or does not "
                                "answer, its type is not available here, its name is taken")}},
    }


def socket_schemas() -> dict[str, Schema]:
    request_id = {"type": ["string", "integer"], "description": "chosen by the client; "
                                                               "every frame answering the "
                                                               "request carries it"}
    return {
        "SocketAuthFrame": {
            "type": "object", "required": ["type", "token"],
            "properties": {"type": {"const": "auth"}, "token": {"type": "string"}}},
        "SocketAuthReply": {
            "oneOf": [{"type": "object", "required": ["type", "default_workspace"],
                       "properties": {"type": {"const": "auth-ok"},
                                      "default_workspace": {"type": "string"}}},
                      {"type": "object", "required": ["type", "error"],
                       "properties": {"type": {"const": "auth-failed"},
                                      "error": {"type": "string"}}}]},
        "SocketRequestFrame": {
            "type": "object", "required": ["id", "service", "request"],
            "properties": {
                "id": request_id,
                "service": _text("a service name: config, flow, agent, mcp-tool, "
                                 "tool-service, agent-tools"),
                "flow": _text("the flow of a per-flow service (default `default`)"),
                "workspace": _text("the workspace (default `default`)"),
                "timeout": {"type": "number", "exclusiveMinimum": 0,
                            "description": "seconds, as X-Timeout on REST"},
                "request": {"type": "object", "description": "the body the REST route of the "
                                                             "service takes"}}},
        "SocketResponseFrame": {
            "type": "object", "required": ["id", "complete"],
            "properties": {
                "id": {"type": ["string", "integer", "null"],
                       "description": "null only for a frame that had no usable id"},
                "response": {"type": "object", "description": "one response of the service "
                                                              "(the REST route's body shape)"},
                "complete": {"type": "boolean", "description": "true on the request's last "
                                                               "frame"},
                "error": {"type": "object", "required": ["type", "message"],
                          "properties": {"type": {"type": "string"},
                                         "message": {"type": "string"}}}}},
    }


def all_schemas() -> dict[str, Schema]:
    return {**error_schemas(), **health_schemas(), **config_schemas(), **flow_schemas(),
            **agent_schemas(), **mcp_tool_schemas(), **tool_service_schemas(),
            **agent_tools_schemas(), **socket_schemas()}
