"""Open the SDK transport an :class:`McpServer` describes: streamable HTTP, SSE or stdio.

Each is an async context manager yielding the ``(read, write)`` streams a ``ClientSession``
runs on; it must be entered and exited in the same task (anyio task-group rule), which is why
only a connection's supervisor task opens one. The bearer token rides in the HTTP client's
default headers, so every request of the session carries it and no message has to.

The HTTP client keeps its connections (HTTP/1.1 keep-alive; no HTTP/2): a streamable-HTTP
session sends each call as a POST, and a POST that finds an idle connection skips the TCP
handshake. Two things defeated that with the SDK's own client (bench/mcp_call.py measures it):

* the SDK closes a POST's SSE answer as soon as it has read the JSON-RPC response in it, a
  moment before the server ends the stream, and an HTTP/1.1 connection whose response was not
  read to its end cannot carry another request, so every call opened a new TCP connection
  (and left a socket in TIME_WAIT). :func:`_finish_on_close` reads such a POST's answer to its
  end, briefly, before the connection goes back to the pool;
* only 20 idle connections were kept: each call in flight holds its own, so after a burst of
  more concurrent calls the rest were closed and the next burst connected again.

Every client shares one TLS context: making one loads the CA bundle, some 30 ms of CPU, which
each new session (each server, each reconnect) paid again with the SDK's client.

Every TCP connection goes through :class:`GuardedBackend`: the host is resolved here and each
address is checked against the operator's :class:`~toolmesh.mcp.addresses.AddressPolicy`
before it is connected to (the address checked is the address connected to: a name rebound
between a check and the connection cannot slip through). Redirects the SDK follows use the
same client, so they are checked too. The environment's proxy settings (``HTTPS_PROXY``...)
and ``~/.netrc`` are not used for MCP servers: a proxy's connections would skip the check.

When an item has an ``auth-token`` and its URL carries ``user:password``, the token wins: it
is sent as ``Authorization: Bearer``, and the URL's credentials are left out of the requests
(httpx would otherwise send them as Basic auth in place of the token).

A server whose sockets lack ``TCP_NODELAY`` (a socket made by hand and passed to uvicorn,
``socket.socket()`` without ``IPPROTO_TCP``: asyncio then does not set it) answers on a
reused connection only after the client's delayed ACK, 40 ms a call; uvicorn's own sockets,
gunicorn's, Node's and Go's have it.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpcore2
import httpx2
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import MCP_SESSION_ID, streamable_http_client

from toolmesh.mcp.addresses import DEFAULT_POLICY, AddressPolicy, AddressRefused, Reach, resolve
from toolmesh.mcp.config import McpServer

#: seconds to wait for connect/write on HTTP; reads may wait as long as a call may last
HTTP_TIMEOUT = 30.0
SSE_READ_TIMEOUT = 300.0
#: connections per session: one per request in flight (the mcp-tool service runs at most its
#: ``concurrency``, 64) plus the SSE stream a session keeps open. All of them may be kept idle
#: (httpx's default keeps 20), for httpx's 5 s: the idle timeout of uvicorn and Node too
HTTP_LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=100,
                            keepalive_expiry=5.0)
#: how long, and how much, of a POST's answer is read past where the SDK stopped reading it
#: before the connection is given up instead (a server that keeps the stream open)
FINISH_SECONDS = 0.25
FINISH_BYTES = 64 * 1024


class HttpWatch:
    """Sees every HTTP response of a connection: remembers the last error status (so a refused
    handshake can say "HTTP 401") and whether the server disowned our session id (404 to a
    request that carried it: the server restarted or expired the session)."""

    def __init__(self) -> None:
        self.last_error: str | None = None
        self.session_gone = False
        #: the last 401 or 403 (of a server that wants OAuth: "sign in", or "more scope"),
        #: until a request succeeds again
        self.challenge: httpx2.Response | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            self.challenge = response
        elif response.status_code < 400:
            self.challenge = None
        if response.status_code >= 400:
            self.last_error = f"HTTP {response.status_code} {response.reason_phrase}".strip()
            if response.status_code == 404 and MCP_SESSION_ID in response.request.headers:
                self.session_gone = True


def _headers(server: McpServer) -> dict[str, str] | None:
    return {"Authorization": f"Bearer {server.auth_token}"} if server.auth_token else None


def request_url(server: McpServer) -> str:
    """The URL requests go to: without ``user:password`` when the item has an auth-token (the
    token wins; see the module docstring)."""
    url = server.url or ""
    if not server.auth_token:
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=netloc))


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to addresses ``policy`` lets an item of
    ``reach`` use: :class:`AddressRefused` (with the reason, for the operator's log) when
    none of the host's addresses may be used."""

    def __init__(self, policy: AddressPolicy, reach: Reach) -> None:
        self._inner = httpcore2.AnyIOBackend()
        self._policy = policy
        self._reach = reach

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Any = None) -> httpcore2.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await resolve(host, port)
        except (OSError, ValueError) as e:  # ValueError: not a host (UnicodeError is one)
            raise httpcore2.ConnectError(f"cannot resolve {host!r}: {e}") from e
        except TimeoutError as e:
            raise httpcore2.ConnectTimeout(f"resolving {host!r} timed out") from e
        refusals: list[str] = []
        failure: Exception | None = None
        for address in addresses:
            refused = self._policy.refusal(host, address, port, reach=self._reach)
            if refused is not None:
                refusals.append(refused)
                continue
            try:  # an address, not a name: nothing is resolved again after the check
                return await self._inner.connect_tcp(str(address), port, timeout=timeout,
                                                     local_address=local_address,
                                                     socket_options=socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as e:
                failure = e
        if failure is not None:
            raise failure
        raise AddressRefused("; ".join(refusals) or f"{host!r} has no address")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx's transport over a :class:`GuardedBackend` (httpx has no argument for a network
    backend, so its pool is made again with one)."""

    def __init__(self, backend: GuardedBackend) -> None:
        super().__init__(verify=tls_context(), limits=HTTP_LIMITS, http2=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=tls_context(), max_connections=HTTP_LIMITS.max_connections,
            max_keepalive_connections=HTTP_LIMITS.max_keepalive_connections,
            keepalive_expiry=HTTP_LIMITS.keepalive_expiry, http1=True, http2=False,
            network_backend=backend)


class _FinishOnClose(httpx2.AsyncByteStream):
    """A response body that, closed before its end, first reads the rest (up to
    :data:`FINISH_BYTES`, for up to :data:`FINISH_SECONDS`) and drops it, so that the
    connection can serve the next request. httpcore decides: a connection goes back to the
    pool only if the response was read to its end, so giving up early is always safe."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._chunks: AsyncIterator[bytes] | None = None
        self._ended = False

    @property
    def elapsed(self) -> Any:  # httpx's Response.elapsed reads it from its stream
        return getattr(self._inner, "elapsed", None)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self._chunks = chunks = self._inner.__aiter__()
        try:
            async for chunk in chunks:
                yield chunk
            self._ended = True
        finally:
            if isinstance(chunks, AsyncGenerator):
                await chunks.aclose()

    async def aclose(self) -> None:
        try:
            if not self._ended and not _cancelling():
                await self._finish()
        finally:
            await self._inner.aclose()

    async def _finish(self) -> None:
        chunks = self._chunks
        if chunks is None:  # never read (a 202, an error status): start reading it here
            self._chunks = chunks = self._inner.__aiter__()
        left = FINISH_BYTES
        with anyio.move_on_after(FINISH_SECONDS):
            while left >= 0:
                try:
                    left -= len(await chunks.__anext__())
                except StopAsyncIteration:
                    self._ended = True
                    return
                except Exception:  # the connection failed: httpcore closes it
                    return


def _cancelling() -> bool:
    """Whether this task is being cancelled (a POST aborted, the session closing): then the
    connection is closed at once, as the SDK meant, not read on."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return False
    return task is not None and task.cancelling() > 0


async def _finish_on_close(response: httpx2.Response) -> None:
    """Response hook: a POST's answer is read to its end when closed early (see the module
    docstring). Not a GET's: the SDK's GET streams are long-lived. Nor an answer whose end is
    the connection's (neither a length nor chunks): that connection cannot be kept anyway."""
    if response.request.method == "POST" and (
            "content-length" in response.headers
            or "chunked" in response.headers.get("transfer-encoding", "").lower()):
        response.stream = _FinishOnClose(response.stream)  # type: ignore[arg-type]


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context of every session's HTTP client: httpx's default (the system's CA
    certificates, or ``SSL_CERT_FILE``/``SSL_CERT_DIR`` as they were at the first session)."""
    return httpx2.create_ssl_context()


def _client_factory(status: HttpWatch, backend: GuardedBackend) -> Any:
    """The SDK's ``McpHttpClientFactory``: its client (same timeouts, no redirects followed:
    the SDK follows them itself), with keep-alive kept, a shared TLS context, and only the
    addresses the policy allows (module docstring)."""
    def make(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
             auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers, auth=auth, transport=_GuardedTransport(backend),
            # no proxy from the environment (its connections would skip the address check),
            # no credentials from ~/.netrc
            trust_env=False,
            timeout=timeout or httpx2.Timeout(HTTP_TIMEOUT, read=SSE_READ_TIMEOUT),
            event_hooks={"response": [status, _finish_on_close]})
    return make


def http_client(policy: AddressPolicy, reach: Reach) -> httpx2.AsyncClient:
    """An HTTP client whose connections go only where ``policy`` lets an item of ``reach``
    go (for the requests of a sign-in: metadata, registration, tokens)."""
    return httpx2.AsyncClient(transport=_GuardedTransport(GuardedBackend(policy, reach)),
                              trust_env=False, timeout=httpx2.Timeout(HTTP_TIMEOUT))


@asynccontextmanager
async def open_transport(server: McpServer, status: HttpWatch, *,
                         policy: AddressPolicy = DEFAULT_POLICY,
                         auth: httpx2.Auth | None = None) -> AsyncIterator[Any]:
    """The ``(read_stream, write_stream)`` pair of a new connection to ``server``, whose
    TCP connections go only where ``policy`` lets it; ``auth``: what signs its HTTP requests
    (an item that signs in with OAuth: :class:`toolmesh.mcp_oauth.BearerAuth`)."""
    if server.transport == "stdio":
        params = StdioServerParameters(command=server.command or "", args=list(server.args),
                                       env=dict(server.env) or None)
        # errlog read at call time: the server's stderr goes where ours goes now.
        async with stdio_client(params, errlog=sys.stderr) as streams:
            yield streams
    elif server.transport == "sse":
        make = _client_factory(status, GuardedBackend(policy, server.reach))
        async with sse_client(request_url(server), headers=_headers(server),
                              timeout=HTTP_TIMEOUT, sse_read_timeout=SSE_READ_TIMEOUT,
                              httpx_client_factory=make, auth=auth) as streams:
            yield streams
    else:
        make = _client_factory(status, GuardedBackend(policy, server.reach))
        async with make(headers=_headers(server), auth=auth,
                        timeout=httpx2.Timeout(HTTP_TIMEOUT, read=SSE_READ_TIMEOUT)) as http, \
                streamable_http_client(request_url(server), http_client=http) as streams:
            yield streams
