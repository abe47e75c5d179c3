"""Every limit the gateway puts on what clients send, in one policy object.

Whatever a client sends, the gateway's memory and connections stay bounded:

* a body is at most ``max_body`` bytes (413), nested at most ``max_json_depth`` levels (400),
  and must arrive within ``body_timeout`` seconds (408);
* all bodies being read at once together hold at most ``bodies_in_flight`` bytes; a request
  beyond that waits for nothing and gets ``503 server-busy``;
* a connection that has not completed a request within ``idle_timeout`` seconds is closed
  (slow or silent clients: slowloris); at most ``max_connections`` authenticated connections
  are open at once, further ones are answered 503 and closed;
* connections that have not authenticated yet have a pool of their own (:mod:`.strangers`):
  ``stranger_share`` of ``max_connections`` at once (the address holding the most gives way
  to a newcomer), ``address_strangers`` from one address, and ``auth_timeout`` seconds to
  authenticate (with the pool off, strangers and authenticated together are capped at
  ``max_connections``);
* a WebSocket runs at most ``ws_in_flight`` requests at once (beyond: a ``too-many-requests``
  error frame), must authenticate within ``ws_auth_timeout`` seconds when a token is set, and
  is closed after ``ws_auth_attempts`` wrong tokens; a peer that leaves the gateway's frames
  unread for ``ws_send_timeout`` seconds is cut off (else it would hold its connection forever),
  and an authenticated one with no request for ``ws_idle_timeout`` seconds is closed (1001);
* one tenant cannot hold the rest out: per-token and per-workspace connection quotas, a
  per-token quota of requests in flight and the admin's reserve (:mod:`.quotas`); wrong tokens
  are throttled per client address (:mod:`.throttle`). 0 turns a quota or the throttle off;
* MCP sessions at ``/mcp`` are resources of their token: limited per token, per workspace
  and in all, and ended after ``mcp_session_idle`` minutes idle
  (:mod:`toolmesh.mcp_endpoint.session_table`).

What a body costs once answered is :mod:`toolmesh.gateway.memory`'s business.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable, Sequence
from http import HTTPStatus
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from toolmesh.gateway.json_body import MAX_DEPTH

MiB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """The gateway's limits (see the module docstring); the defaults suit one machine."""

    max_body: int = 16 * MiB
    max_json_depth: int = MAX_DEPTH
    bodies_in_flight: int = 64 * MiB
    body_timeout: float = 30.0
    idle_timeout: float = 15.0
    max_connections: int = 1024
    ws_in_flight: int = 64
    ws_auth_timeout: float = 5.0
    ws_auth_attempts: int = 3
    ws_send_timeout: float = 10.0
    ws_idle_timeout: float = 300.0
    #: connections not authenticated yet: their share of ``max_connections`` (on top of it),
    #: how many one address may hold (0: no limit but the fair share) and the seconds each has
    #: to authenticate (:mod:`toolmesh.gateway.strangers`)
    stranger_share: float = 0.125
    address_strangers: int = 0
    auth_timeout: float = 3.0
    #: connections one scoped token, and the tokens of one workspace, may hold at once
    token_connections: int = 128
    workspace_connections: int = 256
    #: requests one scoped token may have in flight at once (REST and WebSocket)
    token_requests: int = 256
    #: the share of ``max_connections`` only the admin may use
    admin_share: float = 0.0625
    #: wrong tokens per client address: ``auth_failure_burst`` at once, then this many a second
    auth_failure_rate: float = 2.0
    auth_failure_burst: int = 8
    #: client addresses the throttle remembers (least recently used forgotten first)
    auth_throttle_addresses: int = 16_384
    #: MCP sessions (``/mcp``) one scoped token, the scoped tokens of one workspace, and
    #: everyone together may hold, and the minutes one may go idle
    #: (:mod:`toolmesh.mcp_endpoint.session_table`)
    token_mcp_sessions: int = 64
    workspace_mcp_sessions: int = 256
    mcp_sessions: int = 2048
    mcp_session_idle: float = 5.0


class BodyBudget:
    """Bytes of request bodies being read at once, against a ceiling."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0

    def take(self, size: int) -> bool:
        """Reserve ``size`` bytes; ``False`` (nothing reserved) if that would pass the limit."""
        if self.in_use + size > self.limit and self.in_use > 0:
            return False  # one body alone may always use the whole budget
        self.in_use += size
        return True

    def give(self, size: int) -> None:
        self.in_use -= size


_ANSWER = (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
           b"Connection: close\r\nContent-Length: %d\r\n\r\n%s")
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
         b"Connection: close\r\nContent-Length: %d\r\n\r\n%s")
_BUSY_BODY = (b'{"error": {"type": "server-busy", "message": "the gateway has too many open '
              b'connections; try again shortly"}}')


class _Refuse(asyncio.Protocol):
    """Answers a connection beyond the cap with a 503 and closes it, reading nothing."""

    def connection_made(self, transport: Any) -> None:
        transport.write(_BUSY % (len(_BUSY_BODY), _BUSY_BODY))
        transport.close()


class ConnectionWatcher(Protocol):
    """Told of each connection the cap admits (:class:`~toolmesh.gateway.quotas.
    ConnectionQuotas`), with the means to close it."""

    def opened(self, connection: object, accepted: Accepted) -> None: ...

    def lost(self, connection: object) -> None: ...


class Accepted(Protocol):
    """A connection the cap admitted, as its watcher may close it."""

    @property
    def peer(self) -> str | None:
        """The client's address (``None``: not a network peer)."""

    def refuse(self, status: int, type: str, message: str) -> None:
        """Close it now: with an HTTP error if it has sent nothing yet, else as it is."""

    def finish(self) -> None:
        """Close it once the request it is serving is answered."""


class _Counted(asyncio.Protocol):
    """Counts its connection as open from the moment it is accepted until it is lost; all else
    is the protocol ``serve`` makes — made only once the watcher let the connection in, so a
    connection refused at once costs no HTTP machinery (refusals come in floods)."""

    def __init__(self, serve: Callable[[], asyncio.Protocol], site: CappedSite) -> None:
        self._serve = serve
        self._inner: asyncio.Protocol | None = None
        self._site = site
        site.open += 1
        self._transport: Any = None
        self._received = False

    @property
    def peer(self) -> str | None:
        name = self._transport.get_extra_info("peername") if self._transport else None
        return name[0] if isinstance(name, tuple) and name else None

    def refuse(self, status: int, type: str, message: str) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if not self._received:  # an answer before any request: no request's to mix with
            body = json.dumps({"error": {"type": type, "message": message}}).encode()
            transport.write(_ANSWER % (status, HTTPStatus(status).phrase.encode(), len(body),
                                       body))
        transport.close()

    def finish(self) -> None:
        close = getattr(self._inner, "close", None)  # aiohttp's: after the request in hand
        if close is not None:
            close()
        elif self._transport is not None:
            self._transport.close()

    def connection_made(self, transport: Any) -> None:
        self._transport = transport
        if self._site.watcher is not None:
            self._site.watcher.opened(transport, self)
        if not transport.is_closing():
            self._inner = self._serve()
            self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._received = True
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._site.open -= 1
        if self._site.watcher is not None and self._transport is not None:
            self._site.watcher.lost(self._transport)
        if self._inner is not None:
            self._inner.connection_lost(exc)


class CappedSite(web.TCPSite):
    """A TCP site that accepts at most ``max_connections`` connections at once.

    It counts connections itself, from the moment each is accepted: aiohttp lists one only
    once its ``connection_made`` has run, a loop iteration later, so a burst of connections
    accepted together all saw the same count and went past the cap (171 of 300 against a cap
    of 50). ``watcher`` hears of every connection (:mod:`.quotas` decides whom they serve,
    and whether a stranger may stay).
    """

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *,
                 max_connections: int, sockets: Sequence[socket.socket] = (),
                 watcher: ConnectionWatcher | None = None, **kwargs: Any) -> None:
        super().__init__(runner, host, port, **kwargs)
        self.max_connections = max_connections
        self.watcher = watcher
        #: sockets already listening, served instead of binding ``host`` and ``port``
        self.sockets = tuple(sockets)
        #: the servers of the sockets after the first (``_server`` serves that one)
        self._more_servers: list[asyncio.AbstractServer] = []
        #: connections accepted and not yet lost
        self.open = 0

    async def start(self) -> None:
        # BaseSite.start registers the site; TCPSite.start would create the server itself.
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        cap = self.max_connections

        def protocol() -> asyncio.BaseProtocol:
            return _Counted(server, self) if self.open < cap else _Refuse()

        loop = asyncio.get_running_loop()
        if self.sockets:
            # asyncio serves one given socket per server; the connection cap spans them all
            servers = [await loop.create_server(protocol, sock=sock, backlog=self._backlog)
                       for sock in self.sockets]
            self._server, self._more_servers = servers[0], servers[1:]
        else:
            self._server = await loop.create_server(protocol, self._host, self._port,
                                                    backlog=self._backlog,
                                                    reuse_address=self._reuse_address,
                                                    reuse_port=self._reuse_port)
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port

    async def stop(self) -> None:
        for server in self._more_servers:
            server.close()
        self._more_servers = []
        await super().stop()


class BoundedWebSocket(web.WebSocketResponse):
    """A WebSocket whose peer cannot hold the connection by not reading it.

    aiohttp waits without limit for a peer to read: a send blocks once the buffers are full,
    ``close()`` first drains them, and a transport closed with bytes still unsent stays open
    until they are sent, so a client that floods without reading kept its connection (and a
    slot under ``max_connections``) forever, past the auth timeout and the heartbeat, and held
    up the gateway's stop. Here a send or close that waits longer than ``send_timeout`` cuts
    the connection: its socket is closed at once, whatever is still queued dropped.
    """

    def __init__(self, *, send_timeout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.send_timeout = send_timeout
        self._transport: asyncio.Transport | None = None

    async def prepare(self, request: web.BaseRequest) -> Any:
        self._transport = request.transport
        return await super().prepare(request)

    async def send_frame(self, message: bytes, opcode: Any, compress: int | None = None) -> None:
        await self._bounded(super().send_frame(message, opcode, compress))

    async def send_str(self, data: str, compress: int | None = None) -> None:
        await self._bounded(super().send_str(data, compress))

    async def send_bytes(self, data: bytes, compress: int | None = None) -> None:
        await self._bounded(super().send_bytes(data, compress))

    async def close(self, *, code: int = 1000, message: bytes = b"", drain: bool = True) -> bool:
        try:
            async with asyncio.timeout(self.send_timeout):
                return await super().close(code=code, message=message, drain=drain)
        except TimeoutError:
            self._cut()
            return True
        finally:
            # Bytes still queued keep the transport open until the peer reads them: it gets
            # one more ``send_timeout`` (abort is a no-op on a connection already gone).
            transport = self._transport
            if transport is not None and transport.get_write_buffer_size():
                asyncio.get_running_loop().call_later(self.send_timeout, self._cut)

    async def _bounded(self, sending: Any) -> None:
        try:
            async with asyncio.timeout(self.send_timeout):
                await sending
        except TimeoutError:
            self._cut()
            raise ConnectionResetError(f"the peer left our frames unread for "
                                       f"{self.send_timeout:g} s; connection cut") from None

    def _cut(self) -> None:
        if self._transport is not None:
            self._transport.abort()

