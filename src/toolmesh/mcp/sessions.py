"""``SessionPool``: one long-lived MCP ``ClientSession`` per server, shared by every call.

A session is never opened per call. Each server gets a :class:`Connection` whose supervisor
task owns the transport and the session (anyio's rule: a task group is entered and exited in
the same task); callers await its ``ready`` future and then send requests on the shared session
concurrently — the SDK's dispatcher correlates them by JSON-RPC id.

When the connection ends — the server hangs up (stdio child died, SSE stream closed), the
transport fails (HTTP connection refused), or a call finds the session gone (the HTTP server
restarted and answers 404 for the old session id) — the connection is marked broken and the
next call opens a new one. A call whose request provably never reached the server (connection
refused, unknown session) is sent once more on the new connection; any other call that was in
flight fails with a clear message, since it may have run.

Each call has a deadline. On expiry the SDK abandons the request and sends the server
``notifications/cancelled`` (``JSONRPCDispatcher.send_raw_request``: the timeout branch, and
the shielded caller-cancelled branch); the session stays open for the next call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, nullcontext
from typing import Any, TypeVar

import httpx2
import mcp_types
from mcp import ClientSession
from mcp.client.streamable_http import DEFAULT_MAX_SSE_EVENT_SIZE
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.mcp.addresses import DEFAULT_POLICY, AddressPolicy
from toolmesh.mcp.config import McpServer
from toolmesh.mcp.connection import Connection
from toolmesh.mcp.elicitation import Asking, Elicitor
from toolmesh.mcp.errors import (
    InvalidArguments,
    McpError,
    McpSignInRefused,
    McpUnreachable,
    describe,
    needs_task_augmentation,
    never_reached_server,
)
from toolmesh.mcp.meta import call_meta
from toolmesh.mcp.notices import ToolsChanged
from toolmesh.mcp.progress import CallProgress
from toolmesh.mcp.remote_tool import RemoteTool
from toolmesh.mcp.results import McpResult, to_result
from toolmesh.mcp.sampling import Sampler
from toolmesh.telemetry import tracing

log = logging.getLogger("toolmesh.mcp")

__all__ = ["RemoteTool", "SessionPool"]

T = TypeVar("T")

CONNECT_TIMEOUT = 30.0
#: beyond a call's deadline, for the SDK to send its cancel and raise its own timeout first
GRACE = 1.0
LIST_PAGE_CAP = 100
#: the SDK's largest SSE event (streamable HTTP and SSE): a bigger answer cannot be read
MESSAGE_LIMIT = DEFAULT_MAX_SSE_EVENT_SIZE


class _Undelivered(Exception):
    """The request never reached the server, so sending it again cannot run it twice."""

    def __init__(self, error: McpError) -> None:
        super().__init__(error.message)
        self.error = error


class SessionPool:
    """Long-lived MCP sessions, reused by every call.

    Sessions are keyed by :attr:`McpServer.connection_key`, so several ``mcp`` items that
    name tools on the same server (same URL and token, or same command) share one session.
    """

    def __init__(self, *, connect_timeout: float = CONNECT_TIMEOUT,
                 sampler: Sampler | None = None, elicitor: Elicitor | None = None,
                 on_tools_changed: ToolsChanged | None = None,
                 addresses: AddressPolicy = DEFAULT_POLICY,
                 auth: Callable[[McpServer], httpx2.Auth | None] | None = None) -> None:
        self.connect_timeout = connect_timeout
        #: what signs the HTTP requests of a session to a server that wants OAuth
        self.auth = auth
        #: where HTTP servers may be reached (mcp/addresses.py)
        self.addresses = addresses
        self.sampler = sampler  # answers servers allowed to sample (mcp/sampling.py)
        self.elicitor = elicitor  # takes servers' questions to their dialogs (elicitation.py)
        #: told ``(workspace, ids)`` of the items whose tool list changed (the server said
        #: so, or refused a call's arguments: whoever copied a schema should read it again)
        self.on_tools_changed = on_tools_changed
        self._connections: dict[str, Connection] = {}  # connection key -> connection
        #: (workspace, server id, principal) -> the connection key it last used
        self._keys: dict[tuple[str, str, str], str] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    async def call_tool(self, server: McpServer, arguments: dict[str, Any], *,
                        timeout: float, progress: CallProgress | None = None,
                        key: str | None = None, asking: Asking | None = None) -> McpResult:
        """Call ``server.remote_name`` with ``arguments``; :class:`McpError` if it cannot.
        ``key``: the call's idempotency key, sent in its ``_meta``
        (:data:`~toolmesh.mcp.meta.IDEMPOTENCY_KEY`).

        With ``progress`` the call carries a progressToken and the server's progress moves
        its deadline, up to ``progress.max_timeout`` (:mod:`toolmesh.mcp.progress`).
        ``asking``: where the server's questions during the call go (elicitation.py)."""

        async def call(conn: Connection, session: ClientSession, deadline: float) -> McpResult:
            await self._check_tool(conn, session, server)
            remaining = max(deadline - _now(), 0.001)
            asked = (self.elicitor.calling(conn.key, asking)
                     if asking is not None and self.elicitor is not None else nullcontext())
            try:
                with asked:
                    if progress is not None:
                        result = to_result(await progress.call(
                            session, server, arguments, cap=remaining, meta=call_meta(key)))
                    else:
                        result = to_result(await session.call_tool(
                            server.remote_name, arguments, read_timeout_seconds=remaining,
                            meta=call_meta(key)))
            except MCPError as e:
                if e.error.code == mcp_types.INVALID_PARAMS:
                    self._tools_changed(conn)
                raise
            if result.refused_arguments:
                self._tools_changed(conn)
            return result

        limit = timeout if progress is None else progress.max_timeout
        # the server continues this span's trace: its traceparent goes in the call's _meta
        with tracing.span(f"mcp tools/call {server.remote_name}", kind="client",
                          attributes={"mcp.server": server.id,
                                      "mcp.tool": server.remote_name}) as span:
            try:
                return await self._run(server, f"tool {server.remote_name!r}", limit, call)
            except McpError as e:
                tracing.failed(span, e.type, e.message)
                raise

    async def list_tools(self, server: McpServer, *, timeout: float,
                         refresh: bool = False) -> list[RemoteTool]:
        """The server's tools (cached per connection, listed again after a reconnect, after
        the server's ``notifications/tools/list_changed``, or at once with ``refresh``)."""

        async def tools(conn: Connection, session: ClientSession, deadline: float
                        ) -> list[RemoteTool]:
            return await self._tools(conn, session, refresh=refresh)

        return await self._run(server, "tools/list", timeout, tools)

    async def forget(self, server_id: str, *, workspace: str = DEFAULT_WORKSPACE) -> None:
        """Drop ``server_id`` of ``workspace``; its session is closed unless another item
        still uses it. The next call for it connects anew."""
        slots = [slot for slot in self._keys if slot[:2] == (workspace, server_id)]
        released = [self._release(self._keys.pop(slot)) for slot in slots]
        await asyncio.gather(*(conn.close() for conn in released if conn is not None))

    def drop_principal(self, workspace: str, principal: str, *, before: float) -> None:
        """End the sessions ``principal`` holds in ``workspace`` that were opened before
        ``before`` (Unix seconds: when their grant changed); the next call connects anew. A
        session opened since already carries the new grant, and is kept."""
        for slot in [s for s in self._keys if s[0] == workspace and s[2] == principal]:
            conn = self._connections.get(self._keys[slot])
            if conn is not None and conn.opened >= before:
                continue
            self._close_later(self._release(self._keys.pop(slot)))

    async def close(self) -> None:
        """Close every session (stdio children are stopped and reaped)."""
        self._closed = True
        connections, self._connections, self._keys = list(self._connections.values()), {}, {}
        await asyncio.gather(*(c.close() for c in connections), *self._closing)

    def connected(self, server: McpServer) -> bool:
        """Whether a session for ``server`` is open and ready now."""
        conn = self._connections.get(server.connection_key)
        return conn is not None and conn.usable and conn.ready.done() \
            and conn.ready.exception() is None

    async def wait_ended(self, server: McpServer) -> None:
        """Wait until the current session for ``server`` has ended and closed (for monitoring
        and tests: a server that dies is noticed without a call)."""
        conn = self._connections.get(server.connection_key)
        if conn is not None:
            await conn.ended.wait()
            await asyncio.shield(conn.task)

    # -- internals -------------------------------------------------------------------------

    def _connection(self, server: McpServer) -> Connection:
        if self._closed:
            raise McpError("the MCP session pool is closed")
        key = server.connection_key
        previous = self._keys.get(server.slot)
        self._keys[server.slot] = key
        if previous is not None and previous != key:
            self._close_later(self._release(previous))  # its settings changed
        conn = self._connections.get(key)
        if conn is not None and conn.usable:
            return conn
        self._close_later(conn)  # broken: let it finish closing while we connect anew
        conn = self._connections[key] = Connection(server, connect_timeout=self.connect_timeout,
                                                   sampler=self.sampler,
                                                   elicitor=self.elicitor,
                                                   on_tools_changed=self._tools_changed,
                                                   addresses=self.addresses,
                                                   auth=self.auth(server)
                                                   if self.auth is not None else None)
        return conn

    def _tools_changed(self, conn: Connection) -> None:
        """Forget ``conn``'s tool list and tell who listens which server ids it serves."""
        conn.tools = None
        # a connection belongs to one workspace (its key includes it)
        workspace = conn.server.workspace
        ids = sorted({id for (ws, id, _), key in self._keys.items() if key == conn.key})
        log.info("the tools of MCP server %s changed (for %s)", conn.server.where,
                 ", ".join(map(repr, ids)) or "no item")
        if ids and self.on_tools_changed is not None:
            self.on_tools_changed(workspace, ids)

    def _release(self, key: str | None) -> Connection | None:
        """Detach and return the connection of ``key`` if no server id uses it any more."""
        if key is None or key in self._keys.values():
            return None
        return self._connections.pop(key, None)

    def _close_later(self, conn: Connection | None) -> None:
        if conn is None:
            return
        task = asyncio.create_task(conn.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _run(self, server: McpServer, what: str, timeout: float,
                   operation: Callable[[Connection, ClientSession, float], Awaitable[T]]) -> T:
        deadline = _now() + timeout
        for attempt in range(2):
            conn = self._connection(server)
            try:
                session = await self._ready(conn, server, deadline, timeout)
                async with self._translated(conn, server, what, deadline, timeout):
                    return await operation(conn, session, deadline)
            except _Undelivered as e:
                if attempt:
                    raise e.error from None
                log.info("MCP server %r: %s; sending %s again on a new connection",
                         server.id, e.error.message, what)
        raise AssertionError("unreachable")

    async def _ready(self, conn: Connection, server: McpServer, deadline: float,
                     timeout: float) -> ClientSession:
        if not conn.ready.done():
            try:
                async with asyncio.timeout_at(deadline):
                    # shielded: this caller giving up must not cancel the connection for others
                    await asyncio.shield(conn.ready)
            except TimeoutError:
                if server.transport == "stdio":
                    raise McpError(f"cannot start MCP server {server.id!r} ({server.where}): "
                                   f"no answer to the MCP handshake within {timeout:g} s"
                                   ) from None
                # the same message as any other failure to reach it (McpUnreachable)
                log.warning("cannot connect to MCP server %s (for %r): no answer within %g s",
                            server.where, server.id, timeout)
                raise McpUnreachable.at(server.id, server.where) from None
        return conn.ready.result()

    @asynccontextmanager
    async def _translated(self, conn: Connection, server: McpServer, what: str,
                          deadline: float, timeout: float) -> AsyncIterator[None]:
        """Turn what the SDK raises into :class:`McpError` (or :class:`_Undelivered`)."""
        try:
            async with asyncio.timeout_at(deadline + GRACE):  # bounds un-timed SDK awaits too
                yield
        except MCPError as e:
            code, message = e.error.code, e.error.message
            if code == mcp_types.REQUEST_TIMEOUT:
                raise self._timed_out(server, what, timeout) from None
            if server.oauth is not None and conn.watch.challenge is not None:
                # answered 401/403 even after a refresh: the person must sign in (again)
                raise McpSignInRefused(f"MCP server {server.id!r} refused {what}: it wants "
                                       "a sign-in", challenge=conn.watch.challenge) from None
            if code == mcp_types.INVALID_REQUEST and conn.watch.session_gone:
                # The HTTP server answered 404 to our session id (it restarted, or expired the
                # session): it refused the request without running it.
                conn.ended.set()
                raise _Undelivered(McpError(
                    f"MCP server {server.id!r} at {server.where} no longer knows this session "
                    "(did it restart?)")) from None
            oversized = code == mcp_types.CONNECTION_CLOSED and _oversized(message)
            if oversized and not conn.ended.is_set():
                # Streamable HTTP: only this request's response stream broke; the session is
                # fine, so it is not ended (other calls on it go on).
                raise McpError(_too_large(server, what)) from None
            if code == mcp_types.CONNECTION_CLOSED:
                raise await self._lost(conn, server, what, message, deadline) from None
            if code == mcp_types.INVALID_PARAMS:
                raise InvalidArguments(f"MCP server {server.id!r} refused the arguments of "
                                       f"{what}: {message}") from None
            if code == mcp_types.URL_ELICITATION_REQUIRED:
                raise McpError(f"MCP server {server.id!r} needs the user to open "
                               f"{_links(e.error.data)} first, then to ask again: "
                               f"{message}") from None
            raise McpError(f"MCP server {server.id!r} refused {what}: {message} "
                           f"(code {code})") from None
        except TimeoutError:
            raise self._timed_out(server, what, timeout) from None
        except ValidationError as e:
            first = e.errors()[0] if e.errors() else {}
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise McpError(f"MCP server {server.id!r} sent an answer to {what} that this "
                           f"client cannot read: {where}: {first.get('msg', e)}") from None
        except RuntimeError as e:  # the SDK's checks of a result (output schema, ...)
            raise McpError(f"MCP server {server.id!r} answered {what} wrongly: {e}") from None

    async def _lost(self, conn: Connection, server: McpServer, what: str, message: str,
                    deadline: float) -> McpError | _Undelivered:
        if conn.closing:
            return McpError(f"the session to MCP server {server.id!r} was closed while {what} "
                            "ran (the server was reconfigured or removed)")
        conn.ended.set()
        await conn.finished(min(deadline - _now(), 5.0))  # let it record why it failed
        cause = describe(conn.failure) if conn.failure is not None else message
        if _oversized(cause):
            # SSE: every message comes on one stream, which the SDK cannot read past an
            # oversized event, so the session is lost with it; the next call reconnects.
            return McpError(_too_large(server, what) + " (over SSE this also ends the "
                            "session; the next call reconnects)")
        error = McpError(f"lost the connection to MCP server {server.id!r} at {server.where} "
                         f"during {what}: {cause}; the next call reconnects")
        return _Undelivered(error) if never_reached_server(conn.failure) else error

    @staticmethod
    def _timed_out(server: McpServer, what: str, timeout: float) -> McpError:
        return McpError(f"MCP server {server.id!r} did not finish {what}: timed out after "
                        f"{timeout:g} s (the server was told to cancel it)")

    async def _tools(self, conn: Connection, session: ClientSession, *,
                     refresh: bool = False) -> list[RemoteTool]:
        async with conn.tools_lock:
            if conn.tools is None or refresh:
                conn.tools = await _list_all(session)
            return conn.tools

    async def _check_tool(self, conn: Connection, session: ClientSession,
                          server: McpServer) -> None:
        """Fail clearly if the server has no such tool (listing once per connection also
        gives the SDK the output schemas it validates results against)."""
        tools = await self._tools(conn, session)
        tool = _named(tools, server.remote_name)
        if tool is None:
            tools = await self._tools(conn, session, refresh=True)  # it may have added it
            tool = _named(tools, server.remote_name)
        if tool is None:
            names = ", ".join(sorted(t.name for t in tools)) or "none"
            raise McpError(f"MCP server {server.id!r} has no tool {server.remote_name!r} "
                           f"(tools: {names})")
        if tool.needs_task:
            raise McpError(needs_task_augmentation(server.remote_name))


def _named(tools: list[RemoteTool], name: str) -> RemoteTool | None:
    return next((t for t in tools if t.name == name), None)


async def _list_all(session: ClientSession) -> list[RemoteTool]:
    tools: list[RemoteTool] = []
    cursor: str | None = None
    for _ in range(LIST_PAGE_CAP):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(RemoteTool(t.name, t.description or "", dict(t.input_schema or {}),
                                task_support=t.execution.task_support if t.execution else None,
                                annotations=_annotations(t))
                     for t in page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _oversized(message: str) -> bool:
    """Whether a transport error says a message exceeded the SDK's size limit (httpx2's
    ``SSEError``: "Server-sent event exceeded the 1048576 byte limit.")."""
    return "exceeded the" in message and "byte limit" in message


def _too_large(server: McpServer, what: str) -> str:
    return (f"the answer of MCP server {server.id!r} to {what} is larger than the MCP SDK's "
            f"limit of {MESSAGE_LIMIT // 1024 // 1024} MiB per message; ask for less (a smaller "
            "page or range) or have the server return a link instead")


def _now() -> float:
    return asyncio.get_running_loop().time()


def _annotations(tool: Any) -> dict[str, Any] | None:
    """A listed tool's annotations as the wire spells them (``readOnlyHint``...)."""
    annotations = getattr(tool, "annotations", None)
    if annotations is None:
        return None
    return annotations.model_dump(by_alias=True, exclude_none=True, mode="json") or None


def _links(data: Any) -> str:
    """The pages a ``-32042`` error (URL elicitation required) sends the user to."""
    asked = data.get("elicitations") if isinstance(data, dict) else None
    urls = [str(a["url"]) for a in asked or () if isinstance(a, dict) and a.get("url")]
    return " and ".join(urls) or "a page it did not name"
