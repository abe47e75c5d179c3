"""The gateway: TrustGraph's ``/api/v1`` over HTTP and WebSocket, forwarding to the bus.

* ``POST /api/v1/{service}`` — global services (``config``);
* ``POST /api/v1/flow/{flow}/service/{service}`` — per-flow services (``agent``, ``mcp-tool``,
  ``tool-service``: a configured tool service called by its descriptor id; ``agent-tools``:
  the agent's tools, each offered or not and why; ``agent-services``: every tool service,
  configured or announced, with its live instances and its tools; ``prompt``: a template
  completed by the LLM; ``text-completion``: the LLM itself);
* ``GET /api/v1/socket`` — WebSocket, one connection multiplexing many requests;
* ``GET /workbench/`` (``/`` redirects there) — the Workbench, a web UI that is a client of
  the routes above like any other (:mod:`toolmesh.web`).

Every request passes :class:`~toolmesh.gateway.access.AccessPolicy` first: cross-origin and
DNS-rebound requests are refused, bodies must be JSON, and with a token set, REST requests need
``Authorization: Bearer <token>`` (else 401) and a WebSocket must authenticate before its
requests are served. Config values leave the gateway with their secrets masked.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from toolmesh import json_codec
from toolmesh.approvals.policy import Policy
from toolmesh.bus.base import Bus
from toolmesh.config.client import ConfigClient
from toolmesh.config.service import (
    CONFIG_REQUEST_QUEUE,
    CONFIG_RESPONSE_QUEUE,
    DEFAULT_WORKSPACE,
)
from toolmesh.errors import RequestError, RequestTimeout, ToolmeshError
from toolmesh.gateway import call_keys
from toolmesh.gateway.access import IDENTITY, AccessPolicy, check_exposure, request_workspace
from toolmesh.gateway.auth import Auth, Identity
from toolmesh.gateway.bounds import BodyBudget, Bounds, CappedSite
from toolmesh.gateway.call_approval import CallApproval
from toolmesh.gateway.deadlines import Deadlines, hint
from toolmesh.gateway.endpoints import (
    BusEndpoint,
    Endpoint,
    FlowEndpoint,
    joined,
    prompt_request,
    without_nulls,
)
from toolmesh.gateway.flows import DEFAULT_FLOW, FlowRegistry, FlowService
from toolmesh.gateway.http_log import quiet_malformed_requests
from toolmesh.gateway.json_body import BadJson, parse_json, valid_text
from toolmesh.gateway.last_resort import last_resort
from toolmesh.gateway.library import LibrarianService
from toolmesh.gateway.memory import (
    LARGE_BODY,
    pin_mmap_threshold,
    read_body,
    release_memory,
)
from toolmesh.gateway.open_files import make_room
from toolmesh.gateway.openapi import openapi_handler
from toolmesh.gateway.quotas import ConnectionQuotas
from toolmesh.gateway.socket import SocketSession, serve_socket
from toolmesh.gateway.socket_host import Send
from toolmesh.gateway.throttle import throttle_of
from toolmesh.gateway.tokens import IamService, TokenRegistry, TokenService
from toolmesh.gateway.tool_service import ToolServiceEndpoint
from toolmesh.logs import register_secret
from toolmesh.mcp.addresses import DEFAULT_POLICY, AddressPolicy
from toolmesh.mcp_endpoint.metadata import resource_metadata
from toolmesh.rpc import deadline
from toolmesh.rpc.backoff import pauses
from toolmesh.schema.agent import is_final as agent_is_final
from toolmesh.secrets.masking import mask_config_response
from toolmesh.telemetry import metrics, tracing
from toolmesh.telemetry import query as metrics_query
from toolmesh.telemetry.exposition import PATH as METRICS_PATH
from toolmesh.telemetry.exposition import metrics_handler
from toolmesh.web import WORKBENCH_PATH, add_workbench
from toolmesh.web.sign_in import add_sign_in_pages

if TYPE_CHECKING:
    from toolmesh.mcp_endpoint.endpoint import McpEndpoint

log = logging.getLogger("toolmesh.gateway")

#: hands one response (and whether it is the final one) to the client

#: the HTTP status of each error type a call can end with (others: 502, the service's error)
ERROR_STATUS: dict[str, int] = {
    "bad-request": 400,
    "auth-failed": 401,
    "forbidden": 403,
    "approval-required": 403,
    "unknown-flow": 404,
    "unknown-service": 404,
    "too-many-requests": 429,
    "service-unavailable": 503,
    "timeout": 504,
}


@dataclass(frozen=True, kw_only=True)
class GatewayOptions:
    """How the gateway listens and whom it lets in."""

    host: str = "127.0.0.1"
    port: int = 8888
    token: str | None = None
    #: where people's browsers reach the gateway (``https://tm.example``): its MCP sign-in
    #: callback and client metadata document are named by it; ``None``: not known
    public_url: str | None = None
    #: origins of web pages allowed to call the gateway, besides its own
    allow_origins: tuple[str, ...] = ()
    #: Host names accepted besides localhost, 127.0.0.1 and [::1] when on loopback
    allow_hosts: tuple[str, ...] = ()
    #: listen beyond loopback without a token (refused otherwise)
    insecure: bool = False
    #: sizes, depths, in-flight caps and read timeouts
    bounds: Bounds = field(default_factory=Bounds)
    #: how long each route waits for its service (and the most a request may ask for)
    deadlines: Deadlines = field(default_factory=Deadlines)
    #: seconds requests in flight may take to finish when the gateway stops
    shutdown_timeout: float = 5.0
    #: seconds after start during which a request to a service nothing consumes yet waits
    #: for it (within its deadline) instead of failing at once with 503: parts started
    #: together, in any order, serve the first request
    startup_grace: float = 0.0
    extra_endpoints: tuple[Endpoint, ...] = field(default=())
    #: let the ``tool-service`` route call services that announce themselves (listening
    #: only: nothing a gateway client sends is ever announced)
    announcements: bool = True
    #: sockets already listening (:func:`toolmesh.gateway.listen.bind_listeners`) to serve
    #: instead of binding ``host`` and ``port``, which then only name them
    sockets: tuple[socket.socket, ...] = field(default=(), compare=False, repr=False)
    #: serve the Workbench (the web UI, :mod:`toolmesh.web`) at ``/workbench/``
    workbench: bool = True
    #: where ``mcp`` items put through the gateway may point (:mod:`toolmesh.mcp.addresses`)
    mcp_addresses: AddressPolicy = DEFAULT_POLICY
    #: the operator's default approval policy (``--approval``), as the agent's: the direct
    #: routes refuse what a dialog would ask a person about (:mod:`.call_approval`)
    approval: Policy = "never"


#: how much longer than the services' drain the gateway waits for their last answers
STOP_MARGIN = 0.5


def error_body(type: str, message: str) -> dict[str, Any]:
    return {"error": {"type": type, "message": message}}


def error_response(status: int, type: str, message: str) -> web.Response:
    return web.json_response(error_body(type, message), status=status)


class Gateway:
    """Serves the API until :meth:`stop`; ``url`` tells where it listens once started."""

    def __init__(self, bus: Bus, options: GatewayOptions = GatewayOptions()) -> None:
        check_exposure(host=options.host, token=options.token, insecure=options.insecure)
        self.bus = bus
        self.options = options
        # scoped tokens (toolmesh.gateway.tokens): checked against the config service's table
        self.tokens = TokenRegistry(bus, timeout=options.deadlines.of("config"))
        self.auth = Auth(options.token, self.tokens, throttle=throttle_of(options.bounds))
        self.quotas = ConnectionQuotas.of(options.bounds)  # per token and workspace
        register_secret(options.token)
        self.access = AccessPolicy.build(listen_host=options.host, auth=self.auth,
                                         allow_origins=options.allow_origins,
                                         allow_hosts=options.allow_hosts,
                                         mcp_addresses=options.mcp_addresses)
        self.endpoints: dict[str, Endpoint] = {}
        tool_services = ToolServiceEndpoint(bus, max_timeout=options.deadlines.of("tool-service"),
                                            announcements=options.announcements)

        def present_config(response: dict[str, Any]) -> dict[str, Any]:
            # a put answered here makes the descriptors read before it stale at once, before
            # its push reaches the gateway: the caller's next tool-service call sees the put
            tool_services.saw_config_version(response)
            return mask_config_response(without_nulls(response))

        self.add(BusEndpoint(bus, "config", request_queue=CONFIG_REQUEST_QUEUE,
                             response_queue=CONFIG_RESPONSE_QUEUE, hint=hint("config"),
                             present=present_config))
        self.add(FlowEndpoint(bus, "agent", request_queue="request:tg:agent:{flow}",
                              response_queue="response:tg:agent:{flow}",
                              is_final=agent_is_final))
        self.add(FlowEndpoint(bus, "mcp-tool", request_queue="request:tg:mcp-tool:{flow}",
                              response_queue="response:tg:mcp-tool:{flow}"))
        # the agent's tools and whether each is offered (answered by the agent process)
        self.add(FlowEndpoint(bus, "agent-tools", request_queue="request:tg:agent-tools:{flow}",
                              response_queue="response:tg:agent-tools:{flow}", part="agent"))
        # every tool service, configured or announced, and its live instances (the agent too)
        self.add(FlowEndpoint(bus, "agent-services",
                              request_queue="request:tg:agent-services:{flow}",
                              response_queue="response:tg:agent-services:{flow}", part="agent"))
        # the dialogs the agent recorded (docs/dialogs.md), read back from its journal
        self.add(FlowEndpoint(bus, "dialogs", request_queue="request:tg:dialogs:{flow}",
                              response_queue="response:tg:dialogs:{flow}", part="agent"))
        # the calls that wait for a person, and their answers (docs/approvals.md)
        self.add(FlowEndpoint(bus, "approvals", request_queue="request:tg:approvals:{flow}",
                              response_queue="response:tg:approvals:{flow}", part="agent"))
        self.add(tool_services)
        # TrustGraph's prompt and LLM services, on their wire (TrustGraph's clients stream
        # both over the WebSocket; REST joins a streamed answer into one body)
        self.add(FlowEndpoint(bus, "prompt", request_queue="request:tg:prompt:{flow}",
                              response_queue="response:tg:prompt:{flow}",
                              prepare=prompt_request, rest_result=joined("text")))
        self.add(FlowEndpoint(bus, "text-completion",
                              request_queue="request:tg:text-completion:{flow}",
                              response_queue="response:tg:text-completion:{flow}",
                              rest_result=joined("response")))
        self._config = ConfigClient(bus, timeout=options.deadlines.of("config"),
                                    when_no_consumer="fail", hint=hint("config"))
        self.flows = FlowRegistry(bus, self._config)
        # a call a person must approve runs on no route without them (docs/approvals.md)
        self.call_approval = CallApproval(endpoints=self.endpoints, default=options.approval)
        self.add(FlowService(self.flows, self._config))
        self.add(LibrarianService())
        self.add(TokenService(self.tokens))
        self.add(IamService(self.tokens))
        for endpoint in options.extra_endpoints:
            self.add(endpoint)
        self._runner: web.AppRunner | None = None
        self._bodies = BodyBudget(options.bounds.bodies_in_flight)
        self._sessions: set[SocketSession] = set()
        self._grace_until = 0.0
        self.url = ""
        #: the workspaces' tools for MCP clients, at /mcp (docs/mcp-server.md): started by
        #: the first request there (the MCP SDK's server takes ~0.6 s to load; a gateway no
        #: MCP client uses does not pay it)
        self.mcp: McpEndpoint | None = None
        self._mcp_starting = asyncio.Lock()
        self._mcp_closed = False

    def add(self, endpoint: Endpoint) -> None:
        """Make ``endpoint`` reachable by its name (replacing one of the same name)."""
        self.endpoints[endpoint.name] = endpoint

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.options.bounds.max_body,
                              middlewares=[self.quotas.tracking, last_resort,
                                           self.access.middleware, self.quotas.middleware])
        app.router.add_get("/api/v1/socket", self._socket)
        app.router.add_post("/api/v1/flow/{flow}/service/{service}", self._flow_rest)
        app.router.add_get("/api/v1/openapi.json", openapi_handler)
        app.router.add_post("/api/v1/{service}", self._global_rest)
        app.router.add_get("/api/v1/health", self._health)
        app.router.add_get(METRICS_PATH, self._metrics)
        app.router.add_get(metrics_query.PATH, self._metrics_query)
        for path in ("/mcp", "/mcp/{workspace}"):  # streamable HTTP: POST, GET (SSE), DELETE
            for method in ("GET", "POST", "DELETE"):
                app.router.add_route(method, path, self._mcp)
        for path in ("/.well-known/oauth-protected-resource",
                     "/.well-known/oauth-protected-resource/mcp"):
            app.router.add_get(path, resource_metadata)
        add_sign_in_pages(app, public_url=self.options.public_url)
        if self.options.workbench:
            add_workbench(app)
        return app

    async def start(self) -> None:
        self._mcp_closed = False
        self._grace_until = asyncio.get_running_loop().time() + self.options.startup_grace
        quiet_malformed_requests()
        pin_mmap_threshold()  # large bodies' memory goes back to the system once freed
        await self._config.start()
        await self.tokens.start()
        await self.flows.start()
        for endpoint in self.endpoints.values():
            await endpoint.start()
        # On stop, requests still waiting (a long dialog, a call whose service is gone) get
        # a few seconds, then are cancelled; aiohttp's default would hold the exit for 60 s.
        # keepalive_timeout: aiohttp closes a connection that has not completed a request in
        # that long, from its start too (a slow or silent client holds nothing for long).
        bounds = self.options.bounds
        # handler_cancellation: a client that disconnects cancels its request, and with it
        # the wait for the bus
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False,
                                     shutdown_timeout=self.options.shutdown_timeout
                                     + 2 * STOP_MARGIN,
                                     keepalive_timeout=bounds.idle_timeout,
                                     handler_cancellation=True)
        await self._runner.setup()
        make_room(self.quotas.accept_cap)  # a descriptor for each connection it may hold
        # the cap at accept covers the strangers' pool too; the quotas count the rest
        # backlog: room in the kernel's queue for every connection the gateway could hold, so
        # a client's SYN is not dropped (a retry 1 s later) while a flood is being refused
        site = CappedSite(self._runner, self.options.host, self.options.port,
                          max_connections=self.quotas.accept_cap, sockets=self.options.sockets,
                          watcher=self.quotas, backlog=max(128, self.quotas.accept_cap))
        try:
            await site.start()
        except OSError as e:
            await self.stop()
            raise RequestError(f"cannot listen on {self.options.host}:{self.options.port}: "
                               f"{e.strerror or e}", type="gateway-error") from None
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://{self.options.host}:{port}/"
        log.info("gateway listening on %s%s", self.url,
                 " (bearer token required)" if self.auth.required else "")
        if self.options.workbench:
            log.info("the Workbench (web UI): %s%s", self.url, WORKBENCH_PATH.lstrip("/"))
        log.info("MCP clients: %smcp (streamable HTTP; a client that starts a command: "
                 "toolmesh mcp serve --stdio -u %s)", self.url, self.url)
        if self.access.allow_origins:
            log.info("web pages of these origins may call it: %s",
                     ", ".join(sorted(self.access.allow_origins)))

    async def stop(self) -> None:
        # WebSocket requests in flight get the drain time as REST ones do (the services'
        # answers, or their service-stopping errors, still reach the clients), then an error
        # frame each; meanwhile the runner stops listening and waits for REST handlers.
        # MCP sessions end first: their SSE streams are requests in flight that end only with
        # them, and the runner would wait its shutdown timeout for each
        async with self._mcp_starting:
            self._mcp_closed = True
            if self.mcp is not None:
                await self.mcp.stop()
                self.mcp = None
        drains = [session.drain(self.options.shutdown_timeout + STOP_MARGIN)
                  for session in list(self._sessions)]
        cleanup = [self._runner.cleanup()] if self._runner is not None else []
        await asyncio.gather(*drains, *cleanup)
        self._runner = None
        for endpoint in self.endpoints.values():
            await endpoint.stop()
        await self.flows.stop()
        await self.tokens.stop()
        await self._config.stop()

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- REST ---------------------------------------------------------------------------

    async def _mcp(self, request: web.Request) -> web.StreamResponse:
        async with self._mcp_starting:
            if self._mcp_closed:
                return web.json_response({"error": {"type": "service-unavailable", "message":
                                                    "the gateway is stopping"}}, status=503)
            if self.mcp is None:
                from toolmesh.mcp_endpoint.endpoint import McpEndpoint
                from toolmesh.mcp_endpoint.session_table import SessionLimits

                bounds = self.options.bounds
                endpoint = McpEndpoint(self.bus, max_body=bounds.max_body, sessions=SessionLimits(
                    per_token=bounds.token_mcp_sessions,
                    per_workspace=bounds.workspace_mcp_sessions, total=bounds.mcp_sessions,
                    idle=bounds.mcp_session_idle * 60))
                await endpoint.start()
                self.mcp = endpoint
        return await self.mcp.handle(request, request[IDENTITY])

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "services": sorted(self.endpoints)})

    async def _metrics(self, request: web.Request) -> web.Response:
        """Prometheus' scrape; with a token set, it needs one with ``metrics:read``
        (docs/observability.md)."""
        try:
            await self.access.admit_metrics(request.get(IDENTITY))
        except ToolmeshError as e:
            return error_response(ERROR_STATUS.get(e.type, 403), e.type, e.message)
        return await metrics_handler(request)

    async def _metrics_query(self, request: web.Request) -> web.Response:
        """TrustGraph's ``/api/metrics/query`` (:mod:`toolmesh.telemetry.query`), from this
        process' metrics; the same capability as ``/metrics``."""
        try:
            await self.access.admit_metrics(request.get(IDENTITY))
        except ToolmeshError as e:
            return error_response(ERROR_STATUS.get(e.type, 403), e.type, e.message)
        status, body = metrics_query.answer(request.query.get("query"))
        return web.json_response(body, status=status)

    async def _global_rest(self, request: web.Request) -> web.Response:
        return await self._rest(request, request.match_info["service"], flow=None)

    async def _flow_rest(self, request: web.Request) -> web.Response:
        return await self._rest(request, request.match_info["service"],
                                flow=request.match_info["flow"])

    async def _read(self, request: web.Request) -> dict[str, Any] | web.Response:
        """The request's body as a JSON object, or the response that refuses it."""
        bounds = self.options.bounds
        size = request.content_length
        if size is not None and size > bounds.max_body:
            return error_response(413, "request-too-large", f"the request body is over the "
                                  f"gateway's limit of {bounds.max_body} bytes")
        reserved = size if size is not None else bounds.max_body
        if not self._bodies.take(reserved):
            return error_response(503, "server-busy", "the gateway is reading too many request "
                                  "bodies at once; try again shortly")
        try:
            async with asyncio.timeout(bounds.body_timeout):
                raw = await read_body(request, bounds.max_body)
            body = parse_json(raw, max_depth=bounds.max_json_depth)
        except web.HTTPRequestEntityTooLarge:
            return error_response(413, "request-too-large", f"the request body is over the "
                                  f"gateway's limit of {bounds.max_body} bytes")
        except TimeoutError:
            return error_response(408, "request-timeout", f"the request body did not arrive "
                                  f"within {bounds.body_timeout:g} s")
        except BadJson as e:
            return error_response(400, e.type, e.message)
        finally:
            self._bodies.give(reserved)
            if request.content.total_bytes >= LARGE_BODY:
                release_memory()
        if not isinstance(body, dict):
            return error_response(400, "bad-request", "the body must be a JSON object")
        return body

    async def _rest(self, request: web.Request, service: str, *, flow: str | None) -> web.Response:
        # origin, host, content type and token were checked by the access middleware
        body = await self._read(request)
        if isinstance(body, web.Response):
            return body
        endpoint = self.endpoints.get(service)
        if endpoint is None or endpoint.per_flow != (flow is not None):
            return web.json_response(error_body("unknown-service", self._unknown(service, flow)),
                                     status=404)
        caller = request.get(IDENTITY)
        workspace = request.headers.get("X-Workspace") or (
            caller.default_workspace if caller is not None else DEFAULT_WORKSPACE)
        if not valid_text(workspace):
            return error_response(400, "bad-request", "the X-Workspace header is not valid UTF-8")
        # A REST caller gets one body back, so a streaming agent would only add traffic.
        body.setdefault("streaming", False)
        responses: list[dict[str, Any]] = []

        async def collect(response: dict[str, Any], final: bool) -> None:
            responses.append(response)

        try:
            timeout = self.options.deadlines.for_request(service,
                                                         request.headers.get("X-Timeout"))
            await self.forward(endpoint, body, workspace=workspace, flow=flow,
                               timeout=timeout, send=collect, caller=caller,
                               headers=request.headers)
        except ToolmeshError as e:
            return error_response(ERROR_STATUS.get(e.type, 502), e.type, e.message)
        if not responses:  # an endpoint must answer at least once; a bug if not
            return error_response(502, "no-response", f"{service!r} ended without an answer")
        # the bus's codec (orjson, json where it would differ): the body is JSON either way
        return web.Response(body=json_codec.dumps(self.rest_result(service, responses)),
                            content_type="application/json")

    async def forward(self, endpoint: Endpoint, request: dict[str, Any], *, workspace: str,
                      flow: str | None, timeout: float, send: Send,
                      caller: Identity | None, route: str = "rest",
                      headers: Mapping[str, str] | None = None) -> None:
        """Call ``endpoint`` under ``timeout``, handing each response to ``send``.

        Raises :class:`ToolmeshError`: ``unknown-flow`` for a flow that does not exist (before
        anything is sent on the bus), ``service-unavailable`` when nothing consumes the
        service's queue, ``timeout`` when no (final) answer came in time — each with a message
        that says what to check; ``forbidden`` when ``caller`` may not send ``request``.

        Each call is counted (``route``: ``rest`` or ``socket``) and traced, continuing the
        ``traceparent`` of ``headers`` when the client sent one.
        """
        started = time.perf_counter()
        outcome: str | None = None
        answered_error: str | None = None

        async def observed(response: dict[str, Any], final: bool) -> None:
            nonlocal answered_error
            error = response.get("error")
            if final and isinstance(error, dict):
                answered_error = str(error.get("type") or "error")
            await send(response, final)

        with tracing.span(f"{endpoint.name} request", kind="server", parent=headers,
                          attributes={"toolmesh.service": endpoint.name,
                                      "toolmesh.route": route}) as span:
            try:
                with self.quotas.in_flight(caller):
                    await self._forward(endpoint, request, workspace=workspace, flow=flow,
                                        timeout=timeout, send=observed, caller=caller,
                                        route=route)
            except ToolmeshError as e:
                outcome = e.type
                raise
            except asyncio.CancelledError:
                outcome = "cancelled"  # the client went away
                raise
            finally:
                outcome = outcome or answered_error
                if outcome is not None:
                    tracing.failed(span, outcome)
                metrics.gateway_request(route=route, service=endpoint.name,
                                        outcome=outcome or "ok",
                                        seconds=time.perf_counter() - started)

    async def _forward(self, endpoint: Endpoint, request: dict[str, Any], *, workspace: str,
                       flow: str | None, timeout: float, send: Send,
                       caller: Identity | None, route: str) -> None:
        # scoped tokens: the capability and workspace it needs, and who asks (for the audit)
        request = await self.access.admit(caller, endpoint.name, request, workspace,
                                          route=route)
        flow = flow or DEFAULT_FLOW
        # Within this block every bus call made for the request ends before `timeout`.
        with deadline.handling(timeout):
            if endpoint.per_flow:
                await self.flows.check(workspace, flow)
            request = await self.call_approval.admit(
                endpoint.name, request, workspace=request_workspace(request, workspace),
                flow=flow, caller=caller)
            # a call of a tool goes with its idempotency key (the client's, or one made now)
            request = call_keys.with_key(endpoint.name, request,
                                         caller=caller.id if caller is not None else "local")
            scope = asyncio.timeout(timeout)
            loop = asyncio.get_running_loop()
            try:
                async with scope:
                    for pause in pauses():
                        sent = False
                        try:
                            async for response, final in endpoint.call(
                                    request, workspace=workspace, flow=flow):
                                sent = True
                                await send(response, final)
                            return
                        except RequestError as e:
                            # While the deployment starts, a service nothing consumes *yet*
                            # is waited for, as services wait for each other; later, 503 at
                            # once. Nothing was delivered (the broker returned the request).
                            left = self._grace_until - loop.time()
                            if e.type != "service-unavailable" or sent or left <= 0:
                                raise
                        await asyncio.sleep(min(pause, left))
            except TimeoutError:
                if not scope.expired():
                    raise
                raise RequestTimeout(f"{endpoint.name!r} did not answer within {timeout:g} s: "
                                     f"{hint(endpoint.name)}") from None

    def rest_result(self, service: str, responses: list[dict[str, Any]]) -> dict[str, Any]:
        """The one body a REST call returns for a (possibly streamed) set of responses: the
        endpoint's own ``rest_result`` when it has one, else the last response."""
        combine = getattr(self.endpoints.get(service), "rest_result", None)
        return combine(responses) if combine is not None else responses[-1]

    def _unknown(self, service: str, flow: str | None) -> str:
        kind = "per-flow" if flow is not None else "global"
        known = sorted(n for n, e in self.endpoints.items() if e.per_flow == (flow is not None))
        return f"unknown {kind} service {service!r}; available: {', '.join(known) or 'none'}"

    # -- WebSocket ----------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        return await serve_socket(self, request, self._sessions)

    def find(self, service: str) -> Endpoint | None:
        """The endpoint a WebSocket frame names (global services ignore ``flow``)."""
        return self.endpoints.get(service)

    async def wait_closed(self) -> None:
        """Wait forever (for callers that serve until cancelled)."""
        await asyncio.Event().wait()
