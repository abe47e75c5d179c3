"""The request and response bodies of the gateway's routes, as JSON Schema (OpenAPI 3.1).

One function per service returns its ``{name: schema}`` components; :mod:`.document` puts them
under ``components/schemas`` and refers to them from the paths. The shapes are the wire's own
(``toolmesh.schema``, the config service, the mcp-tool service, the tool-service route):
where they change, change these too — the tests validate real responses against them.

Bodies forwarded from a service stay open (``additionalProperties`` allowed): a service on
the bus may add fields, and TrustGraph's clients ignore what they do not know. The gateway's
own bodies (errors, health, config, token) are closed, so a new field shows up here first.
"""

from __future__ import annotations

from typing import Any

from toolmesh.config.tokens import CAPABILITIES

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def text(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


#: a field TrustGraph sends as JSON text and toolmesh's own callers as the object itself
def object_or_jsontext(description: str) -> Schema:
    return {"description": description,
            "oneOf": [{"type": "object"}, {"type": "string", "description": "the JSON text "
                                                                             "of an object"}]}


WORKSPACE = text("the workspace to act in; overrides the X-Workspace header "
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
                "unknown-tool-service", "malformed-request", "service-stopping",
                "prompt-error", "llm-error"]},
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
           "properties": {"type": text("the config type, e.g. `tool`, `tool-service`, `mcp`",
                                        minLength=1),
                          "key": text("the item's key within its type", minLength=1)}}
    value = {"type": "object", "required": ["type", "key", "value"],
             "properties": {**key["properties"],
                            "value": text("the item's value: JSON text by convention")}}
    got = {"type": "object", "required": ["type", "key", "value"],
           "properties": {**key["properties"],
                          "value": {"type": ["string", "null"],
                                    "description": "the value (secrets shown as `***`); null "
                                                   "for a key that is not stored"},
                          "workspace": text("getvalues-all-ws: the item's workspace")}}
    operations = {
        "get": ({"keys": {"type": "array", "items": ref("ConfigKey")}}, ["keys"],
                "the values of `keys` (a missing key: value null)"),
        "list": ({"type": text("a config type", minLength=1)}, ["type"],
                 "the keys of `type`, in `directory`"),
        "getvalues": ({"type": text("a config type", minLength=1)}, ["type"],
                      "every item of `type`, in `values`"),
        "config": ({}, [], "the whole workspace, in `config`"),
        "put": ({"values": {"type": "array", "minItems": 1, "items": ref("ConfigValue")}},
                ["values"], "store `values` (one version for all; `tool-service`, `tool` and "
                            "`mcp` items are validated and the whole put refused if one is bad;"
                            " a secret sent back as `***` keeps the stored one)"),
        "delete": ({"keys": {"type": "array", "minItems": 1, "items": ref("ConfigKey")}},
                   ["keys"], "delete `keys`"),
        "getvalues-all-ws": ({"type": text("a config type", minLength=1)}, ["type"],
                             "every item of `type` in every workspace, in `values`, each "
                             "with its `workspace` (the request's workspace plays no part; "
                             "it reads every tenant's items: an admin's operation)"),
        "history": ({"type": text("only changes of this config type"),
                     "key": text("only changes of this key"),
                     "limit": {"type": "integer", "minimum": 1, "maximum": 1000,
                               "default": 20, "description": "how many entries, at most"},
                     "all-workspaces": {"type": "boolean", "default": False,
                                        "description": "every workspace's changes and the "
                                                       "token changes (an admin's operation)"}},
                    [], "the newest audit entries of the workspace, newest first, in "
                        "`history`"),
        "list-workspaces": ({}, [], "the workspaces holding items, in `workspaces` (an "
                                    "admin's operation)"),
    }
    return {
        "ConfigKey": key,
        "ConfigValue": value,
        "ConfigHistoryEntry": {
            "description": "One recorded change: who made it, when, to what.",
            "type": "object", "additionalProperties": False,
            "required": ["at", "actor", "workspace", "operation", "type", "key", "version"],
            "properties": {
                "at": text("when: ISO 8601, UTC, milliseconds "
                            "(`2025-01-31T12:00:00.123Z`)"),
                "actor": text("who: a token id, `admin` (the gateway's own token), `local` "
                               "(no token set) or `bus` (a process on the bus)"),
                "workspace": {"type": "string"},
                "operation": {"enum": ["put", "delete", "token-create", "token-revoke"]},
                "type": text("the config type (`token` for token changes)"),
                "key": text("the key (the token's id for token changes)"),
                "version": {"type": ["integer", "null"],
                            "description": "the config version the change made (null for "
                                           "token changes)"}}},
        "ConfigRequest": {
            "description": "One of TrustGraph's config operations, chosen by `operation`, or "
                           "one of toolmesh's (`getvalues-all-ws`, `history`, "
                           "`list-workspaces`). The gateway sets `actor` (who asked, recorded "
                           "in the audit) to the caller's identity itself, whatever the body "
                           "says.",
            "oneOf": [{"title": op, "description": what, "type": "object",
                       "required": ["operation", *required],
                       "properties": {"operation": {"const": op}, "workspace": WORKSPACE,
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
                "values": {"type": "array", "items": got,
                           "description": "get, getvalues, getvalues-all-ws"},
                "directory": {"type": "array", "items": {"type": "string"},
                              "description": "list"},
                "config": {"type": "object", "description": "config: `{type: {key: value}}`",
                           "additionalProperties": {"type": "object",
                                                    "additionalProperties": {"type": "string"}}},
                "history": {"type": "array", "items": ref("ConfigHistoryEntry"),
                            "description": "history, newest first"},
                "workspaces": {"type": "array", "items": {"type": "string"},
                               "description": "list-workspaces"},
                "error": ref("ServiceError")}},
    }


_SCOPE = {
    "workspaces": {"type": "array", "items": {"type": "string"},
                   "description": "the workspaces it may use, the first its default"},
    "capabilities": {"type": "array",
                     "items": {"enum": list(CAPABILITIES)},
                     "description": "what it may do there"},
}


def token_schemas() -> dict[str, Schema]:
    described = {"type": "object", "additionalProperties": False,
                 "required": ["id", "name", "workspaces", "capabilities", "created"],
                 "properties": {"id": text("the token's id (its `tmk_<id>_` prefix)"),
                                "name": text("its name (may be empty)"), **_SCOPE,
                                "created": text("when it was created: ISO 8601, UTC")}}
    return {
        "ScopedToken": described,
        "TokenRequest": {
            "description": "Manage scoped tokens (needs `admin`; a scoped token with `admin` "
                           "manages only tokens within its own workspaces and capabilities). "
                           "The gateway sets `actor` itself.",
            "oneOf": [
                {"title": "create", "type": "object",
                 "required": ["operation", "workspaces", "capabilities"],
                 "properties": {
                     "operation": {"const": "create"},
                     "workspaces": {"description": "the workspaces it may use, the first its "
                                                   "default",
                                    "oneOf": [{"type": "string"},
                                              {"type": "array", "items": {"type": "string"}}]},
                     "capabilities": {"description": ", ".join(f"`{c}`"
                                                               for c in CAPABILITIES),
                                      "oneOf": [{"type": "string"},
                                                {"type": "array",
                                                 "items": {"type": "string"}}]},
                     "name": text("a name to know it by")}},
                {"title": "list", "type": "object", "required": ["operation"],
                 "properties": {"operation": {"const": "list"}}},
                {"title": "revoke", "type": "object", "required": ["operation", "id"],
                 "properties": {"operation": {"const": "revoke"},
                                "id": text("the token's id (`list` shows them)",
                                            minLength=1)}}]},
        "TokenResponse": {
            "description": "create → `token` and `plaintext` (the token itself, shown this "
                           "once); list → `tokens` (never a token or its digest; a scoped "
                           "caller sees those within its scope); revoke → `revoked`. A "
                           "refused operation is an HTTP 200 with `error` (`bad-request`: an "
                           "unknown operation, revoke without `id`; `config-error`: a bad "
                           "scope, no such token); a token beyond the caller's scope is a "
                           "403 `forbidden`.",
            "type": "object", "additionalProperties": False,
            "properties": {
                "version": {"type": "integer", "description": "the config version"},
                "token": ref("ScopedToken"),
                "plaintext": text("create: the token (`tmk_...`); it is not stored and "
                                   "cannot be shown again"),
                "tokens": {"type": "array", "items": ref("ScopedToken")},
                "revoked": text("revoke: the id of the revoked token"),
                "error": ref("ServiceError")}},
    }


def iam_schemas() -> dict[str, Schema]:
    workspace = {"type": "object", "required": ["id", "name", "enabled", "created"],
                 "properties": {"id": {"type": "string"}, "name": {"type": "string"},
                                "enabled": {"type": "boolean"},
                                "created": {"type": "string"}}}
    return {
        "IamRequest": {
            "description": "TrustGraph's iam questions, as far as toolmesh's tokens answer "
                           "them (for `tg-whoami`, `tg-list-my-workspaces`, "
                           "`tg-list-workspaces`); TrustGraph's users, passwords and API keys "
                           "are not modelled: other operations answer `error` "
                           "(`bad-request`).",
            "type": "object", "required": ["operation"],
            "properties": {
                "operation": {"type": "string", "examples": ["whoami", "list-my-workspaces",
                                                             "list-workspaces"],
                              "description": "`whoami`, `list-my-workspaces` (any caller); "
                                             "`list-workspaces` (`admin` in every "
                                             "workspace)"}}},
        "IamResponse": {
            "type": "object",
            "properties": {
                "user": {"type": "object", "description": "whoami: the caller (a token id, "
                         "`admin` or `local`); `roles` are its capabilities",
                         "required": ["id", "username", "workspace", "roles", "enabled"],
                         "properties": {
                             "id": {"type": "string"}, "username": {"type": "string"},
                             "name": {"type": "string"}, "email": {"type": "string"},
                             "workspace": text("its default workspace"),
                             "roles": {"type": "array", "items": {"type": "string"}},
                             "enabled": {"type": "boolean"},
                             "must_change_password": {"type": "boolean"},
                             "created": {"type": "string"}}},
                "workspaces": {"type": "array", "items": workspace,
                               "description": "list-my-workspaces: the caller's; "
                                              "list-workspaces: those holding items"},
                "error": ref("ServiceError")}},
    }


def flow_schemas() -> dict[str, Schema]:
    return {
        "FlowRequest": {
            "description": "TrustGraph's flow service (global).",
            "oneOf": [
                {"title": "list-flows", "type": "object", "required": ["operation"],
                 "properties": {"operation": {"const": "list-flows"}, "workspace": WORKSPACE}},
                {"title": "get-flow", "type": "object", "required": ["operation", "flow-id"],
                 "properties": {"operation": {"const": "get-flow"}, "workspace": WORKSPACE,
                                "flow-id": text("the flow's id", minLength=1)}}],
        },
        "FlowResponse": {
            "type": "object",
            "properties": {
                "flow-ids": {"type": "array", "items": {"type": "string"},
                             "description": "list-flows: the flows' ids"},
                "flow": text("get-flow: the JSON text of the flow's definition: the fields of "
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
                "question": text("what to ask the agent", minLength=1),
                "state": text("the dialog's state: only tools applicable in it are offered"),
                "group": {"description": "tool groups to offer (default: every tool)",
                          "oneOf": [{"type": "string"},
                                    {"type": "array", "items": {"type": "string"}}]},
                "history": {"type": "array", "items": step},
                "user": text("the user the tools run for (default `trustgraph`)"),
                "streaming": {"type": "boolean", "description": "REST answers one body "
                              "whatever this says; over the WebSocket, true streams chunks"},
                "workspace": WORKSPACE}},
        "AgentMessage": {
            "description": "One agent message; over REST, the dialog's last one "
                           "(`end_of_dialog: true`). A failed dialog ends with "
                           "`message_type: error` and an `error`.",
            "type": "object",
            "required": ["message_type", "content", "end_of_message", "end_of_dialog"],
            "properties": {
                "message_type": {"enum": ["thought", "tool-call", "observation", "answer",
                                          "error", "progress", "offer"],
                                 "description": "`tool-call`: the tool a step calls, before "
                                                "it runs; `progress`: a tool's progress report; "
                                                "`offer`: the tools a step showed the model, "
                                                "when it left some out (all three toolmesh's "
                                                "own; TrustGraph's clients skip them)"},
                "content": {"type": "string"},
                "end_of_message": {"type": "boolean"},
                "end_of_dialog": {"type": "boolean"},
                "message_id": {"type": "string"},
                "answer": text("the whole answer, on the final answer message (for older "
                                "clients)"),
                "tool": text("on `tool-call` messages: the tool called"),
                "arguments": {"type": "object",
                              "description": "on `tool-call` messages: the arguments it is "
                                             "called with"},
                "offer": {"type": "object",
                          "description": "on `offer` messages: how the step's tools were "
                                         "selected (docs/tool-calling.md)",
                          "properties": {
                              "method": {"type": "string"},
                              "available": {"type": "integer", "minimum": 0},
                              "shown": {"type": "integer", "minimum": 0},
                              "find_tools": {"type": "boolean"},
                              "tools": {"type": "array", "items": {
                                  "type": "object",
                                  "properties": {"name": {"type": "string"},
                                                 "reason": {"type": "string"},
                                                 "score": {"type": "number"}}}}}},
                "cut": {"type": "boolean",
                        "description": "on the final answer: the model's limit cut it short "
                                       "(its content ends with a note saying so)"},
                "token_source": {"enum": ["counted", "estimated"],
                                 "description": "on the dialog's last message, when the LLM's "
                                                "server reported no usage: toolmesh counted "
                                                "(or estimated) the tokens"},
                "progress": {"type": "object",
                             "description": "on `progress` messages: the tool and its report",
                             "properties": {"tool": {"type": "string"},
                                            "progress": {"type": "number"},
                                            "total": {"type": "number"},
                                            "message": {"type": "string"}}},
                **_usage("on the dialog's last message (`end_of_dialog: true`): the tokens "
                         "of every LLM answer of the dialog, summed, and the last model"),
                "tool_calls": {"type": "integer", "minimum": 0,
                               "description": "on the dialog's last message: the tool calls "
                                              "the dialog made (toolmesh's own)"},
                "tool_time": {"type": "number", "minimum": 0,
                              "description": "on the dialog's last message: the seconds those "
                                             "calls took, summed (toolmesh's own)"},
                "error": ref("ServiceError")}},
    }


def _usage(where: str) -> dict[str, Schema]:
    """The token-usage fields (TrustGraph's), left out when the LLM reported none."""
    return {"in_token": {"type": "integer", "minimum": 0,
                         "description": f"tokens the LLM read ({where})"},
            "out_token": {"type": "integer", "minimum": 0,
                          "description": f"tokens the LLM wrote ({where})"},
            "model": text(f"the model that answered ({where})")}


def prompt_schemas() -> dict[str, Schema]:
    return {
        "PromptRequest": {
            "description": "A prompt template completed by the LLM (TrustGraph's prompt "
                           "service).",
            "type": "object",
            "properties": {
                "id": text("the template's id: one `tg-show-prompts` lists (e.g. "
                            "`question`); required unless a draft `template` is rendered",
                           minLength=1),
                "operation": {"const": "render",
                              "description": "toolmesh's own: render the template without "
                                             "asking the LLM, answering `system` and "
                                             "`prompt` (absent: render and complete)"},
                "template": {"type": "object", "required": ["prompt"],
                             "description": "with `operation: render`, a draft to render "
                                            "instead of a stored template (needs "
                                            "`config:write`); it gets the workspace's "
                                            "system prompt when it has none",
                             "properties": {"prompt": {"type": "string"},
                                            "system": {"type": "string"},
                                            "response-type": {"enum": ["text", "json"]}}},
                "variables": {"type": "object", "description": "the template's variables, "
                              "their values as they are (what TrustGraph's clients send); "
                              "they replace `terms`"},
                "terms": {"type": "object", "additionalProperties": {"type": "string"},
                          "description": "the template's variables, each value as JSON text "
                                         "(the prompt service's own wire)"},
                "streaming": {"type": "boolean", "default": False,
                              "description": "over the WebSocket, true streams the text in "
                                             "pieces (a `json` template answers in one); "
                                             "REST joins them into one body"},
                "workspace": WORKSPACE}},
        "PromptResponse": {
            "description": "`text` (a `text` template) or `object` (the JSON text a `json` "
                           "template's answer holds), or `error` (`prompt-error`: an unknown "
                           "template, a variable it lacks, an answer that is not JSON; "
                           "`llm-error`). Streamed, every piece has `end_of_stream: false` "
                           "and the last one, `true`, carries the usage.",
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "object": text("the JSON text of a `json` template's answer"),
                "system": text("`operation: render`: the system prompt the LLM would get"),
                "prompt": text("`operation: render`: the prompt the LLM would get"),
                "end_of_stream": {"type": "boolean"},
                **_usage("when the LLM reported it"),
                "error": ref("ServiceError")}},
    }


def text_completion_schemas() -> dict[str, Schema]:
    return {
        "TextCompletionRequest": {
            "description": "One completion by the LLM (TrustGraph's text-completion service).",
            "type": "object", "required": ["prompt"],
            "properties": {
                "system": text("the system prompt (default none)"),
                "prompt": text("what to complete"),
                "streaming": {"type": "boolean", "default": False,
                              "description": "over the WebSocket, true streams the answer in "
                                             "pieces; REST joins them into one body"},
                "workspace": WORKSPACE}},
        "TextCompletionResponse": {
            "description": "The answer in `response`, or `error` (`llm-error`: the LLM could "
                           "not answer; `malformed-request`). Streamed, every piece has "
                           "`end_of_stream: false` and the last one (`response: \"\"`, "
                           "`end_of_stream: true`) carries the usage.",
            "type": "object",
            "properties": {
                "response": {"type": "string"},
                "end_of_stream": {"type": "boolean"},
                **_usage("when the LLM reported it"),
                "error": ref("ServiceError")}},
    }


#: a direct call's own approval, for a call whose policy asks a person (docs/approvals.md)
APPROVED = text("the digest of this exact call, sent by a token that may `approve`, for a "
                "call whose approval policy asks a person (without it such a call is refused "
                "403 `approval-required`, which names the digest)")

IDEMPOTENCY_KEY = text("the client's name for this call (printable characters), sent again "
                       "with each retry of it: a tool service written with toolmesh's SDK "
                       "runs a call once per key (an MCP server gets it in the call's "
                       "`_meta`); without one the gateway makes one per request "
                       "(docs/dialogs.md)", minLength=1, maxLength=200)


def tool_service_schemas() -> dict[str, Schema]:
    return {
        "ToolServiceRequest": {
            "type": "object", "required": ["id"],
            "properties": {
                "id": text("the key of a `tool-service` config item", minLength=1),
                "config": object_or_jsontext("the tool's config (its config-params)"),
                "arguments": object_or_jsontext("the call's arguments"),
                "approved": APPROVED,
                "idempotency-key": IDEMPOTENCY_KEY,
                "user": text("the user the call runs for (default `trustgraph`)"),
                "timeout": {"type": "number", "exclusiveMinimum": 0,
                            "description": "seconds to wait for the service (default 60; at "
                                           "most the route's deadline, 130 s by default)"},
                "streaming": {"type": "boolean",
                              "description": "REST joins the pieces into one body"},
                "workspace": WORKSPACE}},
        "ToolServiceResponse": {
            "type": "object", "required": ["end_of_stream"],
            "properties": {
                "response": text("the observation text"),
                "end_of_stream": {"type": "boolean"},
                "error": ref("ServiceError")}},
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
                "service": text("a service name: config, flow, token, iam, agent, mcp-tool, "
                                 "tool-service, agent-tools, agent-services, dialogs, prompt, "
                                 "text-completion"),
                "flow": text("the flow of a per-flow service (default `default`)"),
                "workspace": text("the workspace (default `default`)"),
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
    """Every route's schemas but the agent's status services (:mod:`.status_schemas`)."""
    # here: that module builds on this one's helpers
    from toolmesh.gateway.openapi.mcp_tool_schemas import mcp_tool_schemas

    return {**error_schemas(), **health_schemas(), **config_schemas(), **token_schemas(),
            **iam_schemas(), **flow_schemas(),
            **agent_schemas(), **prompt_schemas(), **text_completion_schemas(),
            **mcp_tool_schemas(), **tool_service_schemas(),
            **socket_schemas()}
