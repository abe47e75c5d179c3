"""The bodies of the agent's status services, ``agent-tools`` and ``agent-services``, as
JSON Schema (OpenAPI 3.1): what the agent offers, and which tool services are alive
(:mod:`.schemas` has the other routes')."""

from __future__ import annotations

from toolmesh.gateway.openapi.schemas import WORKSPACE, Schema, ref, text


def status_schemas() -> dict[str, Schema]:
    return {**agent_tools_schemas(), **agent_services_schemas(), **dialogs_schemas(),
            **approvals_schemas()}


def approvals_schemas() -> dict[str, Schema]:
    when = {"type": "string", "format": "date-time"}
    return {
        "ApprovalsRequest": {
            "type": "object", "properties": {
                "workspace": WORKSPACE,
                "operation": {"enum": ["list", "approve", "deny", "answer"],
                              "description": "default: list"},
                "dialog": text("the dialog of the call answered"),
                "call": text("the call answered (its key, as the request shows it)"),
                "digest": text("the digest of the call approved (`approve`; `deny` may "
                               "name it)"),
                "reason": text("why the call is denied: the model is told (`deny`)"),
                "action": {"enum": ["accept", "decline", "cancel"],
                           "description": "the answer to a question (`answer`)"},
                "content": {"type": "object", "description": "the form's values (`answer` "
                                                             "with `accept`)"}}},
        "ApprovalRequest": {
            "type": "object", "required": ["kind", "dialog", "call", "tool", "expires"],
            "properties": {
                "kind": {"enum": ["approval", "elicitation"]},
                "dialog": text("the dialog that waits"),
                "call": text("the call's key: DIALOG/STEP/CALL"),
                "step": {"type": "integer"}, "workspace": text("its workspace"),
                "user": text("who asked the dialog"), "tool": text("the tool called"),
                "arguments": {"description": "the exact arguments of the call"},
                "digest": text("sha256 of the tool and the arguments, canonical JSON"),
                "expires": {**when, "description": "unanswered by then, it is denied"},
                "mode": {"enum": ["form", "url"], "description": "a question's mode"},
                "message": text("the question (elicitation)"),
                "schema": {"type": "object", "description": "the form asked for (form)"},
                "url": text("the page to open (url)")}},
        "ApprovalAnswer": {
            "type": "object", "properties": {
                "dialog": text("the dialog"), "call": text("the call"),
                "digest": text("the digest answered"),
                "decision": {"enum": ["approve", "deny", "expired", "accept", "decline",
                                      "cancel"]},
                "reason": text("why it was denied"),
                "content": {"type": "object"}, "at": when}},
        "ApprovalsResponse": {
            "description": "`approvals` (list, oldest first) or `answer`; or `error` "
                           "(`not-found`: no such call waits in the workspace; `stale`: the "
                           "digest is not the waiting call's; `answered`; `expired`).",
            "type": "object", "properties": {
                "workspace": text("the workspace listed"),
                "approvals": {"type": "array", "items": ref("ApprovalRequest")},
                "answer": ref("ApprovalAnswer"), "error": ref("ServiceError")}},
    }


def dialogs_schemas() -> dict[str, Schema]:
    when = {"type": ["string", "null"], "format": "date-time"}
    count = {"type": ["integer", "null"]}
    return {
        "DialogsRequest": {
            "type": "object", "properties": {
                "workspace": WORKSPACE,
                "operation": {"enum": ["list", "show"], "description": "default: list"},
                "id": text("the dialog to show (`show`)"),
                "status": text("list only dialogs of this status (`list`): running, answer, "
                               "abandoned, or an error type"),
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000,
                          "description": "the most dialogs listed (`list`; default 100)"}}},
        "Dialog": {
            "type": "object", "required": ["id", "status"],
            "properties": {
                "id": text("the dialog's id: the id of the agent request that began it"),
                "workspace": text("its workspace"), "user": text("who asked"),
                "question": text("what was asked"),
                "status": text("running, answer, abandoned (its client had stopped waiting "
                               "when it was taken up), or the type of the error it ended with"),
                "started": when, "updated": when,
                "due": {**when, "description": "when its client stops waiting"},
                "steps": count, "tool_calls": count, "in_token": count, "out_token": count,
                "seconds": {"type": "number", "description": "from its start to its last "
                                                             "entry"},
                "request": {"type": "object", "description": "the agent request (`show`)"},
                "entries": {"type": "array", "description": "its journal (`show`): offer, "
                                                            "reply, result, turn and end "
                                                            "entries",
                            "items": {"type": "object", "properties": {
                                "seq": {"type": "integer"}, "at": when,
                                "kind": {"enum": ["offer", "reply", "approval", "answer",
                                                  "result", "turn", "end"]},
                                "body": {"type": "object"}}}}}},
        "DialogsResponse": {
            "description": "`dialogs` (list, newest first) or `dialog` (show); or `error` "
                           "(`not-found`: no such dialog in the workspace, or no longer kept).",
            "type": "object", "properties": {
                "workspace": text("the workspace listed"),
                "dialogs": {"type": "array", "items": ref("Dialog")},
                "dialog": ref("Dialog"), "error": ref("ServiceError")}},
    }


def agent_tools_schemas() -> dict[str, Schema]:
    return {
        "AgentToolsRequest": {
            "type": "object", "properties": {
                "workspace": WORKSPACE,
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
                "workspace": text("the workspace the agent serves"),
                "version": {"type": "integer", "description": "the config version the tools "
                                                              "were built from"},
                "tools": {"type": "array", "items": ref("ToolStatus")},
                "tool_calling": {
                    "description": "how the agent asks the LLM for tool calls in this "
                                   "workspace (docs/tool-calling.md); null while not known",
                    "anyOf": [{"type": "null"}, ref("ToolCalling")]},
                "error": ref("ServiceError")}},
        "ToolCalling": {
            "type": "object", "required": ["tool_calling", "source"],
            "properties": {
                "tool_calling": {"enum": ["native", "json", "react"]},
                "source": {"enum": ["workspace", "agent", "configured", "detected", "provider"],
                           "description": "who chose it: the workspace's settings item, the "
                                          "agent's --tool-calling, the text-completion "
                                          "service's --tool-calling, detection by trying, or "
                                          "the LLM provider itself"},
                "detail": text("why, in words (what each strategy's probe found)"),
                "llm": text("the LLM it was found for")}},
        "ToolStatus": {
            "type": "object", "required": ["key", "status"],
            "properties": {
                "key": text("the key of the `tool` config item"),
                "name": {"type": ["string", "null"], "description": "the name the LLM "
                                                                    "calls it by"},
                "type": {"type": ["string", "null"], "description": "the item's `type`"},
                "status": {"enum": ["available", "not-offered"]},
                "reason": text("why it is not offered: its `mcp` or `tool-service` item is "
                                "missing, its MCP server lacks the remote tool or does not "
                                "answer, its type is not available here, its name is taken, "
                                "it is disabled (`\"enabled\": false`)"),
                "source": {"enum": ["configured", "announced"],
                           "description": "a `tool` config item, or a tool a running tool "
                                          "service announces (docs/announcements.md)"},
                "service": text("the id of the tool service that announced it (announced "
                                 "tools only)")}},
    }


def agent_services_schemas() -> dict[str, Schema]:
    when = {"type": ["string", "null"], "format": "date-time",
            "description": "ISO 8601 UTC (`2025-01-31T12:00:00.123Z`)"}
    return {
        "AgentServicesRequest": {
            "type": "object", "properties": {
                "workspace": WORKSPACE,
                "version": {"type": "integer",
                            "description": "the config version the caller last saw (from a "
                                           "config answer): an agent with older tools loads "
                                           "the config first, so a put shows at once"}}},
        "AgentServicesResponse": {
            "description": "Every tool service of the workspace, configured or announced, by "
                           "id; or `error`.",
            "type": "object",
            "properties": {
                "workspace": text("the workspace listed"),
                "version": {"type": "integer", "description": "the config version the "
                                                              "agent's tools were built from"},
                "accepts-announcements": {
                    "type": "boolean",
                    "description": "whether the agent offers announced tools in this "
                                   "workspace (false: it runs with --no-announcements, or "
                                   "the workspace's settings item refuses them)"},
                "services": {"type": "array", "items": ref("ToolServiceListing")},
                "error": ref("ServiceError")}},
        "ToolServiceListing": {
            "type": "object",
            "required": ["id", "configured", "announced", "enabled", "live", "instances",
                         "tools"],
            "properties": {
                "id": text("the service id (the `tool-service` item's key)"),
                "configured": {"type": "boolean",
                               "description": "a `tool-service` config item of this key "
                                              "exists"},
                "announced": {"type": "boolean",
                              "description": "instances of it announced themselves (live "
                                             "or gone since)"},
                "enabled": {"type": "boolean",
                            "description": "false when its config item says `\"enabled\": "
                                           "false`"},
                "request-queue": {"type": ["string", "null"],
                                  "description": "the queue its tools are called on (the "
                                                 "config item's, else the announced one)"},
                "descriptor": {"type": ["object", "null"],
                               "description": "the tool-service descriptor the agent uses "
                                              "(the config item's, else the announced one): "
                                              "its `config-params` are what a tool of it "
                                              "sets"},
                "live": {"type": ["integer", "null"], "minimum": 0,
                         "description": "live announced instances; null: none ever "
                                        "announced it (it may have instances that do not)"},
                "instances": {"type": "array", "items": {
                    "type": "object", "required": ["instance", "last-heartbeat", "ttl"],
                    "properties": {
                        "instance": text("the instance id"),
                        "host": {"type": ["string", "null"]},
                        "pid": {"type": ["integer", "null"]},
                        "started": when,
                        "last-heartbeat": when,
                        "ttl": {"type": "number", "description": "seconds it counts as "
                                                                 "live after a heartbeat"}}}},
                "last-seen": when,
                "tools": {"type": "array", "items": {
                    "type": "object", "required": ["key", "source", "status"],
                    "properties": {
                        "key": text("the tool's key"),
                        "name": {"type": ["string", "null"],
                                 "description": "the name the LLM calls it by"},
                        "source": {"enum": ["configured", "announced"]},
                        "status": {"enum": ["offered", "overridden", "no-live-instance",
                                            "not-offered"]},
                        "reason": text("why it is not offered, or what overrides it")}}}}},
    }
