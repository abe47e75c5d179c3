"""One WebSocket connection: an auth handshake, then many requests multiplexed by ``id``.

Frames in: ``{"type": "auth", "token": ...}`` and
``{"id", "workspace", "service", "flow", "request", "timeout"?}`` (``timeout``: seconds, at most
the gateway's deadline for the service). Frames out: ``{"type": "auth-ok",
"default_workspace": ...}`` (a scoped token's first workspace, else ``default``: where
requests that name no workspace go) / ``{"type": "auth-failed", ...}``, then per request
``{"id", "response", "complete"}`` for each response and ``{"id", "error", "complete": true}``
when it fails. A bad frame gets an error frame (with its id when it has one); input never
closes the connection — only the bounds do: no authentication within ``ws_auth_timeout``
seconds (or ``auth_timeout`` of connecting, ``auth-timeout``), room needed in the pool of
unauthenticated connections (:mod:`.strangers`, ``server-busy``), ``ws_auth_attempts`` wrong
tokens, too many wrong tokens from the client's address (:mod:`.throttle`, ``auth-throttled``)
or a token over its connection quota (:mod:`.quotas`, ``too-many-connections``;
``server-busy`` on a connection kept for the admin or with every connection taken): close 1008,
the reason starting with the error type, after an ``auth-failed`` frame saying why. An
authenticated socket with no request in flight and no frame from its client for
``ws_idle_timeout`` seconds is closed too (1001, ``idle-timeout: ...``): idle sockets cannot
pile up. Each request is admitted with the identity the socket authenticated as (checked again
per request, so a revoked token stops at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from aiohttp import WSCloseCode, WSMsgType, web

from toolmesh import json_codec
from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.errors import ToolmeshError
from toolmesh.gateway.access import IDENTITY
from toolmesh.gateway.auth import Identity
from toolmesh.gateway.bounds import BoundedWebSocket
from toolmesh.gateway.json_body import BadJson, parse_json, top_level_id
from toolmesh.gateway.quotas import Refusal
from toolmesh.gateway.throttle import Throttled

if TYPE_CHECKING:
    from toolmesh.gateway.socket_host import SocketHost

log = logging.getLogger("toolmesh.gateway.socket")


def _frame_id(frame: Any) -> str | int | None:
    """The id of a frame, if it has a usable one (a string or an integer)."""
    if not isinstance(frame, dict):
        return None
    request_id = frame.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return None
    return request_id


class SocketSession:
    """Serves one WebSocket until the client closes it or the gateway stops."""

    def __init__(self, gateway: SocketHost, ws: web.WebSocketResponse, *,
                 identity: Identity | None, peer: str | None = None,
                 connection: object | None = None) -> None:
        self.gateway = gateway
        self.ws = ws
        self.bounds = gateway.options.bounds
        #: who the socket authenticated as (the upgrade's token, or the last auth frame's)
        self.identity = identity
        #: the client's address (the throttle's key) and its connection (the quotas')
        self.peer = peer
        self.connection = connection
        self._loop = asyncio.get_running_loop()
        #: when the client last sent a frame or its last request ended
        self._active = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._idle_close: asyncio.Task[None] | None = None
        self._failed_auths = 0
        self._send_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._auth_deadline: asyncio.Task[None] | None = None
        #: the close of a stranger the gateway lets go of (:mod:`.strangers`)
        self._expelling: asyncio.Task[None] | None = None

    @property
    def authenticated(self) -> bool:
        return self.identity is not None

    async def send(self, frame: dict[str, Any]) -> None:
        if self.ws.closed:
            return
        async with self._send_lock:
            with contextlib.suppress(ConnectionError, RuntimeError):
                # a text frame: the bus's codec (orjson, json where it would differ)
                await self.ws.send_str(json_codec.dumps(frame).decode())

    async def error(self, request_id: str | int | None, type: str, message: str) -> None:
        await self.send({"id": request_id, "complete": True,
                         "error": {"type": type, "message": message}})

    async def run(self) -> None:
        if not self.authenticated:
            self._auth_deadline = asyncio.create_task(self._close_unless_authenticated())
            # a stranger pushed out of its pool or out of time is told why, then closed
            expelled = self.gateway.quotas.on_expel(self.connection, self._expel)
            if expelled is not None:
                self._expel(expelled)
        else:
            self._arm_idle(self.bounds.ws_idle_timeout)
        try:
            async for message in self.ws:
                self._active = self._loop.time()
                if message.type == WSMsgType.TEXT:
                    await self._on_frame(message.data)
                elif message.type == WSMsgType.BINARY:
                    await self.error(None, "bad-request", "frames must be JSON text")
                elif message.type == WSMsgType.ERROR:
                    log.info("websocket closed with error: %s", self.ws.exception())
        finally:
            if self._auth_deadline is not None:
                self._auth_deadline.cancel()
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            for task in list(self._tasks):
                task.cancel()
            # the close of an expelled stranger is let finish (bounded by ws_send_timeout)
            expelling = [self._expelling] if self._expelling is not None else []
            await asyncio.gather(*self._tasks, *expelling, return_exceptions=True)

    async def close(self, code: int = WSCloseCode.GOING_AWAY, message: bytes = b"") -> None:
        await self.ws.close(code=code, message=message)

    async def drain(self, timeout: float) -> None:
        """Take no more requests; those in flight get ``timeout`` seconds, then each ends with
        a ``service-stopping`` error frame; then close."""
        self._stopping = True
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.close()

    def _arm_idle(self, delay: float) -> None:
        """One timer per idle period, not a poll: it looks once, and either closes the socket
        or waits for the rest of the period since the last activity."""
        if self.bounds.ws_idle_timeout > 0 and self._idle_timer is None and not self._stopping:
            self._idle_timer = self._loop.call_later(delay, self._idle_check)

    def _idle_check(self) -> None:
        self._idle_timer = None
        if self._tasks or self.ws.closed:
            return  # re-armed when the last request ends
        left = self._active + self.bounds.ws_idle_timeout - self._loop.time()
        if left > 0:
            self._arm_idle(left)
            return
        timeout = f"{self.bounds.ws_idle_timeout:g}"
        # held until done (the close is bounded by ws_send_timeout), not cancelled with the
        # session's requests: the reading loop ends with it
        self._idle_close = asyncio.create_task(self.close(WSCloseCode.GOING_AWAY, (
            f"idle-timeout: no request for {timeout} s; connect again when needed").encode()))

    def _request_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not self._tasks:
            self._active = self._loop.time()
            self._arm_idle(self.bounds.ws_idle_timeout)

    async def _close_unless_authenticated(self) -> None:
        """A timer, not a poll: one wait, then one look."""
        await asyncio.sleep(self.bounds.ws_auth_timeout)
        if not self.authenticated:
            await self.close(WSCloseCode.POLICY_VIOLATION,
                             f"no authentication within {self.bounds.ws_auth_timeout:g} s".encode())

    async def _on_frame(self, text: str) -> None:
        try:
            frame = parse_json(text, max_depth=self.bounds.max_json_depth, what="the frame")
        except BadJson as e:
            request_id = _frame_id(e.value) if e.value is not None else top_level_id(text)
            await self.error(request_id, e.type, e.message)
            return
        request_id = _frame_id(frame)
        if not isinstance(frame, dict):
            await self.error(None, "bad-request", "a frame must be a JSON object")
            return
        if frame.get("type") == "auth":
            await self._on_auth(frame)
            return
        if not self.authenticated:
            await self.error(request_id, "auth-required",
                             'authenticate first: send {"type": "auth", "token": "..."}')
            return
        if request_id is None:
            await self.error(None, "bad-request", "a request frame needs an 'id' (a string or "
                                                  "an integer)")
            return
        if self._stopping:
            await self.error(request_id, "service-stopping", "the gateway is stopping; send "
                                                             "the request again")
            return
        if len(self._tasks) >= self.bounds.ws_in_flight:
            # answered here, in the reading loop: a client that floods without reading its
            # answers stalls on its own socket instead of piling up work in the gateway
            await self.error(request_id, "too-many-requests",
                             f"this connection already has {self.bounds.ws_in_flight} requests "
                             "in flight; wait for some to complete")
            return
        task = asyncio.create_task(self._on_request(request_id, frame))
        self._tasks.add(task)
        task.add_done_callback(self._request_done)

    async def _on_auth(self, frame: dict[str, Any]) -> None:
        token = frame.get("token")
        try:
            identity = await self.gateway.auth.identify(token if isinstance(token, str) else None,
                                                        peer=self.peer)
        except Throttled as e:  # too many wrong tokens from this address: not even checked
            await self._refuse(Refusal(429, e.type, e.message, f"{e.type}: too many wrong "
                                       f"tokens from this address; retry in "
                                       f"{e.retry_after_header} s"))
            return
        except ToolmeshError as e:  # the token table could not be loaded: not a wrong token
            await self.send({"type": "auth-failed",
                             "error": f"cannot check the token now: {e.message}"})
            return
        if identity is not None:
            refusal = self.gateway.quotas.claim(self.connection, identity)
            if refusal is not None:
                await self._refuse(refusal)
                return
        self.identity = identity
        if identity is not None:
            if self._auth_deadline is not None:
                self._auth_deadline.cancel()
            self._arm_idle(self.bounds.ws_idle_timeout)
            await self.send({"type": "auth-ok", "default_workspace": identity.default_workspace})
            return
        self._failed_auths += 1
        await self.send({"type": "auth-failed", "error": "invalid token"})
        if self._failed_auths >= self.bounds.ws_auth_attempts:
            await self.close(WSCloseCode.POLICY_VIOLATION,
                             f"{self._failed_auths} wrong tokens".encode())

    def _expel(self, refusal: Refusal) -> None:
        if self._expelling is None and not self.authenticated:
            self._expelling = asyncio.create_task(self._refuse(refusal))

    async def _refuse(self, refusal: Refusal) -> None:
        """Say why in an ``auth-failed`` frame, then close with the reason's short form."""
        self.identity = None
        await self.send({"type": "auth-failed", "error": refusal.message,
                         "error-type": refusal.type})
        await self.close(WSCloseCode.POLICY_VIOLATION, refusal.reason.encode()[:123])

    async def _on_request(self, request_id: str | int, frame: dict[str, Any]) -> None:
        try:
            await self._serve(request_id, frame)
        except asyncio.CancelledError:
            if self._stopping:
                await self.error(request_id, "service-stopping", "the gateway stopped before "
                                 "this request was answered; send it again")
            raise
        except Exception:  # a bug: the client still gets its answer, the log the traceback
            log.exception("request %r on the websocket failed", request_id)
            await self.error(request_id, "internal-error",
                             "the gateway failed on this request (a bug: its log has the details)")

    async def _serve(self, request_id: str | int, frame: dict[str, Any]) -> None:
        service, request = frame.get("service"), frame.get("request")
        if not isinstance(service, str) or not isinstance(request, dict):
            await self.error(request_id, "bad-request", "a request frame needs 'service' (a "
                                                        "string) and 'request' (an object)")
            return
        endpoint = self.gateway.find(service)
        if endpoint is None:
            known = ", ".join(sorted(self.gateway.endpoints))
            await self.error(request_id, "unknown-service",
                             f"unknown service {service!r}; available: {known}")
            return
        flow = frame.get("flow")
        workspace = frame.get("workspace")
        if flow is not None and not isinstance(flow, str):
            await self.error(request_id, "bad-request", "'flow' must be a string")
            return
        if workspace is not None and not isinstance(workspace, str):
            await self.error(request_id, "bad-request", "'workspace' must be a string")
            return

        async def send(response: dict[str, Any], final: bool) -> None:
            out: dict[str, Any] = {"id": request_id, "response": response, "complete": final}
            if final and response.get("error"):
                out["error"] = response["error"]
            await self.send(out)

        try:
            timeout = self.gateway.options.deadlines.for_request(service, frame.get("timeout"))
            caller = self.identity
            default = caller.default_workspace if caller is not None else DEFAULT_WORKSPACE
            await self.gateway.forward(endpoint, request, workspace=workspace or default,
                                       flow=flow if endpoint.per_flow else None,
                                       timeout=timeout, send=send, caller=caller,
                                       route="socket")
        except ToolmeshError as e:
            await self.error(request_id, e.type, e.message)


async def serve_socket(host: SocketHost, request: web.Request,
                       sessions: set[SocketSession]) -> web.StreamResponse:
    """The ``/api/v1/socket`` route: upgrade, then serve the session until it ends
    (``sessions`` holds it meanwhile, for the gateway's drain)."""
    bounds = host.options.bounds
    ws = BoundedWebSocket(send_timeout=bounds.ws_send_timeout, max_msg_size=bounds.max_body,
                          heartbeat=30)
    if not ws.can_prepare(request).ok:
        return web.json_response({"error": {"type": "bad-request", "message": "this is the "
                                            "WebSocket endpoint: connect to it with a WebSocket "
                                            "client"}}, status=400)
    await ws.prepare(request)
    session = SocketSession(host, ws, identity=request.get(IDENTITY), peer=request.remote,
                            connection=request.transport)
    sessions.add(session)
    try:
        await session.run()
    finally:
        sessions.discard(session)
    return ws
