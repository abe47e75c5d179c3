"""``toolmesh mcp serve --stdio``: a workspace's tools for MCP clients that start a command
(desktop assistants, IDEs) instead of opening a URL.

The bridge is an MCP server on stdin and stdout (the SDK's lowlevel :class:`Server` over its
stdio transport) and an MCP client of the gateway's ``/mcp`` endpoint (the SDK's
streamable-HTTP client, sending the bearer token), so what a client sees is what ``/mcp``
serves, checked by the gateway as every other caller is:

* ``tools/list`` and ``tools/call`` are passed on as they are, a call's progress too when the
  client asked for it (a ``progressToken``), and its idempotency key (``_meta``
  ``io.toolmesh/idempotency-key``) when it gave one;
* the gateway's ``notifications/tools/list_changed`` is checked against a fresh list, and
  passed on when the tools did change (a config change that leaves them as they were is
  not): on the client's session, or to a 2026-07-28 client's ``subscriptions/listen``
  stream;
* a gateway that cannot be reached, refuses the token (401) or the workspace (403) is an MCP
  error that says so and what to check; a tool's own failure stays a result with ``isError``;
* the gateway's question about a call (a tool that waits for a person's approval: a form; a
  server's sign-in link: a URL) goes to the client with that call, when the client takes
  questions of that mode: as an ``elicitation/create`` request, or, to a 2026-07-28 client
  (which cannot be asked during a call), as the call's ``InputRequiredResult``; the call to
  the gateway is held meanwhile, and goes on when the client calls again with the answer
  (:mod:`.held_calls`).

The session with the gateway opens on the first request (the client's ``initialize`` is
answered here, so a gateway that is down does not stop the client from starting) and
reopens when the gateway forgot it (a restart). Nothing but protocol goes to stdout; logs go
to stderr, without the token.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import httpx2
import mcp_types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_PARAMS

from toolmesh import __version__
from toolmesh.unreachable import gateway_unreachable
from toolmesh.mcp.meta import IDEMPOTENCY_KEY
from toolmesh.mcp_endpoint.approval import takes_forms
from toolmesh.mcp_endpoint.endpoint import CALL_TIMEOUT, LIST_TIMEOUT
from toolmesh.mcp_endpoint.held_calls import (
    CANCEL,
    Held,
    HeldCalls,
    Progress,
    Question,
    answer_of,
)
from toolmesh.mcp_endpoint.input_required import asks_in_rounds
from toolmesh.mcp_endpoint.sign_in import takes_links
from toolmesh.urls import mask_url

log = logging.getLogger("toolmesh.mcp_endpoint.stdio")

T = TypeVar("T")

#: seconds beyond the gateway's own limits the bridge waits, so the gateway's answer (which
#: says what went wrong) arrives before the bridge gives up on its own
MARGIN = 10.0
#: seconds a new session with the gateway may take (connect and ``initialize``)
OPEN_TIMEOUT = 30.0
#: the key of the gateway's question in a 2026-07-28 client's ``inputRequests``
QUESTION = "question"
#: asks the client's person the gateway's question about the call under way
Asker = Callable[[mcp_types.ElicitRequestParams], Awaitable[mcp_types.ElicitResult]]
#: what the SDK's streamable-HTTP client reports for an HTTP error whose body is not JSON-RPC
#: (the gateway's own refusals): the status the response hook saw says more
_HTTP_ERROR = "Server returned an error response"


@dataclass(frozen=True, kw_only=True)
class Target:
    """Where the bridge forwards to: the gateway's MCP URL, and the token it sends there."""

    url: str
    token: str | None = None

    @classmethod
    def of(cls, gateway: str, *, workspace: str | None = None,
           token: str | None = None) -> Target:
        """``gateway``'s ``/mcp`` (the token's first workspace) or ``/mcp/{workspace}``. A URL
        that already ends in ``/mcp`` is taken as it is."""
        base = gateway.rstrip("/")
        if urlsplit(base).path.endswith("/mcp"):
            base = base[:-len("/mcp")]
        path = f"/mcp/{quote(workspace, safe='')}" if workspace else "/mcp"
        return cls(url=base + path, token=token)

    @property
    def shown(self) -> str:
        """The URL as logs and messages show it (no password, no secret parameter)."""
        return mask_url(self.url)


def bridge_error(message: str, kind: str, **data: Any) -> MCPError:
    """The MCP error a client gets when the bridge cannot do what it asked: ``kind`` (in the
    error's data) names the cause for programs, ``message`` for people."""
    return MCPError(code=INTERNAL_ERROR, message=message, data={"type": kind, **data})


def refusal(target: Target, status: int, detail: str | None) -> MCPError:
    """What a 4xx of the gateway means for someone who configured this bridge."""
    where = f"the gateway at {target.shown} refused the request ({status})"
    if status == 401:
        if target.token:
            return bridge_error(
                f"{where}: the token is refused (check TOOLMESH_TOKEN, --token-file or -t in "
                "the MCP client's configuration; `toolmesh token list` shows the gateway's "
                "tokens)", "token-refused", status=status)
        return bridge_error(f"{where}: it needs a token (set TOOLMESH_TOKEN in the MCP client's "
                            "configuration, or give --token-file)", "token-missing",
                            status=status)
    if status == 403:
        return bridge_error(f"{where}: {detail or 'this token may not use it'} (check -w and "
                            "the token's workspaces)", "forbidden", status=status)
    if status == 404:
        return bridge_error(f"nothing serves MCP at {target.shown} (404): check -u, the "
                            "gateway's URL (e.g. http://localhost:8888/)", "not-found",
                            status=status)
    return bridge_error(f"{where}: {detail or 'HTTP error'}", "gateway-error", status=status)


def explained(target: Target, error: BaseException) -> MCPError:
    """``error`` (what opening or using the session raised: an exception group from the
    transport's tasks, often) as one MCP error that says what to check."""
    found = _leaf(error)
    if isinstance(found, MCPError):
        return found
    if isinstance(found, httpx2.TransportError | OSError):
        return bridge_error(gateway_unreachable(target.url, found), "gateway-unreachable")
    if isinstance(found, TimeoutError):
        return bridge_error(f"the gateway at {target.shown} did not answer within "
                            f"{OPEN_TIMEOUT:g} s: is `toolmesh serve` running there?",
                            "gateway-timeout")
    return bridge_error(f"the session with the gateway at {target.shown} failed: "
                        f"{type(found).__name__}: {found}", "gateway-error")


def _leaf(error: BaseException) -> BaseException:
    """The first telling exception inside ``error`` (groups opened, cancellations skipped)."""
    if isinstance(error, BaseExceptionGroup):
        leaves = [_leaf(e) for e in error.exceptions]
        telling = [e for e in leaves if not isinstance(e, asyncio.CancelledError)]
        return (telling or leaves)[0]
    return error


class Upstream:
    """The bridge's one MCP session with the gateway: opened when first needed, reopened
    after the gateway forgot it or the connection broke.

    The session lives in a task of its own (the SDK's transport and session are context
    managers that must be left in the task that entered them); requests use it from any task.
    """

    def __init__(self, target: Target,
                 on_notification: Callable[[object], Awaitable[None]],
                 ask: Callable[..., Awaitable[Any]] | None = None) -> None:
        self.target = target
        self._on_notification = on_notification
        #: where the gateway's questions go (elicitation; ``None``: the client takes none)
        self.ask = ask
        self._lock = asyncio.Lock()
        self._session: ClientSession | None = None
        self._holder: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        #: why the last session ended or failed to open, said plainly
        self._failure: MCPError | None = None
        #: the gateway's latest refusal (a 4xx) on the current session
        self._refused: MCPError | None = None
        #: whether the gateway answered 404 to the current session's id: it does not know it
        self._forgotten = False

    async def run(self, operation: Callable[[ClientSession], Awaitable[T]]) -> T:
        """``operation`` on the session; once more on a new session when the gateway forgot
        the old one (it answers 404 to a session it does not know: nothing ran)."""
        session = await self._open()
        try:
            return await operation(session)
        except MCPError as e:
            if not self._forgotten:
                raise await self._explain(e) from None
            log.info("the gateway at %s forgot this session (restarted?): opening a new one",
                     self.target.shown)
        await self._drop(session)
        session = await self._open()
        try:
            return await operation(session)
        except MCPError as e:
            raise await self._explain(e) from None

    async def close(self) -> None:
        """End the session (the gateway is told: the transport deletes it)."""
        await self._end_holder()

    async def _open(self) -> ClientSession:
        async with self._lock:
            if self._session is not None:
                return self._session
            await self._end_holder()
            self._closing = asyncio.Event()
            self._failure = self._refused = None
            self._forgotten = False
            ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
            self._holder = asyncio.create_task(self._hold(ready, self._closing),
                                               name="toolmesh-mcp-upstream")
            try:
                return await asyncio.shield(ready)
            except MCPError as e:
                log.warning("%s", e.message)
                raise

    async def _drop(self, session: ClientSession) -> None:
        async with self._lock:
            if self._session is session:
                self._session = None
                await self._end_holder()

    async def _end_holder(self) -> None:
        holder = self._holder
        if holder is not None and not holder.done():
            self._closing.set()
            await asyncio.wait({holder}, timeout=5)
            if not holder.done():
                holder.cancel()
                await asyncio.gather(holder, return_exceptions=True)

    async def _hold(self, ready: asyncio.Future[ClientSession], closing: asyncio.Event) -> None:
        """Open the session, hand it over through ``ready``, and keep it until ``closing``."""
        headers = {"Authorization": f"Bearer {self.target.token}"} if self.target.token else {}
        # no read timeout: a call's answer and the stream of notifications may be silent for
        # long; the bridge puts its own limits on the waits for answers
        timeout = httpx2.Timeout(OPEN_TIMEOUT, read=None)
        session: ClientSession | None = None
        try:
            async with httpx2.AsyncClient(headers=headers, timeout=timeout,
                                          event_hooks={"response": [self._saw]}) as http, \
                    streamable_http_client(self.target.url, http_client=http) as (read, write,
                                                                                  *_), \
                    ClientSession(read, write, read_timeout_seconds=LIST_TIMEOUT + MARGIN,
                                  message_handler=self._on_message,
                                  elicitation_callback=self.ask) as session:
                async with asyncio.timeout(OPEN_TIMEOUT):
                    found = await session.initialize()
                log.info("connected to the gateway at %s (%s %s, protocol %s)", self.target.shown,
                         found.server_info.name, found.server_info.version,
                         found.protocol_version)
                self._session = session
                ready.set_result(session)
                await closing.wait()
        except BaseException as e:  # told to the requests; raised only when the bridge stops
            stopping = not isinstance(e, Exception)  # cancelled (or interrupted)
            failure = bridge_error(f"the bridge stopped before the gateway at "
                                   f"{self.target.shown} answered", "stopped") if stopping \
                else self._refused or explained(self.target, e)
            if not stopping:
                self._failure = failure
            if not ready.done():
                ready.set_exception(failure)
            elif not stopping:
                log.warning("the session with the gateway ended: %s", failure.message)
            if stopping:
                raise
        finally:
            if self._session is session:
                self._session = None

    async def _explain(self, error: MCPError) -> MCPError:
        """A gateway's MCP error as the client should see it: the gateway's own error as it
        is; the transport's stand-ins (for an HTTP refusal, a broken connection) said
        plainly."""
        if error.code == INTERNAL_ERROR and error.message == _HTTP_ERROR and self._refused:
            return self._refused
        if error.code == CONNECTION_CLOSED:
            holder = self._holder
            if holder is not None:  # it is ending: it knows why
                await asyncio.wait({holder}, timeout=5)
            return self._failure or bridge_error(
                f"the connection to the gateway at {self.target.shown} closed",
                "gateway-closed")
        return error

    async def _saw(self, response: httpx2.Response) -> None:
        """Every response of the gateway: remember a refusal, with the gateway's reason."""
        status = response.status_code
        if status not in (401, 403, 404):
            return
        if status == 404 and "mcp-session-id" in response.request.headers:
            self._forgotten = True  # it restarted, say: run() opens a new session
            return
        detail = None
        if status == 403:
            try:
                await response.aread()
                detail = response.json().get("error", {}).get("message")
            except Exception:  # noqa: BLE001 - no reason given: the status says enough
                detail = None
        self._refused = refusal(self.target, status, detail)

    async def _on_message(self, message: object) -> None:
        if isinstance(message, Exception):
            log.debug("the gateway's stream: %r", message)
            return
        await self._on_notification(message)


class StdioBridge:
    """The MCP server on stdio that passes a client's tool requests to the gateway."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.upstream = Upstream(target, self._on_upstream)
        #: a 2026-07-28 client's listeners (``subscriptions/listen``)
        self._fanout = InMemorySubscriptionBus()
        self.server = Server(
            "toolmesh", version=__version__,
            instructions=f"The tools of toolmesh at {target.shown}.",
            on_list_tools=self._list, on_call_tool=self._call,
            on_subscriptions_listen=ListenHandler(self._fanout))
        #: the stdio client's session once it listed the tools (whom to tell they changed)
        self._client: ServerSession | None = None
        #: how to ask about each call under way: the gateway's question goes with it
        self._calls: list[Asker] = []
        #: a 2026-07-28 client's calls whose question waits for its next round
        self._held = HeldCalls()
        #: the newest list the bridge saw (given to the client, or listed on the gateway's
        #: word that the tools changed): a change that leaves it as it was is not passed on
        self._listed: list[dict[str, Any]] | None = None
        self._changed = asyncio.Event()

    async def serve_stdio(self) -> None:
        """Serve the process's stdin and stdout until the client closes stdin."""
        async with stdio_server() as (read, write):
            await self.serve(read, write)

    async def serve(self, read: Any, write: Any) -> None:
        """Serve one client over the given streams (stdio's, or a test's)."""
        options = self.server.create_initialization_options(
            NotificationOptions(tools_changed=True))
        watcher = asyncio.create_task(self._watch(), name="toolmesh-mcp-tools-changed")
        try:
            await self.server.run(read, write, options)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            await self._held.close()
            await self.upstream.close()

    async def _list(self, ctx: ServerRequestContext[Any, Any],
                    params: mcp_types.PaginatedRequestParams | None) -> mcp_types.ListToolsResult:
        self._client = ctx.session
        self._offer_questions(ctx.session)
        result = await self.upstream.run(lambda s: s.list_tools(params=params))
        self._listed = _tools(result)
        return result

    async def _call(self, ctx: ServerRequestContext[Any, Any],
                    params: mcp_types.CallToolRequestParams,
                    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        self._client = ctx.session
        self._offer_questions(ctx.session)
        token = (ctx.meta or {}).get("progress_token")  # the SDK's mapping, Python's spelling
        report: Progress | None = None
        if token is not None:
            async def report(part: dict[str, Any]) -> None:
                await ctx.session.send_progress_notification(
                    token, part["progress"], part.get("total"), part.get("message"),
                    related_request_id=ctx.request_id)

        if asks_in_rounds(ctx):  # 2026-07-28: the question goes back as the call's result
            return await self._round(ctx, params, report)

        async def ask(question: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
            if not _takes(ctx, question):
                return CANCEL
            if isinstance(question, mcp_types.ElicitRequestURLParams):
                return await ctx.session.elicit_url(
                    question.message, question.url,
                    question.elicitation_id or uuid.uuid4().hex,
                    related_request_id=ctx.request_id)
            return await ctx.session.elicit_form(question.message, question.requested_schema,
                                                 related_request_id=ctx.request_id)

        return await self._forward(params, ctx.meta, ask, report)

    async def _forward(self, params: mcp_types.CallToolRequestParams, meta: Any, ask: Asker,
                       report: Progress | None) -> mcp_types.CallToolResult:
        """The call to the gateway; its question goes to ``ask``."""
        progress: Callable[[float, float | None, str | None], Awaitable[None]] | None = None
        if report is not None:
            async def progress(done: float, total: float | None, message: str | None) -> None:
                await report({"progress": done, "total": total, "message": message})

        # the client's idempotency key goes on as it came (the gateway checks it)
        key = (meta or {}).get(IDEMPOTENCY_KEY)
        sent: Any = {IDEMPOTENCY_KEY: key} if key is not None else None
        self._calls.append(ask)
        try:
            return await self.upstream.run(lambda s: s.call_tool(
                params.name, params.arguments, read_timeout_seconds=CALL_TIMEOUT + MARGIN,
                progress_callback=progress, meta=sent))
        finally:
            self._calls.remove(ask)

    async def _round(self, ctx: ServerRequestContext[Any, Any],
                     params: mcp_types.CallToolRequestParams, report: Progress | None,
                     ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        """One round of a 2026-07-28 client's call: the gateway's answer, or its question
        (the call held until the client comes back with the answer)."""
        call = {"name": params.name, "arguments": params.arguments or {}}
        if params.request_state is None:
            meta = ctx.meta

            async def run(held: Held[mcp_types.CallToolResult]) -> mcp_types.CallToolResult:
                async def ask(question: mcp_types.ElicitRequestParams,
                              ) -> mcp_types.ElicitResult:
                    if not _takes(ctx, question):
                        return CANCEL
                    answered: asyncio.Future[mcp_types.ElicitResult] = \
                        asyncio.get_running_loop().create_future()

                    async def answer(result: mcp_types.ElicitResult) -> None:
                        if not answered.done():
                            answered.set_result(result)

                    await held.ask(Question(params=_as_asked(question), answer=answer,
                                            about=call))
                    return await answered

                return await self._forward(params, meta, ask,
                                           held.report if report is not None else None)

            held: Held[mcp_types.CallToolResult] = Held(run)
        else:
            taken = self._held.take(params.request_state)
            if taken is None or taken[1].about != call:
                if taken is not None:  # another call's state: that call is given up
                    await taken[1].answer(CANCEL)
                    await taken[0].abandon()
                raise MCPError(INVALID_PARAMS, (
                    f"this call's requestState names no question of the bridge about it (it "
                    f"was answered, or is older than {self._held.window:g} s): make the call "
                    "again without it"))
            held, asked = taken
            answer = answer_of((params.input_responses or {}).get(QUESTION))
            if answer is None:  # came back without the answer: asked again
                return _input_required(asked, self._held.hold(held, asked))
            await asked.answer(answer)
        held.progress = report
        try:
            outcome = await held.next()
        finally:
            held.progress = None
        if isinstance(outcome, Question):
            return _input_required(outcome, self._held.hold(held, outcome))
        return outcome

    def _offer_questions(self, client: ServerSession) -> None:
        """The gateway may ask the client's person (a call that needs approval; a sign-in
        link too, when the client takes links) when the client takes form questions: said
        when the session with the gateway opens."""
        elicitation = getattr(client.client_capabilities, "elicitation", None)
        takes_forms = elicitation is not None and not (
            elicitation.form is None and elicitation.url is not None)
        self.upstream.ask = self._ask if takes_forms else None

    async def _ask(self, context: Any, params: mcp_types.ElicitRequestParams,
                   ) -> mcp_types.ElicitResult:
        """The gateway's question, passed to the client with the call it is about. Only one
        call may be under way to tell which (the gateway's question names its own request,
        which the client never saw); with several it is cancelled, and so is a question of
        a mode the client did not declare."""
        if len(self._calls) != 1:
            log.info("a question of the gateway could not be put to the client: %d calls "
                     "under way", len(self._calls))
            return CANCEL
        return await self._calls[0](params)

    async def _on_upstream(self, message: object) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._changed.set()  # checked by _watch: not here, on the gateway's read path

    async def _watch(self) -> None:
        """Tell the client its tools changed, once a fresh list shows they did."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            client = self._client
            if client is None:
                continue  # it never listed them: nothing it knows is out of date
            try:
                fresh: list[dict[str, Any]] | None = _tools(
                    await self.upstream.run(lambda s: s.list_tools()))
            except MCPError as e:
                log.warning("the gateway says the tools changed; listing them failed: %s", e)
                fresh = None  # the client may fare better: tell it
            if fresh is not None and fresh == self._listed:
                log.debug("the gateway says the tools changed; the list is the same")
                continue
            if fresh is not None:
                self._listed = fresh
            log.info("the tools changed: telling the MCP client")
            await self._fanout.publish(ToolsListChanged())
            try:
                await client.send_tool_list_changed()
            except Exception as e:  # noqa: BLE001 - a client that went away: nothing to tell
                log.debug("could not tell the client its tools changed: %r", e)


def _takes(ctx: ServerRequestContext[Any, Any], question: mcp_types.ElicitRequestParams) -> bool:
    """Whether ``ctx``'s client declared questions of ``question``'s mode."""
    if isinstance(question, mcp_types.ElicitRequestURLParams):
        return takes_links(ctx)
    return takes_forms(ctx)


def _as_asked(question: mcp_types.ElicitRequestParams) -> mcp_types.ElicitRequestParams:
    """The gateway's question as a 2026-07-28 client is asked it (no id, no task)."""
    if isinstance(question, mcp_types.ElicitRequestURLParams):
        return mcp_types.ElicitRequestURLParams(message=question.message, url=question.url)
    return mcp_types.ElicitRequestFormParams(message=question.message,
                                             requested_schema=question.requested_schema)


def _input_required(question: Question, state: str) -> mcp_types.InputRequiredResult:
    return mcp_types.InputRequiredResult(
        input_requests={QUESTION: mcp_types.ElicitRequest(params=question.params)},
        request_state=state)


def _tools(result: mcp_types.ListToolsResult) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in result.tools]


async def serve_stdio(target: Target) -> None:
    """``toolmesh mcp serve --stdio``: the bridge on this process's stdin and stdout."""
    log.info("serving MCP on stdio for %s", target.shown)
    await StdioBridge(target).serve_stdio()
