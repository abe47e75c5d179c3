"""One aiohttp request handed to an ASGI application (the MCP SDK's streamable-HTTP session
manager), its answer streamed back as it comes (SSE included).

The body is read by aiohttp first, within the gateway's bounds (``--max-body``, the body
timeout), and given to the application whole; the response is a ``StreamResponse`` written
piece by piece. A client that goes away is told to the application as ``http.disconnect``;
what it still writes goes nowhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from aiohttp import web

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
App = Callable[[Scope, Callable[[], Awaitable[Message]],
                Callable[[Message], Awaitable[None]]], Awaitable[None]]


async def serve(app: App, request: web.Request, *, extra: dict[str, Any],
                on_start: Callable[[web.StreamResponse], None] | None = None,
                on_done: Callable[[], None] | None = None) -> web.StreamResponse:
    """``app``'s answer to ``request``; ``extra``: put into the ASGI scope (who is calling);
    ``on_start``: told the response as its status and headers are known, before any of it is
    sent (what runs after this returns may never run: a client that hangs up cancels it);
    ``on_done``: told once the application is done with the request, however it ended."""
    try:
        body = await request.read()
    except BaseException:
        if on_done is not None:
            on_done()
        raise
    host, port = (request.transport.get_extra_info("sockname") or ("", 0))[:2] \
        if request.transport is not None else ("", 0)
    peer = request.transport.get_extra_info("peername") if request.transport else None
    scope: Scope = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method, "scheme": request.scheme, "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode("latin-1"),
        "query_string": request.query_string.encode("latin-1"), "root_path": "",
        "headers": [(k.lower(), v) for k, v in request.raw_headers],
        "client": tuple(peer[:2]) if peer else None, "server": (host, port),
        **extra,
    }
    delivered = False
    gone = asyncio.Event()

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()  # set when the response is done; a client that left cancels us
        return {"type": "http.disconnect"}

    response: web.StreamResponse | None = None

    async def send(message: Message) -> None:
        nonlocal response
        if message["type"] == "http.response.start":
            if gone.is_set():
                return
            response = web.StreamResponse(status=message["status"])
            for name, value in message.get("headers", ()):
                response.headers.add(_text(name), _text(value))
            if on_start is not None:
                on_start(response)
            if _is_stream(response):
                response.enable_chunked_encoding()
            try:
                await response.prepare(request)
            except ConnectionResetError:
                gone.set()
        elif message["type"] == "http.response.body":
            if gone.is_set() or response is None:
                return  # the client left: what is still sent goes nowhere
            try:
                data = message.get("body", b"")
                if data:
                    await response.write(data)
                if not message.get("more_body", False):
                    await response.write_eof()
                    gone.set()
            except ConnectionResetError:  # the client left mid-stream (a closed SSE stream)
                gone.set()

    # The application runs in a task of its own: a client that hangs up cancels this handler
    # (the gateway cancels handlers of closed connections), and the application must not be
    # cancelled halfway with it — the MCP SDK then forgets a session it has just opened. It
    # hears the client left (``http.disconnect``) and ends as it would.
    task = asyncio.ensure_future(app(scope, receive, send))
    _running.add(task)
    task.add_done_callback(_running.discard)
    if on_done is not None:
        task.add_done_callback(lambda _: on_done())
    try:
        await asyncio.shield(task)
    finally:
        gone.set()
    if response is None:
        return web.Response(status=500, text="the MCP endpoint gave no answer")
    return response


#: applications still answering clients that left (kept so that they are not collected)
_running: set[asyncio.Future[None]] = set()


def _text(value: bytes | str) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _is_stream(response: web.StreamResponse) -> bool:
    return response.headers.get("Content-Type", "").startswith("text/event-stream") \
        and "Content-Length" not in response.headers
