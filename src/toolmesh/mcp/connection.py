"""One supervised connection to an MCP server: a task that owns the transport and session.

The transport's context managers open and close in this one task (anyio's task-group rule);
callers on other tasks await :attr:`Connection.ready` and then share the session. The
connection is over once :attr:`Connection.ended` is set: the server hung up, a call found the
session gone, or it was closed on purpose.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp import ClientSession
from mcp.client._probe import negotiate_auto  # the SDK's own Client connects with it
from mcp.shared.exceptions import MCPError

from toolmesh import __version__
from toolmesh.mcp.addresses import DEFAULT_POLICY, AddressPolicy, AddressRefused
from toolmesh.mcp.config import McpServer
from toolmesh.mcp.elicitation import Elicitor
from toolmesh.mcp.errors import (
    McpError,
    McpSignInRefused,
    McpTokenRefused,
    McpUnreachable,
    describe,
    leaves,
)
from toolmesh.mcp.remote_tool import RemoteTool
from toolmesh.mcp.sampling import Sampler
from toolmesh.mcp.transports import HttpWatch, open_transport

log = logging.getLogger("toolmesh.mcp")

#: stdio shutdown is close stdin, 2 s grace, SIGTERM, 2 s, SIGKILL (the SDK's stdio_client)
CLOSE_TIMEOUT = 10.0
CLIENT_INFO = mcp_types.Implementation(name="toolmesh", version=__version__)


class EndWatch:
    """A transport's read stream that sets ``ended`` when the server hangs up (end of stream).

    The SDK surfaces a hang-up only to requests in flight; watching the stream lets an idle
    connection notice (a stdio child that died, an SSE stream that closed) and be replaced
    before the next call instead of failing it.
    """

    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    def __aiter__(self) -> EndWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> EndWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Connection:
    """One supervised connection: a task that opens the transport and session, then holds
    them until the connection ends or is closed."""

    def __init__(self, server: McpServer, *, connect_timeout: float,
                 sampler: Sampler | None = None, elicitor: Elicitor | None = None,
                 on_tools_changed: Callable[[Connection], None] | None = None,
                 addresses: AddressPolicy = DEFAULT_POLICY,
                 auth: httpx2.Auth | None = None) -> None:
        self.server = server
        #: when it was opened (Unix seconds): a grant changed since ends it (sessions.py)
        self.opened = time.time()
        self._auth = auth  # signs the HTTP requests of a server that wants OAuth
        self.addresses = addresses  # where its TCP connections may go (mcp/addresses.py)
        self.key = server.connection_key
        self.ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self.ended = asyncio.Event()  # the server hung up, a call found it gone, or close()
        self.closing = False  # closed on purpose: reconfigured, forgotten, shut down
        self.failure: BaseException | None = None
        self.tools: list[RemoteTool] | None = None
        self.tools_lock = asyncio.Lock()
        self.watch = HttpWatch()
        self._connect_timeout = connect_timeout
        # None unless the item allows sampling: the SDK then refuses it, as it always did
        self._sampling = sampler.callback_for(server) if sampler is not None else None
        # questions for the person behind the dialog of the call they come in (elicitation.py)
        self._elicitation = elicitor.callback_for(server) if elicitor is not None else None
        self._on_tools_changed = on_tools_changed  # the server's tools/list_changed notices
        # A context of its own: the session outlives the call that opened it, and what it does
        # later (a server's sampling requests) must not run under that call's span or deadline.
        self.task = asyncio.create_task(self._supervise(), name=f"mcp-session:{server.id}",
                                        context=contextvars.Context())

    @property
    def usable(self) -> bool:
        return not self.ended.is_set()

    async def _supervise(self) -> None:
        server = self.server
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(
                    open_transport(server, self.watch, policy=self.addresses,
                                   auth=self._auth))
                session = await stack.enter_async_context(
                    ClientSession(EndWatch(read, self.ended), write, client_info=CLIENT_INFO,
                                  sampling_callback=self._sampling,
                                  elicitation_callback=self._elicitation,
                                  message_handler=self._on_message))
                with anyio.fail_after(self._connect_timeout):
                    if server.protocol == "auto":
                        await negotiate_auto(session)  # 2026-07-28 when the server speaks it
                    else:
                        await session.initialize()
                self.ready.set_result(session)
                log.info("connected to MCP server %s (%s, for %r)", server.where,
                         server.transport, server.id)
                await self.ended.wait()
        except Exception as e:  # the transport's task group failed, or the handshake did
            self.failure = e
        finally:
            self.ended.set()
            if not self.ready.done():
                self.ready.set_exception(self._connect_error())
                self.ready.exception()  # retrieved: a connection nobody waited on is no error
            elif not self.closing:
                log.warning("connection to MCP server %s ended%s; the next call reconnects",
                            server.where, f": {describe(self.failure)}" if self.failure else "")

    async def _on_message(self, message: Any) -> None:
        """The SDK's message handler: a server notice that its tools changed drops our list of
        them (the next call lists them again) and tells the pool. Other messages: ignored, as
        the SDK's default handler does."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.tools = None
            if self._on_tools_changed is not None:
                self._on_tools_changed(self)

    def _connect_error(self) -> McpError:
        """What a caller learns of a failed connection. A stdio server's is in full (only the
        admin configures those); an HTTP server's is one opaque message whatever the cause —
        so an item cannot tell a database port from a closed one — except a refused token."""
        server = self.server
        detail = self._failure_detail()
        if server.transport == "stdio":
            return McpError(f"cannot start MCP server {server.id!r} ({server.where}): {detail}")
        status = self.watch.last_error or ""
        if server.oauth is not None and self.watch.challenge is not None:
            return McpSignInRefused(f"MCP server {server.id!r} at {server.where} refused the "
                                    f"sign-in ({status})", challenge=self.watch.challenge)
        if status.startswith(("HTTP 401", "HTTP 403")):
            return McpTokenRefused.at(server.id, server.where, status,
                                      has_token=bool(server.auth_token))
        log.warning("cannot connect to MCP server %s (for %r of workspace %r): %s", server.where,
                    server.id, server.workspace, detail)
        return McpUnreachable.at(server.id, server.where)

    def _failure_detail(self) -> str:
        """The cause of a failed connection, for the operator's log."""
        server = self.server
        causes = list(leaves(self.failure)) if self.failure is not None else []
        refused = [e for e in causes if isinstance(e, AddressRefused)]
        if refused:
            return f"the address is not allowed: {refused[0].message}"
        if any(isinstance(e, TimeoutError) for e in causes):
            detail = f"no answer to the MCP handshake within {self._connect_timeout:g} s"
        elif any(isinstance(e, MCPError) and e.code == mcp_types.CONNECTION_CLOSED
                 for e in causes):
            detail = ("the process exited before the MCP handshake (see its stderr)"
                      if server.transport == "stdio" else
                      "the server closed the connection during the MCP handshake")
        elif self.failure is not None:
            detail = self.watch.last_error or describe(self.failure)
        else:
            detail = "the connection closed during the handshake"
        return detail

    async def finished(self, timeout: float) -> None:
        """Wait (up to ``timeout``) for the supervisor to have closed everything."""
        # asyncio.wait neither cancels the task nor raises if close() cancelled it
        await asyncio.wait({self.task}, timeout=max(timeout, 0.0))

    async def close(self) -> None:
        """End the connection and wait for the transport to close (stdio: child reaped)."""
        self.closing = True
        self.ended.set()
        if not self.ready.done():
            # Still in the handshake, which does not watch `ended`: a server that accepted the
            # connection and never answers would hold the close for the whole CLOSE_TIMEOUT.
            # Cancelling it still runs the transport's clean-up (a stdio child is reaped).
            self.task.cancel()
        done, _ = await asyncio.wait({self.task}, timeout=CLOSE_TIMEOUT)
        if not done:
            log.warning("MCP server %r did not close within %g s; cancelling its connection",
                        self.server.id, CLOSE_TIMEOUT)
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
