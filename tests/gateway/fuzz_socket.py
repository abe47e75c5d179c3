"""The WebSocket side of the gateway fuzzing harness (``fuzz_harness.py`` has the server, the
REST side and the findings): :class:`Socket`, a client WebSocket whose frames are read as they
come, with what a test asks of them (the frames with an id, how many completed, their shape),
and the ids a frame must be answered with."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp

from tests.gateway import fuzz_strategies as fz
from tests.gateway.fuzz_harness import BadFrame, Server, is_error_shape
from tests.gateway.fuzz_strategies import TOKEN, Frame, dumps


class Socket:
    """A client WebSocket whose frames are read as they come, by a task of its own."""

    def __init__(self, session: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse):
        self.session = session
        self.ws = ws
        self.frames: list[Any] = []
        self.closed: str | None = None
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, srv: Server, *, token: bool = True) -> Socket:
        session = aiohttp.ClientSession()
        try:
            query = f"?token={TOKEN}" if token else ""
            ws = await session.ws_connect(srv.url + "api/v1/socket" + query, autoclose=False,
                                          max_msg_size=0)
        except BaseException:
            await session.close()
            raise
        return cls(session, ws)

    async def _read(self) -> None:
        try:
            while True:
                message = await self.ws.receive()
                if message.type == aiohttp.WSMsgType.TEXT:
                    try:
                        self.frames.append(json.loads(message.data))
                    except ValueError:
                        self.frames.append(BadFrame(f"not JSON: {message.data[:300]!r}"))
                elif message.type == aiohttp.WSMsgType.BINARY:
                    self.frames.append(BadFrame(f"a binary frame: {message.data[:300]!r}"))
                else:
                    if message.type == aiohttp.WSMsgType.ERROR:
                        self.closed = f"the connection failed: {message.data!r}"
                    else:
                        self.closed = (f"closed by the server: {message.type.name} code "
                                       f"{self.ws.close_code} {message.extra!r}")
                    return
                self._changed.set()
        finally:
            self.closed = self.closed or "closed"
            self._changed.set()

    async def close(self) -> None:
        if not self.ws.closed:
            await self.ws.close()
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        await self.session.close()

    async def __aenter__(self) -> Socket:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send(self, frame: Frame | dict[str, Any]) -> None:
        data = frame.data if isinstance(frame, Frame) else dumps(frame)
        if self.closed:
            return
        try:
            if isinstance(data, bytes):
                await self.ws.send_bytes(data)
            else:
                await self.ws.send_str(data)
        except ConnectionError:
            pass  # the reader reports the close

    async def wait(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``done()`` or the socket closes; whether ``done()``."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not done():
            if self.closed:
                return done()
            self._changed.clear()
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return False
            try:
                async with asyncio.timeout(left):
                    await self._changed.wait()
            except TimeoutError:
                return done()
        return True

    # -- what came back

    def with_id(self, request_id: Any) -> list[dict[str, Any]]:
        return [f for f in self.frames if isinstance(f, dict) and "id" in f
                and f["id"] == request_id and type(f["id"]) is type(request_id)]

    def completed(self, request_id: Any) -> int:
        return sum(1 for f in self.with_id(request_id) if f.get("complete") is True)

    def anonymous_errors(self) -> int:
        return sum(1 for f in self.frames if isinstance(f, dict) and f.get("id") is None
                   and "error" in f and f.get("type") != "auth-failed")

    def check_frames(self) -> None:
        for f in self.frames:
            if isinstance(f, BadFrame):
                raise f
            if not isinstance(f, dict):
                raise BadFrame(f"a frame that is not an object: {f!r:.300}")
            if f.get("type") in ("auth-ok", "auth-failed"):
                continue
            if f.get("error") is not None and not is_error_shape(f["error"]):
                raise BadFrame(f"an error not in the documented shape: {f!r:.400}")
            if "complete" not in f:
                raise BadFrame(f"a frame without 'complete': {f!r:.400}")


def usable_id(frame: Frame) -> str | int | None:
    """The id the gateway must answer ``frame`` with, if it has one the gateway accepts (a
    string or an integer) and the test can read (Python's json parses the frame)."""
    if isinstance(frame.data, bytes):
        return None
    try:
        parsed = json.loads(frame.data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict) or parsed.get("type") == "auth":
        return None
    request_id = parsed.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return None
    if isinstance(request_id, str) and fz.has_surrogate(request_id):
        return None
    return request_id


def ping(i: Any) -> dict[str, Any]:
    return {"id": f"__ping__{i}", "service": "config",
            "request": {"operation": "list", "type": "fuzz"}}
