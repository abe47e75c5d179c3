"""The gateway's MCP endpoint: a workspace's tools for every MCP client, over streamable HTTP.

``/mcp`` serves the workspace of the caller's token (its first; ``default`` with no token set)
and ``/mcp/{workspace}`` a named one. The protocol is the MCP SDK's own server (every revision
it speaks: the ``initialize`` handshake up to 2025-11-25, and 2026-07-28); what it serves comes
from the agent that holds the workspace's tools, over the bus (:mod:`.calls`):

* ``tools/list``: the tools the agent offers there — configured and announced tool services,
  MCP tools of the servers behind, prompt tools — with their input schemas; nothing for a
  token without ``tools:invoke``;
* ``tools/call``: made by the agent as a dialog's calls are (checks, timeouts, metrics); a
  streaming tool's progress comes as ``notifications/progress`` when the client asked for it
  (a ``progressToken``); a tool's failure is a result with ``isError``, not a protocol error;
* ``notifications/tools/list_changed`` to the sessions of a workspace whose tool items,
  ``mcp`` items or announced services change.

The gateway's checks come first (Origin, Host, the bearer token; :mod:`toolmesh.gateway.access`);
a session is bound to the token and the workspace that opened it.
"""

from __future__ import annotations

import logging
import weakref
from contextlib import AsyncExitStack
from typing import Any, Protocol

import mcp_types
from aiohttp import web
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from toolmesh import __version__
from toolmesh.bus.base import Bus
from toolmesh.errors import RequestError
from toolmesh.mcp_endpoint.asgi import serve
from toolmesh.mcp_endpoint.calls import TOOL_CALLS_REQUEST_QUEUE, TOOL_CALLS_RESPONSE_QUEUE
from toolmesh.rpc.client import RequestClient

log = logging.getLogger("toolmesh.mcp_endpoint")

CALLER = "toolmesh.caller"
#: seconds a tools/list may take the agent; a call gets its tool's own timeouts plus this
LIST_TIMEOUT = 30.0
CALL_TIMEOUT = 600.0


class Identity(Protocol):
    """The gateway's caller (:class:`toolmesh.gateway.auth.Identity`), as seen here."""

    @property
    def id(self) -> str: ...

    @property
    def default_workspace(self) -> str: ...

    def reaches(self, workspace: str) -> bool: ...

    def may(self, capability: str) -> bool: ...


class _Nobody:
    """A caller that reached the MCP server other than through the gateway's route."""

    id = "?"
    default_workspace = ""

    def reaches(self, workspace: str) -> bool:
        return False

    def may(self, capability: str) -> bool:
        return False


class Caller:
    """Who calls, in which workspace, and whether they may call tools."""

    def __init__(self, identity: Identity | None, workspace: str) -> None:
        self.identity = identity
        self.workspace = workspace
        self.may_invoke = identity is None or identity.may("tools:invoke")


class McpEndpoint:
    """Serves MCP at ``/mcp`` for one gateway (``flow``: whose agent answers)."""

    def __init__(self, bus: Bus, *, flow: str = "default",
                 max_body: int = 4 * 1024 * 1024) -> None:
        self._rpc = RequestClient(
            bus, request_queue=TOOL_CALLS_REQUEST_QUEUE.replace(":default", f":{flow}"),
            response_queue=TOOL_CALLS_RESPONSE_QUEUE.replace(":default", f":{flow}"))
        self.server = Server("toolmesh", version=__version__,
                             instructions="The tools of a toolmesh workspace.",
                             on_list_tools=self._list, on_call_tool=self._call)
        self.manager = StreamableHTTPSessionManager(self.server, max_request_body_size=max_body)
        #: workspace -> the sessions that listed its tools (told when they change)
        self._sessions: dict[str, weakref.WeakSet[Any]] = {}
        self._stack = AsyncExitStack()

    async def start(self) -> None:
        await self._rpc.start()
        await self._stack.enter_async_context(self.manager.run())

    async def stop(self) -> None:
        await self._stack.aclose()
        await self._rpc.stop()

    async def handle(self, request: web.Request, identity: Identity | None) -> web.StreamResponse:
        """Answer one HTTP request to ``/mcp`` or ``/mcp/{workspace}``."""
        workspace = request.match_info.get("workspace") or (
            identity.default_workspace if identity is not None else "default")
        if identity is not None and not identity.reaches(workspace):
            return web.json_response({"error": {"type": "forbidden", "message": (
                f"this token may not use workspace {workspace!r}")}}, status=403)
        owner = f"{identity.id if identity else 'local'}@{workspace}"
        user = AuthenticatedUser(AccessToken(token="", client_id=owner, scopes=[]))
        return await serve(self.manager.handle_request, request,
                           extra={CALLER: Caller(identity, workspace), "user": user})

    async def tools_changed(self, workspace: str) -> None:
        """Tell the sessions of ``workspace`` that its tools changed."""
        for session in list(self._sessions.get(workspace, ())):
            try:
                await session.send_tool_list_changed()
            except Exception as e:  # a session that went away: nothing to tell
                log.debug("could not tell a session its tools changed: %r", e)

    async def _list(self, ctx: ServerRequestContext[Any, Any],
                    params: mcp_types.PaginatedRequestParams | None) -> mcp_types.ListToolsResult:
        caller = _caller(ctx)
        self._sessions.setdefault(caller.workspace, weakref.WeakSet()).add(ctx.session)
        if not caller.may_invoke:  # a token that may not call tools sees none
            return mcp_types.ListToolsResult(tools=[])
        answer = await self._rpc.request({"operation": "list", "workspace": caller.workspace},
                                         timeout=LIST_TIMEOUT)
        return mcp_types.ListToolsResult(tools=[
            mcp_types.Tool.model_validate(entry) for entry in answer.get("tools") or ()])

    async def _call(self, ctx: ServerRequestContext[Any, Any],
                    params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
        caller = _caller(ctx)
        if not caller.may_invoke:
            return _failed("this token may not call tools (it lacks tools:invoke)")
        token = ctx.meta.progress_token if ctx.meta is not None else None
        body = {"operation": "call", "workspace": caller.workspace, "name": params.name,
                "arguments": dict(params.arguments or {}), "progress": token is not None}
        final: dict[str, Any] = {}
        try:
            async for part in self._rpc.stream(body, timeout=CALL_TIMEOUT):
                if part.get("end_of_stream") is False:
                    progress = part.get("progress") or {}
                    if token is not None and isinstance(progress.get("progress"), int | float):
                        await ctx.session.send_progress_notification(
                            token, progress["progress"], progress.get("total"),
                            progress.get("message"), related_request_id=ctx.request_id)
                    continue
                final = part
        except RequestError as e:
            return _failed(f"{e.type}: {e.message}")
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=str(final.get("text") or ""))],
            is_error=bool(final.get("is_error")))


def _caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    request = ctx.request
    scope = getattr(request, "scope", None) or {}
    caller = scope.get(CALLER)
    if not isinstance(caller, Caller):  # not through the gateway's route: refuse everything
        return Caller(_Nobody(), "")
    return caller


def _failed(message: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=message)], is_error=True)
