"""Open the SDK transport an :class:`McpServer` describes: streamable HTTP, SSE or stdio.

Each is an async context manager yielding the ``(read, write)`` streams a ``ClientSession``
runs on; it must be entered and exited in the same task (anyio task-group rule), which is why
only a connection's supervisor task opens one. The bearer token rides in the HTTP client's
default headers, so every request of the session carries it and no message has to.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import MCP_SESSION_ID, streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolmesh.mcp.config import McpServer

#: seconds to wait for connect/write on HTTP; reads may wait as long as a call may last
HTTP_TIMEOUT = 30.0
SSE_READ_TIMEOUT = 300.0


class HttpWatch:
    """Sees every HTTP response of a connection: remembers the last error status (so a refused
    handshake can say "HTTP 401") and whether the server disowned our session id (404 to a
    request that carried it: the server restarted or expired the session)."""

    def __init__(self) -> None:
        self.last_error: str | None = None
        self.session_gone = False

    async def __call__(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self.last_error = f"HTTP {response.status_code} {response.reason_phrase}".strip()
            if response.status_code == 404 and MCP_SESSION_ID in response.request.headers:
                self.session_gone = True


def _headers(server: McpServer) -> dict[str, str] | None:
    return {"Authorization": f"Bearer {server.auth_token}"} if server.auth_token else None


def _client_factory(status: HttpWatch) -> Any:
    def make(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
             auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks["response"].append(status)
        return client
    return make


@asynccontextmanager
async def open_transport(server: McpServer, status: HttpWatch) -> AsyncIterator[Any]:
    """The ``(read_stream, write_stream)`` pair of a new connection to ``server``."""
    if server.transport == "stdio":
        params = StdioServerParameters(command=server.command or "", args=list(server.args),
                                       env=dict(server.env) or None)
        # errlog read at call time: the server's stderr goes where ours goes now.
        async with stdio_client(params, errlog=sys.stderr) as streams:
            yield streams
    elif server.transport == "sse":
        async with sse_client(server.url or "", headers=_headers(server), timeout=HTTP_TIMEOUT,
                              sse_read_timeout=SSE_READ_TIMEOUT,
                              httpx_client_factory=_client_factory(status)) as streams:
            yield streams
    else:
        make = _client_factory(status)
        async with make(headers=_headers(server),
                        timeout=httpx2.Timeout(HTTP_TIMEOUT, read=SSE_READ_TIMEOUT)) as http, \
                streamable_http_client(server.url or "", http_client=http) as streams:
            yield streams
