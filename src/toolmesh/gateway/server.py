"""The gateway: TrustGraph's ``/api/v1`` over HTTP and WebSocket, forwarding to the bus.

* ``POST /api/v1/{service}`` — global services (``config``);
* ``POST /api/v1/flow/{flow}/service/{service}`` — per-flow services (``agent``, ``mcp-tool``,
  ``tool-service``: a configured tool service called by its descriptor id);
* ``GET /api/v1/socket`` — WebSocket, one connection multiplexing many requests.

Every request passes :class:`~toolmesh.gateway.access.AccessPolicy` first: cross-origin and
DNS-rebound requests are refused, bodies must be JSON, and with a token set, REST requests need
``Authorization: Bearer <token>`` (else 401) and a WebSocket must authenticate before its
requests are served. Config values leave the gateway with their secrets masked.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from toolmesh.bus.base import Bus
from toolmesh.config.service import CONFIG_REQUEST_QUEUE, CONFIG_RESPONSE_QUEUE, DEFAULT_WORKSPACE
from toolmesh.errors import RequestError
from toolmesh.gateway.access import AUTHENTICATED, AccessPolicy, check_exposure
from toolmesh.gateway.auth import Auth
from toolmesh.gateway.endpoints import BusEndpoint, Endpoint, FlowEndpoint, without_nulls
from toolmesh.gateway.http_log import quiet_malformed_requests
from toolmesh.gateway.socket import SocketSession
from toolmesh.gateway.tool_service import ToolServiceEndpoint
from toolmesh.logs import register_secret
from toolmesh.schema.agent import is_final as agent_is_final
from toolmesh.secrets.masking import mask_config_response

log = logging.getLogger("toolmesh.gateway")

DEFAULT_MAX_BODY = 16 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class GatewayOptions:
    """How the gateway listens and whom it lets in."""

    host: str = "127.0.0.1"
    port: int = 8888
    token: str | None = None
    #: origins of web pages allowed to call the gateway, besides its own
    allow_origins: tuple[str, ...] = ()
    #: Host names accepted besides localhost, 127.0.0.1 and [::1] when on loopback
    allow_hosts: tuple[str, ...] = ()
    #: listen beyond loopback without a token (refused otherwise)
    insecure: bool = False
    max_body: int = DEFAULT_MAX_BODY
    timeout: float = 600.0
    #: seconds requests in flight may take to finish when the gateway stops
    shutdown_timeout: float = 5.0
    extra_endpoints: tuple[Endpoint, ...] = field(default=())


def error_body(type: str, message: str) -> dict[str, Any]:
    return {"error": {"type": type, "message": message}}


class Gateway:
    """Serves the API until :meth:`stop`; ``url`` tells where it listens once started."""

    def __init__(self, bus: Bus, options: GatewayOptions = GatewayOptions()) -> None:
        check_exposure(host=options.host, token=options.token, insecure=options.insecure)
        self.bus = bus
        self.options = options
        self.auth = Auth(options.token)
        register_secret(options.token)
        self.access = AccessPolicy.build(listen_host=options.host, auth=self.auth,
                                         allow_origins=options.allow_origins,
                                         allow_hosts=options.allow_hosts)
        self.endpoints: dict[str, Endpoint] = {}
        self.add(BusEndpoint(bus, "config", request_queue=CONFIG_REQUEST_QUEUE,
                             response_queue=CONFIG_RESPONSE_QUEUE, timeout=options.timeout,
                             present=lambda r: mask_config_response(without_nulls(r))))
        self.add(FlowEndpoint(bus, "agent", request_queue="request:tg:agent:{flow}",
                              response_queue="response:tg:agent:{flow}", timeout=options.timeout,
                              is_final=agent_is_final))
        self.add(FlowEndpoint(bus, "mcp-tool", request_queue="request:tg:mcp-tool:{flow}",
                              response_queue="response:tg:mcp-tool:{flow}",
                              timeout=options.timeout))
        self.add(ToolServiceEndpoint(bus, max_timeout=options.timeout))
        for endpoint in options.extra_endpoints:
            self.add(endpoint)
        self._runner: web.AppRunner | None = None
        self._sessions: set[SocketSession] = set()
        self.url = ""

    def add(self, endpoint: Endpoint) -> None:
        """Make ``endpoint`` reachable by its name (replacing one of the same name)."""
        self.endpoints[endpoint.name] = endpoint

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.options.max_body,
                              middlewares=[self.access.middleware])
        app.router.add_get("/api/v1/socket", self._socket)
        app.router.add_post("/api/v1/flow/{flow}/service/{service}", self._flow_rest)
        app.router.add_post("/api/v1/{service}", self._global_rest)
        app.router.add_get("/api/v1/health", self._health)
        return app

    async def start(self) -> None:
        quiet_malformed_requests()
        for endpoint in self.endpoints.values():
            await endpoint.start()
        # On stop, requests still waiting (a long dialog, a call whose service is gone) get
        # a few seconds, then are cancelled; aiohttp's default would hold the exit for 60 s.
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False,
                                     shutdown_timeout=self.options.shutdown_timeout)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.options.host, self.options.port)
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
        if self.access.allow_origins:
            log.info("web pages of these origins may call it: %s",
                     ", ".join(sorted(self.access.allow_origins)))

    async def stop(self) -> None:
        for session in list(self._sessions):
            await session.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for endpoint in self.endpoints.values():
            await endpoint.stop()

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- REST ---------------------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "services": sorted(self.endpoints)})

    async def _global_rest(self, request: web.Request) -> web.Response:
        return await self._rest(request, request.match_info["service"], flow=None)

    async def _flow_rest(self, request: web.Request) -> web.Response:
        return await self._rest(request, request.match_info["service"],
                                flow=request.match_info["flow"])

    async def _rest(self, request: web.Request, service: str, *, flow: str | None) -> web.Response:
        # origin, host, content type and token were checked by the access middleware
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return web.json_response(error_body(
                "request-too-large",
                f"the request body is over the gateway's limit of {self.options.max_body} bytes"),
                status=413)
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            return web.json_response(error_body("bad-request", f"the body is not JSON: {e}"),
                                     status=400)
        if not isinstance(body, dict):
            return web.json_response(error_body("bad-request", "the body must be a JSON object"),
                                     status=400)
        endpoint = self.endpoints.get(service)
        if endpoint is None or endpoint.per_flow != (flow is not None):
            return web.json_response(error_body("unknown-service", self._unknown(service, flow)),
                                     status=404)
        workspace = request.headers.get("X-Workspace") or DEFAULT_WORKSPACE
        # A REST caller gets one body back, so a streaming agent would only add traffic.
        body.setdefault("streaming", False)
        try:
            responses = [r async for r, _ in endpoint.call(body, workspace=workspace,
                                                           flow=flow or "default")]
        except RequestError as e:
            status = 504 if e.type == "timeout" else 502
            return web.json_response(error_body(e.type, e.message), status=status)
        return web.json_response(self.rest_result(service, responses))

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

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=self.options.max_body, heartbeat=30)
        await ws.prepare(request)
        session = SocketSession(self, ws, authenticated=request.get(AUTHENTICATED, False))
        self._sessions.add(session)
        try:
            await session.run()
        finally:
            self._sessions.discard(session)
        return ws

    def find(self, service: str, flow: str | None) -> Endpoint | None:
        """The endpoint a WebSocket frame names (global services ignore ``flow``)."""
        return self.endpoints.get(service)

    async def wait_closed(self) -> None:
        """Wait forever (for callers that serve until cancelled)."""
        await asyncio.Event().wait()
