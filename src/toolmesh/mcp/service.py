"""The mcp-tool service on the bus (TrustGraph's wire); its client is :mod:`toolmesh.mcp.client`.

Request ``{"name": "<mcp config id>", "parameters": {...} | "<JSON text of an object>",
"timeout"?: seconds}`` → response ``{"error": null, "text": str | null, "object": str | null}``
(``object`` is the JSON text of the server's ``structuredContent``, as TrustGraph sends it).
A discovery request ``{"name": id, "operation": "describe"}`` answers ``object`` = the JSON of
``{"name", "description", "inputSchema", "execution"?, "annotations"?}`` of the remote tool (``execution``
as the server lists it: ``{"taskSupport": "required"}`` marks a tool this client cannot call).
``{"name": id, "operation": "list-tools"}`` answers ``object`` = the JSON of
``[{"name", "description", "inputSchema", "execution"?}, ...]``: every tool the item's server
lists, whatever its ``remote-name`` (to test a connection, or to choose the remote tool).

Progress (:mod:`toolmesh.mcp.progress`): the server's progress notifications push a call's
``timeout`` back, up to ``"max-timeout"`` (default: the service's ``max_call_timeout``); with
``"progress": true`` each comes as a response ``{..., "progress": {"progress", "total",
"message"}, "end_of_stream": false}`` before the final one, whose shape is unchanged.
Sampling requests of servers whose item allows it go to the text-completion service
(:mod:`toolmesh.mcp.sampling`); a server's questions during a call (elicitation) go to the
caller as ``{..., "elicitation": REQUEST, "end_of_stream": false}`` when it streams (and does
not say ``"questions": false``), and wait for the person's answer
(:mod:`toolmesh.mcp.elicitation`). An item with ``auth`` signs in with OAuth: a call uses the
grant of the caller the gateway stamped as ``actor`` (:mod:`toolmesh.mcp.signin`), and the
login operations are in :mod:`toolmesh.mcp.login_operations`.

Idempotency keys: a dialog's call carries its key in ``io.toolmesh/idempotency-key``
(``DIALOG/STEP/CALL``: the server's questions then go to that dialog's person); any other
caller's in ``idempotency-key`` (the gateway sends one with every call). A request with
neither is named by its own id (the same on each delivery). The key reaches the server in the
call's ``_meta``, as ``io.toolmesh/idempotency-key`` (:mod:`toolmesh.mcp.meta`).

When a server's tools change (it sent ``notifications/tools/list_changed``, refused a call's
arguments, or its ``mcp`` item changed or went) the service says so on its notify queue
(:mod:`toolmesh.mcp.notices`); a call whose arguments the server refused fails with type
"invalid-arguments". ``describe`` and ``list-tools`` always list
the server's tools afresh: clients ask for them rarely (the agent: after its TTL or a notice).

The servers come from config items of type ``mcp``; additions, changes (the old session is
closed, the next call connects anew) and deletions apply while the service runs.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolmesh.approvals import APPROVALS_NOTIFY_QUEUE, ApprovalGate
from toolmesh.bus.base import Bus
from toolmesh.config.client import ConfigSnapshot
from toolmesh.config.stdio import DENY_ALL, StdioAllowList
from toolmesh.config.workspaces import WorkspaceWatcher, request_workspace
from toolmesh.errors import RequestError, ServiceError, ToolmeshError
from toolmesh.llm.service import TextCompletionClient
from toolmesh.logs import register_secret
from toolmesh.mcp.addresses import DEFAULT_POLICY, AddressPolicy
from toolmesh.mcp.asking import Asking
# the client, and the queues both use, live apart; re-exported, as they were defined here
from toolmesh.mcp.client import (
    MCP_TOOL_REQUEST_QUEUE,
    MCP_TOOL_RESPONSE_QUEUE,
    McpToolClient,
)
from toolmesh.mcp.config import McpServer
from toolmesh.mcp.errors import InvalidArguments, McpError, McpSignInRefused
from toolmesh.mcp.meta import IDEMPOTENCY_KEY
from toolmesh.mcp.notices import MCP_TOOL_NOTIFY_QUEUE, NoticeSender, NoticeWatcher
from toolmesh.mcp.progress import DEFAULT_MAX_TIMEOUT, call_progress
from toolmesh.mcp.remote_tool import RemoteTool
from toolmesh.mcp.results import McpResult
from toolmesh.mcp.sampling import DEFAULT_TIMEOUT as SAMPLING_TIMEOUT
from toolmesh.mcp.sampling import Sampler
from toolmesh.mcp_oauth.errors import OAuthError
from toolmesh.rpc.service import Reply, Service, current_request_id
from toolmesh.schema.tool_service import IDEMPOTENCY_KEY as CALL_KEY
from toolmesh.schema.json_object import json_object

if TYPE_CHECKING:
    from toolmesh.mcp.sessions import SessionPool
    from toolmesh.mcp.signin import SignIn
    from toolmesh.mcp_oauth import GrantStore, Logins

log = logging.getLogger("toolmesh.mcp.service")

__all__ = ["MCP_TOOL_REQUEST_QUEUE", "MCP_TOOL_RESPONSE_QUEUE", "McpToolClient",
           "McpToolService", "parse_parameters"]


def bad_request(message: str) -> ServiceError:
    return ServiceError(message, type="bad-request")


def parse_parameters(value: Any) -> dict[str, Any]:
    """The tool's arguments: a JSON object, or the JSON text of one (TrustGraph sends text)."""
    try:
        return json_object(value, name="'parameters'")
    except ValueError as e:
        raise bad_request(str(e)) from None


def response(*, text: str | None = None, object: Any = None) -> dict[str, Any]:
    return {"error": None, "text": text,
            "object": None if object is None else json.dumps(object, ensure_ascii=False)}


@dataclass(frozen=True)
class _Servers:
    """One workspace's mcp items: the usable ones, why the others are not, and the version."""

    servers: dict[str, McpServer] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)  # id -> why it cannot be used
    version: int = -1


class McpToolService(Service):
    """Calls MCP tools named by ``mcp`` config items, over pooled, supervised sessions.

    ``stdio_allow`` names the commands a ``stdio`` item may start (default: none). It is
    checked here too, not only when config is put: an item stored before the operator
    narrowed the list, or written to the store by other means, is still not run.
    ``addresses``: where HTTP servers may be reached (mcp/addresses.py; default: private
    addresses only for items an admin put).
    """

    error_type = "mcp-error"

    def __init__(self, bus: Bus, *, request_queue: str = MCP_TOOL_REQUEST_QUEUE,
                 response_queue: str = MCP_TOOL_RESPONSE_QUEUE,
                 config_queues: dict[str, str] | None = None, id: str = "mcp-tool",
                 concurrency: int = 64, call_timeout: float = 60.0,
                 workspace: str = "default",
                 stdio_allow: StdioAllowList = DENY_ALL,
                 max_call_timeout: float = DEFAULT_MAX_TIMEOUT,
                 text_completion_queues: dict[str, str] | None = None,
                 sampling_timeout: float = SAMPLING_TIMEOUT,
                 notify_queue: str = MCP_TOOL_NOTIFY_QUEUE,
                 approvals_notify_queue: str = APPROVALS_NOTIFY_QUEUE,
                 addresses: AddressPolicy = DEFAULT_POLICY,
                 logins: GrantStore | None = None, public_url: str | None = None,
                 load_sdk_at_start: bool = False) -> None:
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=f"{id}-request", concurrency=concurrency)
        #: load the MCP SDK before serving (`toolmesh run mcp-tool`, whose whole work it is),
        #: rather than once a server is configured (:meth:`_warm`)
        self._load_sdk_at_start = load_sdk_at_start
        self.call_timeout = call_timeout
        self.max_call_timeout = max_call_timeout
        self.stdio_allow = stdio_allow
        # the LLM that answers servers allowed to sample (mcp/sampling.py)
        self._llm = TextCompletionClient(bus, **(text_completion_queues or {}))
        self.notices = NoticeSender(bus, queue=notify_queue)
        # the answers to servers' questions, announced by the agents' approvals services
        self._answers = ApprovalGate(bus, notify_queue=approvals_notify_queue)
        self._login_notices = NoticeWatcher(bus, queue=notify_queue)
        self._sampler = Sampler(self._llm, timeout=sampling_timeout)
        self._addresses = addresses
        self._grants = logins
        self._public_url = public_url
        # the sign-ins and the session pool (built by _calling at first use)
        self._logins: Logins | None = None
        self._signin: SignIn | None = None
        self._pool: SessionPool | None = None
        #: whether the MCP SDK's load was asked for, once an mcp item appeared (_warm)
        self._warmed = False
        #: the workspace of requests that name none
        self.workspace = workspace
        #: workspace -> its mcp items (each request is served from its own workspace's)
        self.workspaces: dict[str, _Servers] = {}
        self._changed = asyncio.Condition()
        self._watcher = WorkspaceWatcher(bus, types=["mcp"], on_change=self._on_config,
                                         on_forget=self._forget_workspace,
                                         preload=(workspace,), **(config_queues or {}))

    @property
    def logins(self) -> Logins:
        """The sign-ins of items with ``auth`` (:mod:`toolmesh.mcp_oauth`)."""
        return self._calling()[0]

    @property
    def signin(self) -> SignIn:
        """Signs calls in with the caller's grant, or asks them to sign in."""
        return self._calling()[1]

    @property
    def pool(self) -> SessionPool:
        """The sessions to the MCP servers."""
        return self._calling()[2]

    def _calling(self) -> tuple[Logins, SignIn, SessionPool]:
        """What calls servers, built at the first request that needs it.

        Not at start: these load the MCP SDK (its client sessions, transports and OAuth
        helpers: about 0.5 s of CPU), which every ``toolmesh serve`` would pay before
        ``ready`` though most never call an MCP server.
        """
        if self._pool is None:
            from toolmesh.mcp.elicitation import Elicitor  # (at once if _warm has loaded it)
            from toolmesh.mcp.sessions import SessionPool
            from toolmesh.mcp.signin import SignIn, http_factory
            from toolmesh.mcp_oauth.grants import MemoryGrants
            from toolmesh.mcp_oauth.logins import Logins

            elicitor = Elicitor(self._answers)
            # sign-ins of items with `auth` (mcp_oauth): kept in the grant store, finished at
            # the gateway's callback under `public_url`, announced to the other replicas
            logins = Logins(self._grants if self._grants is not None else MemoryGrants(),
                            http=http_factory(self._addresses), public_url=self._public_url,
                            announce=self.notices.login_completed,
                            on_completed=self._signed_in)
            signin = SignIn(logins, elicitor)
            pool = SessionPool(sampler=self._sampler, elicitor=elicitor,
                               on_tools_changed=self.notices.tools_changed,
                               addresses=self._addresses, auth=signin.auth_for)
            self._logins, self._signin, self._pool = logins, signin, pool
        assert self._logins is not None and self._signin is not None
        return self._logins, self._signin, self._pool

    @property
    def servers(self) -> dict[str, McpServer]:
        """The usable mcp items of the default workspace (for tests and tools)."""
        return self.workspaces.get(self.workspace, _Servers()).servers

    @property
    def version(self) -> int:
        """The config version in effect for the default workspace."""
        return self.workspaces.get(self.workspace, _Servers()).version

    def error_response(self, error: dict[str, str]) -> dict[str, Any]:
        return {"error": error, "text": None, "object": None}

    async def start(self) -> None:
        if self._load_sdk_at_start:
            _load_calling()
        await self._llm.start()
        await self._answers.start()
        await self.notices.start()
        await self._login_notices.watch_logins(self._login_completed)
        await self._watcher.start()
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        await self._watcher.stop()
        if self._pool is not None:
            await self._pool.close()
        await self._login_notices.stop()
        await self.notices.stop()
        await self._answers.stop()
        await self._llm.stop()

    async def wait_for_config(self, version: int, *, workspace: str | None = None) -> None:
        """Wait until config ``version`` (or later) is in effect for ``workspace`` (default:
        the service's), loading it if no request has named it yet."""
        workspace = workspace or self.workspace
        await self._watcher.ensure(workspace)
        async with self._changed:
            await self._changed.wait_for(
                lambda: self.workspaces.get(workspace, _Servers()).version >= version)

    async def _on_config(self, snapshot: ConfigSnapshot) -> None:
        workspace = snapshot.workspace
        servers: dict[str, McpServer] = {}
        invalid: dict[str, str] = {}
        for key, raw in snapshot.of("mcp").items():
            try:
                server = McpServer.from_config(key, raw, workspace=workspace)
            except ToolmeshError as e:
                invalid[key] = e.message
                log.warning("config item mcp/%s of workspace %r cannot be used: %s", key,
                            workspace, e.message)
                continue
            register_secret(server.auth_token)
            for value in server.env.values():
                register_secret(value)
            if server.transport == "stdio" and not self.stdio_allow.allows(server.command):
                invalid[key] = self.stdio_allow.refusal(f"mcp/{key}", server.command)
                log.warning("config item mcp/%s of workspace %r is not run: %s", key,
                            workspace, invalid[key])
                continue
            servers[key] = server
        previous = self.workspaces.get(workspace, _Servers()).servers
        self.workspaces[workspace] = _Servers(servers, invalid, snapshot.version)
        if servers:
            self._warm()
        # A session to settings that changed or vanished must not serve another call.
        stale = [id for id, old in previous.items()
                 if id not in servers or servers[id].connection_key != old.connection_key]
        await self._forget(stale, workspace)
        # A client may have described a changed item (another remote tool, another server)
        # before this service applied the change, and so hold the old tool's schema: tell it.
        changed = [id for id, old in previous.items()
                   if id not in servers or servers[id] != old]
        if changed:
            self.notices.tools_changed(workspace, changed)
        log.info("config version %d: MCP tools of workspace %r: %s", snapshot.version,
                 workspace, ", ".join(sorted(servers)) or "(none)")
        async with self._changed:
            self._changed.notify_all()

    def _warm(self) -> None:
        """Load what calls servers once there is a server to call, just after this config
        change is applied: the first describe then finds the SDK loaded, as the agent gives it
        a second to answer, and a deployment with no mcp item never loads it (see
        :meth:`_calling`). On the event loop's thread, not another: the SDK's modules import
        each other in circles, and a second thread importing them while this one does (a
        request's) finds some half made."""
        if not self._warmed and self._pool is None:
            self._warmed = True
            asyncio.get_running_loop().call_soon(_load_quietly)

    async def _forget_workspace(self, workspace: str) -> None:
        forgotten = self.workspaces.pop(workspace, None)
        if forgotten is not None:
            await self._forget(forgotten.servers, workspace)

    async def _forget(self, ids: Iterable[str], workspace: str) -> None:
        """Close the sessions of items ``ids`` of ``workspace`` (none before the first call:
        the pool, and the MCP SDK with it, is not built for this)."""
        if self._pool is not None:
            pool = self._pool
            await asyncio.gather(*(pool.forget(id, workspace=workspace) for id in ids))

    def _login_completed(self, workspace: str, principal: str, resource: str,
                         at: float) -> None:
        """A login finished (here or on another replica): tell the sign-ins. Before they
        are built nothing here waits for one nor holds a session to end."""
        if self._logins is not None:
            self._logins.completed(workspace, principal, resource, at)

    def _server(self, name: Any, workspace: str) -> McpServer:
        if not isinstance(name, str) or not name:
            raise bad_request("an mcp-tool request needs 'name', the id of an mcp config item")
        items = self.workspaces.get(workspace, _Servers())
        server = items.servers.get(name)
        if server is not None:
            return server
        if name in items.invalid:
            raise McpError(f"MCP tool {name!r} is misconfigured: {items.invalid[name]}")
        # only this workspace's ids: another workspace's are not the caller's to see
        known = ", ".join(sorted(items.servers)) or "none"
        raise McpError(f"no MCP tool {name!r} is configured in workspace {workspace!r} "
                       f"(configured: {known})")

    def _timeout(self, request: Mapping[str, Any]) -> float:
        timeout = request.get("timeout")
        if timeout is None:
            return self.call_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise bad_request(f"'timeout' must be a positive number of seconds, not {timeout!r}")
        return float(timeout)

    async def _lookup(self, name: Any, workspace: str) -> McpServer:
        await self._watcher.ensure(workspace)
        try:
            return self._server(name, workspace)
        except McpError:
            # A caller may have seen a config version this service has not applied yet (the
            # agent builds its tools from the same push): fetch the config once and look again.
            try:
                await self._watcher.reload(workspace)
            except RequestError as e:
                log.warning("could not reload the mcp config of workspace %r: %s", workspace,
                            e.message)
            return self._server(name, workspace)

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        # here, not at the top: they load the MCP SDK's OAuth helpers (see _calling)
        from toolmesh.mcp.login_operations import LOGIN_OPERATIONS, actor_of

        workspace = request_workspace(request, default=self.workspace)
        operation = request.get("operation")
        if operation is not None and not isinstance(operation, str):
            raise bad_request("'operation' must be a string: invoke, describe, list-tools, "
                              "login, login-finish, logins or logout")
        if operation in ("logins", "login-finish"):  # about the caller, not one item
            await self._watcher.ensure(workspace)
            await reply(response(object=await self._login_operation(operation, request,
                                                                     None, workspace)))
            return
        server = await self._lookup(request.get("name"), workspace)
        timeout = self._timeout(request)
        if operation is None or operation == "":  # absent: TrustGraph's plain call
            operation = "invoke"
        if operation in LOGIN_OPERATIONS:
            await reply(response(object=await self._login_operation(operation, request,
                                                                     server, workspace)))
            return
        actor = actor_of(request)
        # an item that signs in per person: this caller's own session and grant
        server = self._as_caller(server, actor)
        if operation == "describe":
            await self.signin.ensure(server, None, actor=actor)
            await reply(response(object=await self.describe(server, timeout=timeout)))
        elif operation == "list-tools":
            await self.signin.ensure(server, None, actor=actor)
            await reply(response(object=await self.list_tools(server, timeout=timeout)))
        elif operation in ("invoke", "call"):
            parameters = parse_parameters(request.get("parameters"))
            # progress moves the deadline and may be streamed back (mcp/progress.py)
            progress = call_progress(request, timeout=timeout, default_max=self.max_call_timeout,
                                     reply=reply)
            key = request.get(IDEMPOTENCY_KEY)  # a dialog's call: its person is asked
            key = key if isinstance(key, str) and key else None
            # a question of the server goes to the caller, when it streams (elicitation.py)
            asking = Asking(key=key, workspace=workspace, left=progress.left,
                            hold=progress.hold,
                            send=reply if request.get("progress") is True
                            and request.get("questions") is not False else None)
            result = await self._call(server, parameters, timeout=timeout,
                                      progress=progress, key=key or _call_key(request),
                                      asking=asking, actor=actor)
            await progress.settled()
            await reply(self._result_response(server, result))
        else:
            raise bad_request(f"unknown operation {operation!r}; operations: invoke, describe, "
                              "list-tools, login, login-finish, logins, logout")

    async def _call(self, server: McpServer, parameters: dict[str, Any], *, timeout: float,
                    progress: Any, key: str | None, asking: Asking,
                    actor: str | None) -> McpResult:
        """Call the tool, signed in first when its server wants OAuth (mcp/signin.py); a
        refused grant (revoked, too narrow) is signed in again once."""
        await self.signin.ensure(server, asking, actor=actor)
        try:
            return await self.pool.call_tool(server, parameters, timeout=timeout,
                                             progress=progress, key=key, asking=asking)
        except McpSignInRefused as e:
            await self.signin.ensure(server, asking, actor=actor, challenge=e.challenge)
        return await self.pool.call_tool(server, parameters, timeout=timeout,
                                         progress=progress, key=key, asking=asking)

    def _signed_in(self, workspace: str, principal: str, resource: str, at: float) -> None:
        """A new grant (made at ``at``): the sessions begun under the old one end (a server
        may bind a session to the token it began with); the next call opens one with the new
        grant."""
        if self._pool is not None:
            self._pool.drop_principal(workspace, principal, before=at)

    @staticmethod
    def _as_caller(server: McpServer, actor: str | None) -> McpServer:
        from toolmesh.mcp.signin import as_caller  # loads the SDK: see _calling

        try:
            return as_caller(server, actor)
        except OAuthError as e:
            raise ServiceError(e.message, type=e.type) from None

    async def _login_operation(self, operation: str, request: dict[str, Any],
                               server: McpServer | None, workspace: str) -> Any:
        from toolmesh.mcp import login_operations  # loads the SDK: see _calling

        try:
            if operation == "logins":
                servers = self.workspaces.get(workspace, _Servers()).servers
                return await login_operations.listing(self.logins, servers, workspace, request)
            if operation == "login-finish":
                return await login_operations.finish(self.logins, request)
            assert server is not None
            if operation == "login":
                return await login_operations.login(self.logins, server, request)
            return await login_operations.logout(self.logins, server, request)
        except OAuthError as e:
            raise ServiceError(e.message, type=e.type) from None

    async def describe(self, server: McpServer, *, timeout: float) -> dict[str, Any]:
        """``{"name", "description", "inputSchema"}`` of the remote tool."""
        tools = await self.pool.list_tools(server, timeout=timeout, refresh=True)
        for tool in tools:
            if tool.name == server.remote_name:
                return _described(tool)
        names = ", ".join(sorted(t.name for t in tools)) or "none"
        raise McpError(f"MCP server {server.id!r} has no tool {server.remote_name!r} "
                       f"(tools: {names})")

    async def list_tools(self, server: McpServer, *, timeout: float) -> list[dict[str, Any]]:
        """Every tool of the item's server, described as :meth:`describe` describes one."""
        tools = await self.pool.list_tools(server, timeout=timeout, refresh=True)
        return [_described(tool) for tool in tools]

    @staticmethod
    def _result_response(server: McpServer, result: McpResult) -> dict[str, Any]:
        if result.is_error:
            # The tool ran and failed: its own words, for the LLM to read.
            message = result.text or f"MCP tool {server.remote_name!r} failed"
            if result.refused_arguments:
                raise InvalidArguments(message)
            raise ServiceError(message, type="tool-error")
        return response(text=result.text, object=result.object)


def _call_key(request: Mapping[str, Any]) -> str | None:
    """The idempotency key of a call that is not a dialog's: the caller's
    (``idempotency-key``), else the request's own id, the same on each delivery of it."""
    key = request.get(CALL_KEY)
    if isinstance(key, str) and key:
        return key
    request_id = current_request_id()
    return None if request_id is None else f"request:{request_id}"


def _described(tool: RemoteTool) -> dict[str, Any]:
    described = {"name": tool.name, "description": tool.description,
                 "inputSchema": tool.input_schema}
    if tool.task_support is not None:
        described["execution"] = {"taskSupport": tool.task_support}
    if tool.annotations:
        described["annotations"] = tool.annotations
    return described


def _load_calling() -> None:
    """Import the modules :meth:`McpToolService._calling` builds from (the MCP SDK with
    them)."""
    for name in ("toolmesh.mcp.sessions", "toolmesh.mcp.signin", "toolmesh.mcp.elicitation",
                 "toolmesh.mcp_oauth.logins", "toolmesh.mcp_oauth.grants"):
        importlib.import_module(name)


def _load_quietly() -> None:
    """:func:`_load_calling`, ahead of need: a failure is the first call's to report."""
    try:
        _load_calling()
    except Exception as e:  # noqa: BLE001 - reported again, with its context, at first use
        log.warning("could not load the MCP SDK ahead of the first call: %s", e)
