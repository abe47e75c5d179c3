"""One WebSocket connection: an auth handshake, then many requests multiplexed by ``id``.

Frames in: ``{"type": "auth", "token": ...}`` and
``{"id", "workspace", "service", "flow", "request"}``. Frames out: ``{"type": "auth-ok",
"default_workspace": ...}`` / ``{"type": "auth-failed", ...}``, then per request
``{"id", "response", "complete"}`` for each response and ``{"id", "error", "complete": true}``
when it fails. A bad frame gets an error frame; it never closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.errors import RequestError

if TYPE_CHECKING:
    from toolmesh.gateway.server import Gateway

log = logging.getLogger("toolmesh.gateway.socket")


class SocketSession:
    """Serves one WebSocket until the client closes it or the gateway stops."""

    def __init__(self, gateway: Gateway, ws: web.WebSocketResponse, *, authenticated: bool) -> None:
        self.gateway = gateway
        self.ws = ws
        self.authenticated = authenticated or not gateway.auth.required
        self._send_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def send(self, frame: dict[str, Any]) -> None:
        if self.ws.closed:
            return
        async with self._send_lock:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.ws.send_str(json.dumps(frame))

    async def run(self) -> None:
        try:
            async for message in self.ws:
                if message.type == WSMsgType.TEXT:
                    await self._on_frame(message.data)
                elif message.type == WSMsgType.BINARY:
                    await self.send({"id": None, "complete": True, "error": {
                        "type": "bad-request", "message": "frames must be JSON text"}})
                elif message.type == WSMsgType.ERROR:
                    log.info("websocket closed with error: %s", self.ws.exception())
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        await self.ws.close()

    async def _on_frame(self, text: str) -> None:
        try:
            frame = json.loads(text)
        except json.JSONDecodeError as e:
            await self.send({"id": None, "complete": True,
                             "error": {"type": "bad-request", "message": f"frame is not JSON: {e}"}})
            return
        if not isinstance(frame, dict):
            await self.send({"id": None, "complete": True,
                             "error": {"type": "bad-request", "message": "frame must be an object"}})
            return
        if frame.get("type") == "auth":
            await self._on_auth(frame)
            return
        task = asyncio.create_task(self._on_request(frame))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _on_auth(self, frame: dict[str, Any]) -> None:
        token = frame.get("token")
        if self.gateway.auth.accepts(token if isinstance(token, str) else None):
            self.authenticated = True
            await self.send({"type": "auth-ok", "default_workspace": DEFAULT_WORKSPACE})
        else:
            self.authenticated = False
            await self.send({"type": "auth-failed", "error": "invalid token"})

    async def _on_request(self, frame: dict[str, Any]) -> None:
        request_id = frame.get("id")

        async def fail(type: str, message: str) -> None:
            await self.send({"id": request_id, "complete": True,
                             "error": {"type": type, "message": message}})

        if not self.authenticated:
            await fail("auth-required", "authenticate first: send "
                                        '{"type": "auth", "token": "..."}')
            return
        service, request = frame.get("service"), frame.get("request")
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            await fail("bad-request", "a request frame needs an 'id'")
            return
        if not isinstance(service, str) or not isinstance(request, dict):
            await fail("bad-request", "a request frame needs 'service' (a string) and "
                                      "'request' (an object)")
            return
        flow = frame.get("flow") if isinstance(frame.get("flow"), str) else None
        endpoint = self.gateway.find(service, flow)
        if endpoint is None:
            known = ", ".join(sorted(self.gateway.endpoints))
            await fail("unknown-service", f"unknown service {service!r}; available: {known}")
            return
        workspace = frame.get("workspace") if isinstance(frame.get("workspace"), str) else None
        try:
            async for response, final in endpoint.call(
                    request, workspace=workspace or DEFAULT_WORKSPACE, flow=flow or "default"):
                out: dict[str, Any] = {"id": request_id, "response": response, "complete": final}
                if final and response.get("error"):
                    out["error"] = response["error"]
                await self.send(out)
        except RequestError as e:
            await fail(e.type, e.message)
