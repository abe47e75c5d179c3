"""The gateway's OpenAPI 3.1 document: its routes, headers, security and error statuses.

The bodies are in :mod:`.schemas`. The document is data, not generated from the routes:
``tests/gateway/test_openapi.py`` checks it against the routes the gateway registers and
validates real responses against it, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

from typing import Any

from toolmesh import __version__
from toolmesh.gateway.openapi.schemas import Schema, all_schemas, ref
from toolmesh.gateway.openapi.status_schemas import status_schemas

JSON = "application/json"

#: status -> (component name, when, the error types the gateway uses with it; None: open)
ERRORS: dict[str, tuple[str, str, tuple[str, ...] | None]] = {
    "400": ("BadRequest", "The body is not JSON, not a JSON object, nested too deep or holds "
            "invalid Unicode, or a header is invalid (X-Workspace not UTF-8, X-Timeout not a "
            "positive number); on the WebSocket route: not an upgrade.", ("bad-request",)),
    "401": ("Unauthorized", "The gateway has a token and the request does not carry a valid "
            "one (`Authorization: Bearer <token>`): none, a wrong one, or a scoped token that "
            "is unknown or was revoked (also one revoked after it was checked).",
            ("auth-failed",)),
    "403": ("Forbidden", "The caller's scoped token does not allow the request (`forbidden`: "
            "the message names the capability or the workspaces it lacks), a web page of "
            "another origin (`forbidden-origin`), or, on loopback, a Host other than "
            "localhost, 127.0.0.1 and [::1] (`forbidden-host`: DNS rebinding).",
            ("forbidden", "forbidden-origin", "forbidden-host")),
    "404": ("NotFound", "No such service (`unknown-service`, the message lists those there "
            "are), no such flow (`unknown-flow`: neither `default` nor a `flow/<id>` config "
            "item of the workspace), or no such route (`not-found`).",
            ("unknown-service", "unknown-flow", "not-found")),
    "408": ("RequestTimeout", "The body did not arrive in time.", ("request-timeout",)),
    "413": ("RequestTooLarge", "The body is over the gateway's size limit (16 MiB by "
            "default).", ("request-too-large",)),
    "415": ("UnsupportedMediaType", "The body was not sent as `Content-Type: "
            "application/json`.", ("unsupported-media-type",)),
    "429": ("TooManyRequests", "A limit of the caller's (docs/security.md, Limits): too "
            "many wrong tokens from its address (`auth-throttled`, with `Retry-After`: every "
            "token it sends is refused until then), its scoped token or workspace holds its "
            "quota of connections (`too-many-connections`; the connection is closed) or its "
            "token has its quota of requests in flight (`too-many-requests`).",
            ("auth-throttled", "too-many-connections", "too-many-requests")),
    "500": ("InternalError", "A bug in the gateway; its log has the details.",
            ("internal-error",)),
    "502": ("BadGateway", "The call failed in a way that has no status of its own; `type` "
            "names it (e.g. `no-response`, `client-closed` while the gateway stops, an error of "
            "the config service while the flow was looked up). A service that answers with an "
            "error is not a 502: its answer is an HTTP 200 body with `error`.", None),
    "503": ("ServiceUnavailable", "The gateway is at a limit (`server-busy`: too many "
            "connections or request bodies at once, or the last connections are kept for the "
            "admin; try again shortly), or nothing serves the "
            "service's queue (`service-unavailable`: the message names the process to start).",
            ("server-busy", "service-unavailable")),
    "504": ("Timeout", "The service did not answer before the request's deadline (the "
            "route's, or the shorter one X-Timeout asked for).", ("timeout",)),
}
#: the statuses any route may answer (access checks, limits, bugs)
ANY_ROUTE = ("403", "429", "500", "503")
SERVICE_ERRORS = ("400", "401", "403", "404", "408", "413", "415", "429", "500", "502", "503",
                  "504")

DESCRIPTION = """\
toolmesh's gateway: TrustGraph's `/api/v1` over HTTP (this document) and a WebSocket
(`GET /api/v1/socket`). `toolmesh serve` listens on `http://127.0.0.1:8888/` by default.

**Requests.** Every POST body is a JSON object sent with `Content-Type: application/json`.
Web pages of other origins are refused (`Origin`, and `Host` on loopback) unless the operator
allows their origin (`--allow-origin`, which also answers CORS preflights).

**Authentication.** With a token set (`TOOLMESH_GATEWAY_TOKEN`, `--token-file`), every route
but health, this document and the WebSocket upgrade needs `Authorization: Bearer <token>`;
without one, no header is needed. Besides the gateway's own token (every capability in every
workspace), scoped tokens (`POST /api/v1/token`, `toolmesh token create`) carry capabilities
(`config:read`, `config:write`, `agent`, `tools:invoke`, `metrics:read`, `admin`) in their
workspaces only (`metrics:read` reads the metrics of every workspace: a scraper's):
a request beyond them is a 403 `forbidden`, a revoked or unknown token a 401 `auth-failed`.

**Errors.** The gateway refuses or fails a request with an HTTP status ≥ 400 and the body
`{"error": {"type": "...", "message": "..."}}` (schema `Error`; each status lists its types).
A service that answers with an error is a successful call: HTTP 200 with an `error` field in
the service's body (TrustGraph's convention), e.g. `config-error` from the config service.
Connections aiohttp cannot parse as HTTP are answered with a plain-text 400.
"""

SOCKET = """\
One connection multiplexes many requests, each answered by frames carrying its `id`.

* **Auth** (only when the gateway has a token, unless the upgrade carried it in
  `Authorization: Bearer` or `?token=`): send `{"type": "auth", "token": "..."}`, answered
  `{"type": "auth-ok", "default_workspace": "default"}` or `{"type": "auth-failed", "error":
  "..."}`. By default the connection is closed (code 1008) after 3 wrong tokens or 10 s
  without one.
* **Request**: `{"id": "req-1", "service": "config", "workspace"?: "default", "flow"?:
  "default", "timeout"?: seconds, "request": {...}}` — `service` is any service of the REST
  routes (`config`, `flow`, `token`, `iam`, `agent`, `mcp-tool`, `tool-service`,
  `agent-tools`, `agent-services`, `dialogs`, `prompt`, `text-completion`), `request` its
  REST body and `timeout` what X-Timeout is on REST.
* **Responses**: `{"id": "req-1", "response": {...}, "complete": false|true}`, one per
  response of the service (a streaming agent, prompt, text-completion or tool service sends
  many; `complete: true` on the last, which also carries the service's `error` if it
  failed).
* **Errors**: `{"id": "req-1"|null, "complete": true, "error": {"type", "message"}}` — types
  `bad-request`, `auth-required`, `auth-failed` (a scoped token revoked since),
  `forbidden` (beyond the token's scope), `unknown-service`, `too-many-requests` (over 64
  requests in flight on one connection, by default), `unknown-flow`, `service-unavailable`,
  `timeout`
  (or the type of another failure of the call), `internal-error`. A bad frame never closes
  the connection.

Schemas: `SocketAuthFrame`, `SocketAuthReply`, `SocketRequestFrame`, `SocketResponseFrame`.
"""


def _json(schema: Schema, description: str) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": schema}}}


def _error_responses() -> dict[str, Any]:
    out = {}
    for name, when, types in ERRORS.values():
        schema: Schema = ref("Error")
        if types is not None:
            # the types this status is used with, on top of the general shape
            schema = {"allOf": [ref("Error"), {"properties": {"error": {"properties": {
                "type": {"enum": list(types)}}}}}]}
        out[name] = _json(schema, when)
    return out


def _errors(statuses: tuple[str, ...]) -> dict[str, Any]:
    return {s: {"$ref": f"#/components/responses/{ERRORS[s][0]}"} for s in statuses}


def _service(operation_id: str, summary: str, description: str, request: str,
             response: str, *, per_flow: bool) -> dict[str, Any]:
    parameters = [{"$ref": "#/components/parameters/Workspace"},
                  {"$ref": "#/components/parameters/Timeout"}]
    if per_flow:
        parameters.insert(0, {"$ref": "#/components/parameters/Flow"})
    return {"post": {
        "operationId": operation_id, "summary": summary, "description": description,
        "tags": ["per-flow services" if per_flow else "global services"],
        "parameters": parameters,
        "requestBody": {"required": True, "content": {JSON: {"schema": ref(request)}}},
        "responses": {"200": _json(ref(response), "The service's answer (possibly with "
                                                  "`error`: see the description)."),
                      **_errors(SERVICE_ERRORS)}}}


def _paths() -> dict[str, Any]:
    flow = "/api/v1/flow/{flow}/service"
    return {
        **_mcp_paths(),
        "/api/v1/health": {"get": {
            "operationId": "health", "summary": "Whether the gateway is up, and its services",
            "tags": ["gateway"], "security": [],
            "responses": {"200": _json(ref("Health"), "The gateway is up."),
                          **_errors(ANY_ROUTE)}}},
        "/api/v1/openapi.json": {"get": {
            "operationId": "openapi", "summary": "This document", "tags": ["gateway"],
            "security": [],
            "responses": {"200": _json({"type": "object", "required": ["openapi", "paths"]},
                                       "The OpenAPI 3.1 document of the REST API."),
                          **_errors(ANY_ROUTE)}}},
        "/metrics": {"get": {
            "operationId": "metrics", "summary": "Prometheus metrics",
            "description": "The process's metrics in Prometheus' text format (OpenMetrics when "
                           "the `Accept` header asks for it): requests, tool calls, LLM calls "
                           "and tokens, dialogs, bus messages (docs/observability.md). With a "
                           "token set, the caller needs the `metrics:read` capability: the "
                           "metrics count every workspace's calls and name their tools.",
            "tags": ["gateway"],
            "responses": {"200": {"description": "The metrics.",
                                  "content": {"text/plain": {"schema": {"type": "string"}},
                                              "application/openmetrics-text": {
                                                  "schema": {"type": "string"}}}},
                          **_errors(("401", *ANY_ROUTE))}}},
        "/api/metrics/query": {"get": {
            "operationId": "metricsQuery", "summary": "Prometheus' instant query, in part",
            "description": "The part of Prometheus' HTTP API TrustGraph's tools read "
                           "(`tg-show-flow-state`, `tg-verify-system-status`): a metric name "
                           "with label matchers (e.g. `processor_info`), answered from this "
                           "gateway's own metrics in Prometheus' JSON form. Anything more is "
                           "Prometheus' own `400 bad_data`. Needs `metrics:read`, as /metrics "
                           "does.",
            "tags": ["gateway"],
            "parameters": [{"name": "query", "in": "query", "required": True,
                            "schema": {"type": "string"}}],
            "responses": {"200": _json({"type": "object", "required": ["status", "data"]},
                                       "The query's result, Prometheus' way."),
                          "400": _json({"type": "object"}, "A query this does not answer."),
                          **_errors(("401", *ANY_ROUTE))}}},
        "/api/v1/librarian": {"post": {
            "operationId": "librarian", "summary": "TrustGraph's library (empty here)",
            "description": "toolmesh keeps no documents: `list-documents` answers "
                           "`{\"document-metadatas\": []}` and `list-processing` "
                           "`{\"processing-metadatas\": []}`; any other operation is refused "
                           "(`not-supported`).",
            "tags": ["services"],
            "requestBody": {"required": True, "content": {JSON: {"schema": {
                "type": "object", "properties": {"operation": {"type": "string"}}}}}},
            "responses": {"200": _json({"type": "object"}, "The (empty) listing, or an "
                                                         "`error`."),
                          **_errors(SERVICE_ERRORS)}}},
        "/index.html": {"get": _page_redirect("indexRedirect", "Where TrustGraph's Workbench "
                                                               "is: leads to /workbench/")},
        "/": {"get": _page_redirect("root", "The gateway's root: leads to the Workbench")},
        "/workbench": {"get": _page_redirect("workbenchRedirect", "Leads to /workbench/")},
        "/workbench/": {"get": _page("workbench", "The Workbench (web UI)", (
            "The Workbench's page (docs/workbench.md): a client of this API, signed in with a "
            "token in the browser. Served without a token (it holds no secret), with a "
            "Content-Security-Policy that allows only this origin's scripts and connections; "
            "absent when the gateway runs with --no-workbench."))},
        "/workbench/{name}": {"get": _page("workbenchFile", "One of the Workbench's files", (
            "A script, stylesheet or image of the Workbench; 404 for any other name."),
            parameters=[{"name": "name", "in": "path", "required": True,
                         "schema": {"type": "string"}}])},
        "/api/v1/socket": {"get": {
            "operationId": "socket", "summary": "WebSocket: many requests on one connection",
            "description": SOCKET, "tags": ["gateway"],
            "security": [{"bearer": []}, {"socketToken": []}, {}],
            "responses": {"101": {"description": "Switching to the WebSocket protocol; the "
                                                 "frames are described above."},
                          **_errors(("400", *ANY_ROUTE))}}},
        "/api/v1/config": _service(
            "config", "Config operations (TrustGraph's)",
            "get, list, getvalues, config, put, delete on the workspace's config items; "
            "history: the audit of its changes (who, when, what; with `all-workspaces`, every "
            "workspace's and the token changes: an admin's operation); getvalues-all-ws and "
            "list-workspaces: one type's items of every workspace, the workspaces there are "
            "(an admin's). The gateway sets `actor` (who asked) itself. Secrets are never "
            "shown: they read as `***`, and a put of `***` keeps the stored value. A refused "
            "operation is an HTTP 200 with `error` (`config-error`); one the caller's token "
            "does not allow, a 403 `forbidden`.",
            "ConfigRequest", "ConfigResponse", per_flow=False),
        "/api/v1/flow": _service(
            "flow", "The flows (TrustGraph's flow service)",
            "`list-flows` → `flow-ids` (`default` and one per `flow` config item); "
            "`get-flow` → `flow`, the JSON text of the flow's definition. A refused "
            "operation is an HTTP 200 with `error` (`bad-request`, `unknown-flow`).",
            "FlowRequest", "FlowResponse", per_flow=False),
        "/api/v1/token": _service(
            "token", "Scoped tokens: create, list, revoke",
            "`create` → `token` and `plaintext` (the token, shown this once); `list` → "
            "`tokens` (never a token or its digest); `revoke` → `revoked`. Needs `admin`; a "
            "scoped token with `admin` manages only tokens within its own workspaces and "
            "capabilities (else 403 `forbidden`). A revoked token is refused at once by this "
            "gateway, and by the others as soon as the config service's push reaches them. A "
            "refused operation is an HTTP 200 with `error` (`bad-request`, `config-error`).",
            "TokenRequest", "TokenResponse", per_flow=False),
        "/api/v1/iam": _service(
            "iam", "Who am I, and my workspaces (TrustGraph's iam)",
            "`whoami` → `user` (the caller: a token id, `admin` or `local`; `roles` are its "
            "capabilities); `list-my-workspaces` → the caller's `workspaces`; "
            "`list-workspaces` (needs `admin` in every workspace) → every workspace holding "
            "items. TrustGraph's users, passwords and API keys are not modelled: other "
            "operations answer HTTP 200 with `error` (`bad-request`).",
            "IamRequest", "IamResponse", per_flow=False),
        f"{flow}/agent": _service(
            "agent", "Ask the ReAct agent",
            "Runs a dialog with the tools the config describes and answers its last message "
            "(the final answer, or `message_type: error`). Over REST the dialog is not "
            "streamed; use the WebSocket for thoughts and observations as they happen.",
            "AgentRequest", "AgentMessage", per_flow=True),
        f"{flow}/mcp-tool": _service(
            "mcpTool", "Call a configured MCP tool",
            "Calls the tool an `mcp` config item names, with `parameters`; `describe` shows "
            "its input schema.", "McpToolRequest", "McpToolResponse", per_flow=True),
        f"{flow}/tool-service": _service(
            "toolService", "Call a configured tool service directly",
            "Calls the tool service a `tool-service` config item describes (by its key, "
            "`id`), as the agent would; a streamed answer is joined into one `response`.",
            "ToolServiceRequest", "ToolServiceResponse", per_flow=True),
        f"{flow}/prompt": _service(
            "prompt", "Complete a prompt template",
            "Renders the template `id` with `variables` (or `terms`) and asks the LLM: `text`, "
            "or `object` for a `json` template, with the token usage. Over REST a streamed "
            "answer is joined into one body; the WebSocket streams its pieces. Answered by "
            "the prompt process (`toolmesh run prompt`) with the text-completion process.",
            "PromptRequest", "PromptResponse", per_flow=True),
        f"{flow}/text-completion": _service(
            "textCompletion", "Ask the LLM",
            "One completion of `prompt` under `system`, with the token usage. Over REST a "
            "streamed answer is joined into one body; the WebSocket streams its pieces. "
            "Answered by the text-completion process (`toolmesh run text-completion`).",
            "TextCompletionRequest", "TextCompletionResponse", per_flow=True),
        f"{flow}/agent-tools": _service(
            "agentTools", "The agent's tools: offered or not, and why",
            "Every `tool` config item as the flow's agent sees it: `available` (offered to the "
            "LLM) or `not-offered` with the `reason` (its `mcp` or `tool-service` item is "
            "missing, its MCP server lacks the remote tool or does not answer, its type is "
            "not available in this deployment, another tool has its name). Answered by the "
            "agent process (`toolmesh run agent`).",
            "AgentToolsRequest", "AgentToolsResponse", per_flow=True),
        f"{flow}/agent-services": _service(
            "agentServices", "Every tool service: configured or announced, live or not",
            "Every tool service of the workspace as the flow's agent sees it: its "
            "`tool-service` config item and/or the instances that announce themselves on the "
            "bus, how many are live (`null`: none ever announced it), each instance's host, "
            "pid and last heartbeat, and its tools: `offered`, `no-live-instance` (every "
            "announced instance is gone: a call fails at once), `overridden` (a configured "
            "item of its key replaces an announced tool) or `not-offered` with the `reason`. "
            "A config read shows configured items only; this shows both. Answered by the "
            "agent process (`toolmesh run agent`).",
            "AgentServicesRequest", "AgentServicesResponse", per_flow=True),
        f"{flow}/dialogs": _service(
            "dialogs", "The dialogs the agent recorded: list them, show one",
            "The dialogs of the workspace from the agent's journal (docs/dialogs.md): `list` "
            "gives each one's question, status, steps, tool calls, tokens and times, newest "
            "first; `show` one dialog with its request and every entry (the model's replies, "
            "each call's result, the end). Answered by the agent process unless it runs with "
            "`--dialogs off`.",
            "DialogsRequest", "DialogsResponse", per_flow=True),
        f"{flow}/approvals": _service(
            "approvals", "The calls that wait for a person: list them, answer one",
            "Calls of tools whose approval policy asks, and MCP servers' questions "
            "(elicitation), of the workspace's dialogs (docs/approvals.md): `list` them; "
            "`approve` (naming the call's `digest`: an approval is bound to the exact call) "
            "or `deny` (with a `reason` the model sees) a call; `answer` a question "
            "(`accept` with the form's `content`, `decline`, `cancel`). Needs `approve`. "
            "Answered by the agent process.",
            "ApprovalsRequest", "ApprovalsResponse", per_flow=True),
    }


def _components() -> dict[str, Any]:
    return {
        "schemas": {**all_schemas(), **status_schemas()},
        "responses": _error_responses(),
        "parameters": {
            "Flow": {"name": "flow", "in": "path", "required": True,
                     "description": "the flow whose service instance answers: `default`, "
                                    "or one a `flow/<id>` config item defines (else 404 "
                                    "`unknown-flow`)",
                     "schema": {"type": "string", "minLength": 1}},
            "Workspace": {"name": "X-Workspace", "in": "header", "required": False,
                          "description": "the workspace to act in when the body names none "
                                         "(default: `default`)",
                          "schema": {"type": "string"}},
            "Timeout": {"name": "X-Timeout", "in": "header", "required": False,
                        "description": "this request's deadline in seconds, at most the "
                                       "route's own (by default config and flow 10 s, "
                                       "agent-tools, agent-services, dialogs and approvals 30 s, "
                                       "mcp-tool and "
                                       "tool-service 130 s, "
                                       "prompt and text-completion 300 s, agent 600 s; the "
                                       "operator's "
                                       "`--deadline SERVICE=SECONDS`); not a positive number: "
                                       "400",
                        "schema": {"type": "number", "exclusiveMinimum": 0}},
        },
        "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer",
                       "description": "Required when the gateway runs with a token "
                                      "(TOOLMESH_GATEWAY_TOKEN or --token-file)."},
            "socketToken": {"type": "apiKey", "in": "query", "name": "token",
                            "description": "The token in the WebSocket URL (browsers cannot "
                                           "set headers on a WebSocket); or send an auth "
                                           "frame first."},
        },
    }


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the gateway's REST API (a new dict on every call)."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "toolmesh gateway", "version": __version__,
                 "summary": "TrustGraph-compatible API of toolmesh: config, flows, the "
                            "agent, prompts, the LLM, MCP tools and tool services.",
                 "description": DESCRIPTION,
                 "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"}},
        "tags": [{"name": "gateway", "description": "the gateway itself"},
                 {"name": "global services", "description": "POST /api/v1/{service}"},
                 {"name": "per-flow services",
                  "description": "POST /api/v1/flow/{flow}/service/{service}"},
                 {"name": "workbench", "description": "the web UI's files (docs/workbench.md)"}],
        # optional: a gateway without a token needs none
        "security": [{"bearer": []}, {}],
        "paths": _paths(),
        "components": _components(),
    }


def _page(operation: str, summary: str, description: str, *,
          parameters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Workbench file's GET: no token, the file or a JSON 404."""
    found: dict[str, Any] = {
        "operationId": operation, "summary": summary, "description": description,
        "tags": ["workbench"], "security": [],
        "responses": {"200": {"description": "The file.", "content": {
                          kind: {"schema": {"type": "string"}} for kind in (
                              "text/html", "text/javascript", "text/css", "image/svg+xml")}},
                      "304": {"description": "Not modified (`If-None-Match`)."},
                      "404": _json(ref("Error"), "No such file, or the Workbench is off."),
                      **_errors(ANY_ROUTE)}}
    if parameters:
        found["parameters"] = parameters
    return found


def _page_redirect(operation: str, summary: str) -> dict[str, Any]:
    return {"operationId": operation, "summary": summary, "tags": ["workbench"],
            "security": [],
            "responses": {"302": {"description": "To `/workbench/`.",
                                  "headers": {"Location": {"schema": {"type": "string"}}}},
                          "404": _json(ref("Error"), "The Workbench is off."),
                          **_errors(ANY_ROUTE)}}


#: what /mcp answers: MCP's streamable HTTP (JSON-RPC bodies, or the gateway's own refusals)
MCP_RESPONSES = {status: {"description": what} for status, what in (
    ("200", "MCP's answer: a JSON-RPC response, or an SSE stream of them"),
    ("202", "a notification or response from the client, accepted"),
    ("400", "not MCP: no session id where one is needed, a malformed JSON-RPC message"),
    ("401", "no valid bearer token: WWW-Authenticate names the resource metadata"),
    ("403", "an origin or host the gateway refuses, or a workspace the token may not use"),
    ("404", "a session the server does not know (it ended, or the gateway restarted)"),
    ("405", "a method MCP does not serve here"),
    ("406", "an Accept header without application/json and text/event-stream"),
    ("413", "a body larger than the gateway takes"),
    ("415", "a POST body that is not application/json"),
    ("500", "an error of the gateway"),
    ("503", "the endpoint is not started, or too many sessions"))}


def _mcp_paths() -> dict[str, Any]:
    """``/mcp``: MCP's streamable HTTP, not a JSON API of its own (docs/mcp-server.md)."""
    what = ("MCP over streamable HTTP (the Model Context Protocol; any MCP client): "
            "`initialize` or `server/discover`, `tools/list`, `tools/call` as JSON-RPC in the "
            "body of a POST, answered as JSON or an SSE stream; GET opens the session's SSE "
            "stream (`notifications/tools/list_changed`); DELETE ends the session. The "
            "workspace is the token's first, or the path's; listing and calling need "
            "`tools:invoke`.")
    paths: dict[str, Any] = {}
    for path, where in (("/mcp", "the token's workspace"),
                        ("/mcp/{workspace}", "the workspace named")):
        parameters = ([{"name": "workspace", "in": "path", "required": True,
                        "schema": {"type": "string"}}] if "{" in path else [])
        paths[path] = {method: {
            "operationId": f"mcp-{method}{'-workspace' if parameters else ''}",
            "summary": f"The MCP server of {where} ({method.upper()})", "tags": ["mcp"],
            "description": what, "parameters": parameters,
            "responses": MCP_RESPONSES} for method in ("get", "post", "delete")}
    for path in ("/.well-known/oauth-protected-resource",
                 "/.well-known/oauth-protected-resource/mcp"):
        paths[path] = {"get": {
            "operationId": "mcp-resource-metadata" + ("-mcp" if path.endswith("/mcp") else ""),
            "summary": "How an MCP client authenticates to /mcp (RFC 9728)", "tags": ["mcp"],
            "security": [], "description": (
                "The OAuth protected-resource metadata of `/mcp`: a bearer token in the "
                "`Authorization` header, issued by the gateway's admin (`toolmesh token "
                "create -c tools:invoke`); no authorization server. A 401 from `/mcp` points "
                "here in its `WWW-Authenticate` header."),
            "responses": {"200": {"description": "The metadata (JSON)"}, **_errors(ANY_ROUTE)}}}
    paths.update(_sign_in_paths())
    return paths


def _sign_in_paths() -> dict[str, Any]:
    """The pages of MCP sign-ins (docs/mcp-oauth.md): not JSON API routes."""
    def page(id: str, summary: str, description: str, kind: str,
             **more: Any) -> dict[str, Any]:
        return {"get": {"operationId": id, "summary": summary, "tags": ["mcp"],
                        "security": [], "description": description,
                        "responses": {"200": {"description": kind}, **more,
                                      **_errors(ANY_ROUTE)}}}

    return {
        "/api/v1/mcp-oauth/callback": page(
            "mcp-oauth-callback", "Where a sign-in to an MCP server comes back",
            "An authorization server sends the browser here with `code`, `state` and `iss`. "
            "The page holds no secret: its script posts them to the mcp-tool route "
            "(`login-finish`) with the person's own token, and the sign-in is kept only for "
            "the identity that started it.", "The page (HTML)"),
        "/api/v1/mcp-oauth/callback.js": page(
            "mcp-oauth-callback-script", "The callback page's script",
            "The script of `/api/v1/mcp-oauth/callback` (the page's CSP allows no inline "
            "script).", "The script (JavaScript)"),
        "/oauth/client-metadata.json": page(
            "mcp-oauth-client-metadata", "toolmesh's Client ID Metadata Document",
            "The client id toolmesh signs in with at authorization servers that take "
            "metadata documents (its own URL); served only where the gateway has a public "
            "HTTPS address (`--public-url`), else 404.", "The document (JSON)",
            **{"404": {"description": "the gateway has no public HTTPS address"}}),
    }
