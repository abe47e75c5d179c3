"""The gateway's outermost middleware: whatever goes wrong, the client gets JSON.

aiohttp answers a route it does not know, a method a route does not take and an exception a
handler lets escape with a text body; every client of ``/api/v1`` reads JSON errors, so these
become ``{"error": {"type", "message"}}`` too, and a bug is logged with its traceback (the
client is told only that there was one).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

__all__ = ["last_resort"]

log = logging.getLogger("toolmesh.gateway")


def _error(status: int, type: str, message: str) -> web.Response:
    return web.json_response({"error": {"type": type, "message": message}}, status=status)


@web.middleware
async def last_resort(request: web.Request,
                      handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                      ) -> web.StreamResponse:
    """A bug must not reach the client as aiohttp's text 500: log it, answer JSON."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400 or request.path.startswith("/api/v1/socket"):
            raise
        response = _error(e.status, "not-found" if e.status == 404 else "bad-request",
                          e.reason if e.status != 404 else f"no route {request.path!r}")
        if "Allow" in e.headers:  # a 405 says which methods the route takes
            response.headers["Allow"] = e.headers["Allow"]
        return response
    except (asyncio.CancelledError, ConnectionError):
        raise
    except Exception:
        log.exception("unexpected failure answering %s %r", request.method, request.path)
        return _error(500, "internal-error", "the gateway failed on this request (a bug: its "
                      "log has the details)")
