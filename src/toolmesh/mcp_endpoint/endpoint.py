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
  (a ``progressToken``); a tool's failure is a result with ``isError``, not a protocol error.
  A call that asks for no progress is answered as one JSON body, without the SDK's session
  machinery (:mod:`.fast_calls`). A call that needs a person (an approval, a sign-in) asks
  the client's person during the call, or, for a 2026-07-28 client, answers with the question
  and runs when the client calls again with the answer (:mod:`.input_required`);
* ``notifications/tools/list_changed`` to the sessions of a workspace whose tool items,
  ``mcp`` items or announced services change — on a session's stream (the ``initialize``
  revisions) or a 2026-07-28 client's ``subscriptions/listen`` stream (so the ``tools``
  capability says ``listChanged: true``).

The gateway's checks come first (Origin, Host, the bearer token; :mod:`toolmesh.gateway.access`);
a session is bound to the token and the workspace that opened it, and is a resource of that
token: limited per token, per workspace and in all, ended after a time idle, the oldest idle
one ended first for room (:mod:`.session_table`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import mcp_types
from aiohttp import web
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types import INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from toolmesh import __version__
from toolmesh.approvals.service import APPROVALS_REQUEST_QUEUE, APPROVALS_RESPONSE_QUEUE
from toolmesh.bus.base import Bus, Message, Subscription
from toolmesh.config.service import CONFIG_PUSH_QUEUE
from toolmesh.errors import MalformedMessage, RequestError, ServiceError
from toolmesh.mcp.meta import IDEMPOTENCY_KEY
from toolmesh.mcp_endpoint.approval import Ask, Deferred, asker, defer
from toolmesh.mcp_endpoint.input_required import InputRequired, StateGuard, asks_in_rounds
from toolmesh.mcp_endpoint.sign_in import DEFER, SignInAsk, takes_links, url_asker
from toolmesh.mcp_endpoint.asgi import serve
from toolmesh.agent.tool_calls import TOOL_CALLS_REQUEST_QUEUE, TOOL_CALLS_RESPONSE_QUEUE
from toolmesh.mcp_endpoint.fast_calls import SESSION_HEADER, VERSION_HEADER, FastCalls
from toolmesh.mcp_endpoint.jsonrpc import SERVER_ERROR, error_response, read_message
from toolmesh.mcp_endpoint.session_manager import SessionManager
from toolmesh.mcp_endpoint.session_table import (
    Opener,
    SessionLimits,
    SessionTable,
    Ticket,
    TooManySessions,
)
from toolmesh.registry.registry import Registry
from toolmesh.rpc.client import RequestClient
from toolmesh.schema.tool_service import client_key

log = logging.getLogger("toolmesh.mcp_endpoint")

#: a call that failed because its server wants the caller to sign in (mcp/signin.py)
LOGIN_REQUIRED = "login-required"

CALLER = "toolmesh.caller"
#: the config types a workspace's tools come from (the agent's toolset.WATCHED_TYPES; named
#: here so that a gateway does not load the agent)
WATCHED_TYPES = ("tool", "tool-service", "mcp", "settings")
#: seconds a tools/list may take the agent; a call gets its tool's own timeouts plus this
LIST_TIMEOUT = 30.0
CALL_TIMEOUT = 600.0


class Identity(Protocol):
    """The gateway's caller (:class:`toolmesh.gateway.auth.Identity`), as seen here."""

    @property
    def id(self) -> str: ...

    @property
    def default_workspace(self) -> str: ...

    @property
    def scoped(self) -> bool: ...

    def reaches(self, workspace: str) -> bool: ...

    def may(self, capability: str) -> bool: ...


class _Nobody:
    """A caller that reached the MCP server other than through the gateway's route."""

    id = "?"
    default_workspace = ""
    scoped = True

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


class ToolsServer(Server):
    """The SDK's server, saying in the ``initialize`` answer that it tells its sessions when
    the tools change (``tools.listChanged``): it does (:meth:`McpEndpoint.tools_changed`)."""

    def create_initialization_options(
            self, notification_options: NotificationOptions | None = None,
            *args: Any, **kwargs: Any) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), *args, **kwargs)


class McpEndpoint:
    """Serves MCP at ``/mcp`` for one gateway (``flow``: whose agent answers; ``sessions``:
    the limits of its sessions)."""

    def __init__(self, bus: Bus, *, flow: str = "default",
                 max_body: int = 4 * 1024 * 1024, push_queue: str = CONFIG_PUSH_QUEUE,
                 announcement_queues: dict[str, str] | None = None,
                 sessions: SessionLimits = SessionLimits()) -> None:
        self._bus = bus
        self._push_queue = push_queue
        self._subscription: Subscription | None = None
        #: workspace -> the newest config version a push named for its tools
        self._versions: dict[str, int] = {}
        # the announced tool services, to tell sessions when they come and go
        self._registry = Registry(bus, on_change=self.tools_changed, quiet=True,
                                  **(announcement_queues or {}))
        self._rpc = RequestClient(
            bus, request_queue=TOOL_CALLS_REQUEST_QUEUE.replace(":default", f":{flow}"),
            response_queue=TOOL_CALLS_RESPONSE_QUEUE.replace(":default", f":{flow}"))
        # a person's "no" to a sign-in link goes to the call waiting for it (sign_in.py)
        self._approvals = RequestClient(
            bus, request_queue=APPROVALS_REQUEST_QUEUE.replace(":default", f":{flow}"),
            response_queue=APPROVALS_RESPONSE_QUEUE.replace(":default", f":{flow}"))
        self.server = ToolsServer("toolmesh", version=__version__,
                                  instructions="The tools of a toolmesh workspace.",
                                  on_list_tools=self._list, on_call_tool=self._call,
                                  on_subscriptions_listen=self._listen)
        # a 2026-07-28 call that needs a person goes in rounds; its requestState is sealed
        self._rounds = InputRequired(stream=self._stream, answer=self._answer)
        self.server.middleware.append(StateGuard(_principal))
        #: workspace -> the 2026-07-28 listeners of its changes (``subscriptions/listen``)
        self._listeners: dict[str, tuple[InMemorySubscriptionBus, ListenHandler]] = {}
        self._max_body = max_body
        self.manager: SessionManager | None = None
        self._running: asyncio.Task[None] | None = None
        #: who holds which session; the reaper ends those idle too long
        self._idle = asyncio.Event()
        self.sessions = SessionTable(sessions, clock=time.monotonic, on_idle=self._idle.set)
        self._reaper: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        #: workspace -> the connections that listed its tools (told when they change)
        self._sessions: dict[str, weakref.WeakSet[Any]] = {}
        self._fast = FastCalls(lambda caller, name, arguments, key: self.call(
            caller, name, arguments, ask=defer, key=key, sign_in=DEFER))

    async def start(self) -> None:
        await self._rpc.start()
        await self._approvals.start()
        # a manager runs once, in one task from start to end (an anyio task group)
        self.manager = SessionManager(self.server, on_end=self._ended,
                                      max_request_body_size=self._max_body)
        self._stopping.clear()
        started = asyncio.Event()
        self._running = asyncio.create_task(self._run(self.manager, started))
        await started.wait()
        self._reaper = asyncio.create_task(self._reap())
        # a name of our own: a notify queue gives each subscription every push
        self._subscription = await self._bus.subscribe(
            self._push_queue, self._on_push, subscription=f"gateway-mcp-{uuid.uuid4().hex[:8]}",
            concurrency=1)
        await self._registry.start()

    async def stop(self) -> None:
        await self._registry.stop()
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        if self._running is not None:
            self._stopping.set()
            # Every session's tasks are cancelled and awaited here. Their teardown allocates
            # on a heap they fill, and each full collection walks it all: 2,000 idle sessions
            # took 3.3 s to end, 0.6 s with collection paused (10,000 once held a SIGTERM for
            # 28 s). The heap is about to be freed wholesale anyway.
            collecting = gc.isenabled()
            gc.disable()
            try:
                await self._running
            finally:
                if collecting:
                    gc.enable()
            self._running = None
        await self._rounds.close()
        await self._rpc.stop()
        await self._approvals.stop()

    async def _run(self, manager: SessionManager, started: asyncio.Event) -> None:
        async with manager.run():
            started.set()
            await self._stopping.wait()

    async def _reap(self) -> None:
        """End each session once it has been idle for the limit: wait for the oldest idle
        one's deadline (or, with none idle, for one to become idle)."""
        while True:
            self._idle.clear()
            deadline = self.sessions.next_expiry()
            if deadline is None:
                await self._idle.wait()
                continue
            delay = deadline - time.monotonic()
            if delay > 0:
                # woken early when the table had no idle session: the deadline may be sooner
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._idle.wait(), delay)
                continue
            for session in self.sessions.expire():
                log.debug("MCP session %s idle for %g s: ended", session[:8],
                          self.sessions.limits.idle)
                await self._end(session)

    async def _end(self, session: str) -> None:
        self._fast.ended(session)
        if self.manager is not None:
            await self.manager.end(session)

    def _ended(self, session: str) -> None:
        """The SDK ended ``session`` (a DELETE, a failed opening, an end we asked for)."""
        self.sessions.ended(session)
        self._fast.ended(session)

    async def _on_push(self, message: Message) -> None:
        try:
            push = message.json()
        except MalformedMessage as e:
            log.warning("config push not understood: %s", e.message)
            return
        changes = push.get("changes") if isinstance(push, dict) else None
        version = push.get("version") if isinstance(push, dict) else None
        if not isinstance(changes, dict):
            return
        touched = {w for t in WATCHED_TYPES for w in changes.get(t) or () if isinstance(w, str)}
        for workspace in touched:
            if isinstance(version, int):
                self._versions[workspace] = max(version, self._versions.get(workspace, 0))
            await self.tools_changed(workspace)

    async def handle(self, request: web.Request, identity: Identity | None) -> web.StreamResponse:
        """Answer one HTTP request to ``/mcp`` or ``/mcp/{workspace}``."""
        workspace = request.match_info.get("workspace") or (
            identity.default_workspace if identity is not None else "default")
        if identity is not None and not identity.reaches(workspace):
            return web.json_response({"error": {"type": "forbidden", "message": (
                f"this token may not use workspace {workspace!r}")}}, status=403)
        owner = f"{identity.id if identity else 'local'}@{workspace}"
        if self.manager is None:
            return web.json_response({"error": {"type": "service-unavailable",
                                                "message": "the MCP endpoint is not started"}},
                                     status=503)
        caller = Caller(identity, workspace)
        opener = Opener(identity.id if identity is not None else "local",
                        identity is not None and identity.scoped, workspace)
        session = request.headers.get(SESSION_HEADER)
        with self.sessions.using(session, opener):  # in use: not idle, not ended for room
            body: Any = None
            if request.method == "POST":
                # a message the SDK would refuse in its validator's words (or take an invalid
                # id for a notification) is refused here in ours
                body, invalid = read_message(await request.read())
                if invalid is not None:
                    return invalid.response()
            if body is not None:
                answered = await self._fast.answer(request, body, owner, caller)
                if answered is not None:
                    return answered
            ticket: Ticket | None = None
            if session is None and request.headers.get(VERSION_HEADER, "") in _SESSIONFUL:
                # the SDK opens a session for it: room first, within the limits
                admitted = self.sessions.admit(opener)
                for victim in admitted.end:
                    log.debug("MCP session %s of %s ended for room", victim[:8], opener.token)
                    await self._end(victim)
                if admitted.ticket is None:
                    assert admitted.refusal is not None
                    return _refused(admitted.refusal, body)
                ticket = admitted.ticket
            return await self._serve(request, body, caller, owner, ticket)

    async def _serve(self, request: web.Request, body: Any, caller: Caller, owner: str,
                     ticket: Ticket | None) -> web.StreamResponse:
        """The SDK's answer to ``request``; ``ticket``: the room for a session it opens."""
        assert self.manager is not None
        user = AuthenticatedUser(AccessToken(token="", client_id=owner, scopes=[]))

        def learn(response: web.StreamResponse) -> None:
            # the session the SDK opened, as the answer starts (a client that hangs up once it
            # has its answer cancels what would come after)
            session = response.headers.get(SESSION_HEADER)
            if ticket is None or session is None or response.status >= 400:
                return
            ticket.opened(session)
            if (response.status == 200 and isinstance(body, dict)
                    and body.get("method") == "initialize"):
                self._fast.opened(session, owner)

        return await serve(self.manager.handle_request, request,
                           extra={CALLER: caller, "user": user}, on_start=learn,
                           on_done=ticket.closed if ticket is not None else None)

    async def tools_changed(self, workspace: str) -> None:
        """Tell the sessions of ``workspace`` that its tools changed."""
        sessions = list(self._sessions.get(workspace, ()))
        log.info("tools of workspace %r changed: telling %d MCP session(s)", workspace,
                 len(sessions))
        for session in sessions:
            try:
                await session.send_tool_list_changed()
            except Exception as e:  # a session that went away: nothing to tell
                log.debug("could not tell a session its tools changed: %r", e)
        listening = self._listeners.get(workspace)
        if listening is not None:
            await listening[0].publish(ToolsListChanged())

    async def _listen(self, ctx: ServerRequestContext[Any, Any],
                      params: mcp_types.SubscriptionsListenRequestParams,
                      ) -> mcp_types.SubscriptionsListenResult:
        """A 2026-07-28 client's ``subscriptions/listen``: the changes of its workspace only
        (one fan-out per workspace, so no client hears of another's)."""
        caller = _caller(ctx)
        if caller.identity is not None and not caller.identity.reaches(caller.workspace):
            raise MCPError(INVALID_REQUEST, "this caller may not listen here")
        listening = self._listeners.get(caller.workspace)
        if listening is None:
            fanout = InMemorySubscriptionBus()
            listening = self._listeners[caller.workspace] = (fanout, ListenHandler(fanout))
        return await listening[1](ctx, params)

    async def _list(self, ctx: ServerRequestContext[Any, Any],
                    params: mcp_types.PaginatedRequestParams | None) -> mcp_types.ListToolsResult:
        caller = _caller(ctx)
        # the connection, not the request's session: it outlives this request, and its
        # standalone stream is where a change is told (held weakly: it ends with its client)
        connection = getattr(ctx.session, "_connection", None)
        if connection is not None:
            self._sessions.setdefault(caller.workspace, weakref.WeakSet()).add(connection)
        if not caller.may_invoke:  # a token that may not call tools sees none
            return mcp_types.ListToolsResult(tools=[])
        body: dict[str, Any] = {"operation": "list", "workspace": caller.workspace}
        if caller.workspace in self._versions:  # the agent catches up first if it is behind
            body["version"] = self._versions[caller.workspace]
        answer = await self._rpc.request(body, timeout=LIST_TIMEOUT)
        return mcp_types.ListToolsResult(tools=[
            mcp_types.Tool.model_validate(entry) for entry in answer.get("tools") or ()])

    async def _call(self, ctx: ServerRequestContext[Any, Any],
                    params: mcp_types.CallToolRequestParams,
                    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        token = _progress_token(ctx.meta)

        async def progress(report: dict[str, Any]) -> None:
            assert token is not None
            await ctx.session.send_progress_notification(
                token, report["progress"], report.get("total"), report.get("message"),
                related_request_id=ctx.request_id)

        caller = _caller(ctx)
        try:
            key = client_key(_meta_entry(ctx.meta, IDEMPOTENCY_KEY), field=IDEMPOTENCY_KEY)
        except ServiceError as e:
            return _text_result(f"_meta: {e.message}", True)
        if asks_in_rounds(ctx):  # 2026-07-28: no back channel, the questions go in rounds
            if not caller.may_invoke:
                return _text_result(NO_INVOKE, True)

            body = self.body(caller, params.name, dict(params.arguments or {}),
                             progress=token is not None, ask=True,
                             questions=takes_links(ctx), key=key)
            return await self._rounds.call(ctx, params, caller, body,
                                           progress if token is not None else None)
        text, is_error = await self.call(caller, params.name, dict(params.arguments or {}),
                                         progress=progress if token is not None else None,
                                         ask=asker(ctx, caller), key=key,
                                         sign_in=url_asker(ctx, self._answer))
        return _text_result(text, is_error)

    async def call(self, caller: Caller, name: str, arguments: dict[str, Any], *,
                   progress: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
                   ask: Ask | None = None, key: str | None = None,
                   sign_in: SignInAsk | None = None) -> tuple[str, bool]:
        """Call tool ``name`` as ``caller``, through the agent: its text and whether it failed.
        ``key``: the client's idempotency key for the call (its ``_meta``
        ``io.toolmesh/idempotency-key``; ``None``: one is made), sent under the caller's id.
        ``progress``: told each progress report (``progress``, ``total``, ``message``);
        ``ask``: asks the caller's person to approve a call that needs it (:mod:`.approval`;
        ``None``: no one can be asked, the call is refused); ``sign_in``: sends them the link
        when a server wants them to sign in (:mod:`.sign_in`; :data:`DEFER`: to the SDK's
        path)."""
        if not caller.may_invoke:
            return NO_INVOKE, True
        body = self.body(caller, name, arguments, progress=progress is not None,
                         ask=ask is not None,
                         questions=sign_in is not None and sign_in is not DEFER, key=key)
        try:
            final = await self._stream(body, progress, sign_in)
            asked = final.get("approval")
            if isinstance(asked, dict) and ask is not None:
                refusal = await ask(asked)
                if refusal is not None:
                    return refusal, True
                final = await self._stream({**body, "ask": False,
                                            "approved": asked.get("digest")}, progress)
        except RequestError as e:
            return f"{e.type}: {e.message}", True
        text = str(final.get("text") or "")
        if sign_in is DEFER and final.get("type") == LOGIN_REQUIRED:
            raise Deferred(name)  # the SDK's path can send the person the link
        return text, bool(final.get("is_error"))

    @staticmethod
    def body(caller: Caller, name: str, arguments: dict[str, Any], *, progress: bool,
             ask: bool, questions: bool, key: str | None) -> dict[str, Any]:
        """The agent's request for a call (:mod:`toolmesh.agent.tool_calls`): ``ask``: a
        call that needs approval comes back for it; ``questions``: a server's sign-in link
        may be sent to the caller's person; ``key``: the client's idempotency key."""
        who = caller.identity.id if caller.identity is not None else "local"
        return {"operation": "call", "workspace": caller.workspace, "name": name,
                "arguments": arguments, "progress": progress, "ask": ask,
                # whose sign-ins an MCP server that signs each person in uses (mcp/signin.py)
                "actor": who, "questions": questions,
                # one key for the call, the approved attempt after a person's yes included
                "key": f"{who}/{key if key is not None else 'mcp-' + uuid.uuid4().hex}"}

    async def _answer(self, question: dict[str, Any], action: str) -> None:
        """Answer a server's question through the approvals service (a decline, a cancel)."""
        try:
            await self._approvals.request({
                "operation": "answer", "dialog": question.get("dialog"),
                "call": question.get("call"), "action": action,
                "workspace": question.get("workspace")}, timeout=10.0)
        except RequestError as e:  # answered or expired meanwhile: the call has its outcome
            log.info("the answer %r to %s was not taken: %s", action, question.get("call"),
                     e.message)

    async def _stream(self, body: dict[str, Any],
                      progress: Callable[[dict[str, Any]], Awaitable[None]] | None,
                      sign_in: SignInAsk | None = None) -> dict[str, Any]:
        final: dict[str, Any] = {}
        async for part in self._rpc.stream(body, timeout=CALL_TIMEOUT):
            question = part.get("elicitation")
            if isinstance(question, dict) and sign_in is not None and sign_in is not DEFER:
                await sign_in(question)
                continue
            if part.get("end_of_stream") is False:
                report = part.get("progress") or {}
                if progress is not None and isinstance(report.get("progress"), int | float):
                    await progress(report)
                continue
            final = part
        return final


NO_INVOKE = "this token may not call tools (it lacks tools:invoke)"


def _text_result(text: str, is_error: bool) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)],
                                    is_error=is_error)


def _principal(ctx: ServerRequestContext[Any, Any]) -> str:
    """Whom a request comes from (its token and workspace): a 2026-07-28 call's state is
    theirs alone."""
    caller = _caller(ctx)
    who = caller.identity.id if caller.identity is not None else "local"
    return f"{who}@{caller.workspace}"


#: the revisions (``MCP-Protocol-Version``; none: the oldest) whose requests without a session
#: id make the SDK open one
_SESSIONFUL = frozenset({"", *HANDSHAKE_PROTOCOL_VERSIONS})


def _refused(refusal: TooManySessions, body: Any) -> web.Response:
    """The answer to an opening refused for a limit: a JSON-RPC error naming it."""
    id = body.get("id") if isinstance(body, dict) else None
    return error_response(refusal.status, SERVER_ERROR, refusal.message, id=id,
                          data={"type": "too-many-sessions", "limit": refusal.limit})


def _caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    request = ctx.request
    scope = getattr(request, "scope", None) or {}
    caller = scope.get(CALLER)
    if not isinstance(caller, Caller):  # not through the gateway's route: refuse everything
        return Caller(_Nobody(), "")
    return caller


def _meta_entry(meta: Any, name: str) -> Any:
    """Entry ``name`` of a call's ``_meta`` (the SDK gives a mapping or a model whose extra
    fields hold the names it does not know)."""
    if isinstance(meta, dict):
        return meta.get(name)
    extra = getattr(meta, "model_extra", None)
    return extra.get(name) if isinstance(extra, dict) else None


def _progress_token(meta: Any) -> str | int | None:
    """The ``progressToken`` a call's ``_meta`` carries (the SDK gives a mapping)."""
    if isinstance(meta, dict):  # the SDK's mapping names it in Python's spelling
        token = meta.get("progress_token", meta.get("progressToken"))
    else:
        token = getattr(meta, "progress_token", None)
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


