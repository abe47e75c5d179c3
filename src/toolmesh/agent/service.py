"""The agent service on the bus: TrustGraph's agent queues, tools from config, hot reload.

Each request is answered with the tools of its ``workspace`` (default: the service's): a tool
set per workspace, built at the first request that names it and rebuilt on every change to it
(:mod:`toolmesh.config.workspaces`). A dialog never sees another workspace's tools.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any

from toolmesh.agent.journaling import DialogLog, Resumption, resumption
from toolmesh.agent.loop import AgentLoop, AgentOptions
from toolmesh.agent.services_service import AgentServicesService
from toolmesh.agent.status_service import AgentToolsService
from toolmesh.agent.tools.context import ClientPool
from toolmesh.agent.toolset import WATCHED_TYPES, ToolSet, build_toolset
from toolmesh.approvals import ApprovalGate, ApprovalsService
from toolmesh.approvals.wire import ANSWER_ENTRY, REQUEST_ENTRY
from toolmesh.bus.base import Bus
from toolmesh.bus.delivery import redelivered
from toolmesh.config.client import ConfigSnapshot
from toolmesh.config.workspaces import WorkspaceWatcher, request_workspace
from toolmesh.dialogs import ABANDONED, RUNNING, Dialog, DialogJournal, JournalError
from toolmesh.dialogs.service import DialogsService
from toolmesh.mcp import McpToolClient
from toolmesh.agent.tool_calls import ToolCallsService
from toolmesh.prompt import PromptClient
from toolmesh.registry.registry import Registry
from toolmesh.rpc import deadline
from toolmesh.rpc.parking import Parked
from toolmesh.rpc.service import Reply, Service, current_request_id
from toolmesh.schema.agent import AgentRequest, message, new_message_id, parse_request

log = logging.getLogger("toolmesh.agent")

AGENT_REQUEST_QUEUE = "request:tg:agent:default"
AGENT_RESPONSE_QUEUE = "response:tg:agent:default"
#: the most seconds a dialog taken up waits for the tools of its calls in flight (the
#: announcements a replica that has just started has not heard yet: within a heartbeat)
TAKE_UP_GRACE = 10.0


class AgentService(Service):
    """Answers agent requests with a ReAct loop over the tools the config describes.

    The tools of a workspace are rebuilt whenever one of its ``tool``, ``tool-service``,
    ``mcp`` or ``settings`` items changes, or a self-announcing tool service comes or goes
    (:mod:`toolmesh.registry`), and take effect from the next dialog step; dialogs in flight
    keep running. ``workspace``: the one of requests that name none. ``announcements=False``:
    offer configured tools only (announcements are not even listened to).

    ``journal``: where dialogs are recorded as they go (docs/dialogs.md); a request delivered
    again (the agent that had it died) takes its dialog up from the last recorded step.
    ``take_up_unfinished``: at start, take up the dialogs the journal holds as running whose
    client may still wait — for a bus that does not deliver requests again (the memory bus
    of one ``toolmesh serve``, which died with them). ``abandon_unread``: of those, run on
    only the dialogs someone can still read the outcome of — a person took part (a call
    asked for approval, or a server's question: they answer through ``toolmesh approvals``
    and read it with ``toolmesh dialogs show``) — and mark the others abandoned, as for a
    client that gave up: their clients' connections died with the process, and their calls
    would be made again for no one (docs/dialogs.md).
    """

    error_type = "agent-error"

    def __init__(self, bus: Bus, *, request_queue: str = AGENT_REQUEST_QUEUE,
                 response_queue: str = AGENT_RESPONSE_QUEUE,
                 prompt_queues: dict[str, str] | None = None,
                 config_queues: dict[str, str] | None = None,
                 mcp_queues: dict[str, str] | None = None,
                 tools_queues: dict[str, str] | None = None,
                 services_queues: dict[str, str] | None = None,
                 options: AgentOptions = AgentOptions(), id: str = "agent",
                 concurrency: int = 256, workspace: str = "default",
                 announcements: bool = True,
                 announcement_queues: dict[str, str] | None = None,
                 journal: DialogJournal | None = None, take_up_unfinished: bool = False,
                 abandon_unread: bool = True,
                 dialogs_queues: dict[str, str] | None = None,
                 approvals_queues: dict[str, str] | None = None,
                 approvals_notify_queue: str | None = None,
                 tool_calls_queues: dict[str, str] | None = None) -> None:
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=f"{id}-request", concurrency=concurrency)
        self.clients = ClientPool(bus)
        self.prompts = PromptClient(bus, **(prompt_queues or {}))
        self.workspace = workspace
        #: workspace -> its tool set, and the config snapshot it was built from
        self.toolsets: dict[str, ToolSet] = {}
        self._snapshots: dict[str, ConfigSnapshot] = {}
        #: the live self-announcing tool services (None: announcements are off)
        self.registry = Registry(bus, on_change=self._on_announcements,
                                 **(announcement_queues or {})) if announcements else None
        self._rebuild = asyncio.Lock()
        self._changed = asyncio.Condition()
        self._watcher = WorkspaceWatcher(bus, types=WATCHED_TYPES, on_change=self._on_config,
                                         on_forget=self._forget_workspace,
                                         preload=(workspace,), **(config_queues or {}))
        #: where the answers of calls that wait for a person arrive (docs/approvals.md)
        self.gate = ApprovalGate(bus, **({"notify_queue": approvals_notify_queue}
                                         if approvals_notify_queue else {}))
        self.loop = AgentLoop(prompts=self.prompts, tools=lambda: self.toolset, options=options,
                              gate=self.gate)
        self.mcp = McpToolClient(bus, **(mcp_queues or {}))
        self.services: dict[str, Any] = {"prompt": self.prompts, "mcp": self.mcp,
                                         "registry": self.registry}
        #: answers which tools are offered and why others are not (`toolmesh tools`)
        self.tool_status = AgentToolsService(bus, toolset=self.toolset_of, id=id,
                                             load=self._watcher.ensure,
                                             reload=self._watcher.reload, workspace=workspace,
                                             tool_calling=self.loop.tool_calling,
                                             **(tools_queues or {}))
        #: answers which tool services there are and which of their instances are live
        #: (`toolmesh services`)
        self.services_status = AgentServicesService(
            bus, toolset=self.toolset_of, snapshot=self._snapshots.get, id=id,
            load=self._watcher.ensure, reload=self._watcher.reload, registry=self.registry,
            workspace=workspace, **(services_queues or {}))
        self.journal = journal
        self.take_up_unfinished = take_up_unfinished
        self.abandon_unread = abandon_unread
        #: answers which dialogs there were and what they did (`toolmesh dialogs`)
        self.dialogs = DialogsService(bus, journal, id=id, workspace=workspace,
                                      **(dialogs_queues or {}))
        #: answers what waits for a person, and takes their answers (`toolmesh approvals`)
        self.approvals = ApprovalsService(bus, self.gate, journal, id=id, workspace=workspace,
                                          **(approvals_queues or {}))
        #: lists and calls the workspaces' tools for the gateway's MCP endpoint
        self.tool_calls = ToolCallsService(bus, toolset=self.toolset_of,
                                           load=self._watcher.ensure,
                                           reload=self._watcher.reload, runner=self.loop.runner,
                                           approval=options.approval, workspace=workspace,
                                           id=id, gate=self.gate,
                                           **(tool_calls_queues or {}))
        self._taken_up: set[asyncio.Task[None]] = set()
        #: those of them that wait only for a person: a stop lets them go at once
        self._taken_up_parked = Parked()
        #: the ids of the journaled dialogs this process is running
        self._in_hand: set[str] = set()

    @property
    def toolset(self) -> ToolSet:
        """The tool set of the default workspace."""
        return self.toolset_of(self.workspace)

    def toolset_of(self, workspace: str) -> ToolSet:
        """The tool set of ``workspace`` (empty until it is loaded)."""
        return self.toolsets.get(workspace) or ToolSet(workspace=workspace)

    async def start(self) -> None:
        await self.prompts.start()
        await self.gate.start()
        await self.mcp.start()
        if self.registry is not None:
            await self.registry.start()
        await self._watcher.start()
        await super().start()
        await self.tool_status.start()
        await self.services_status.start()
        await self.dialogs.start()
        await self.approvals.start()
        await self.tool_calls.start()
        if self.journal is not None and self.take_up_unfinished:
            await self._take_up_unfinished(self.journal)

    async def stop(self) -> None:
        # dialogs that only wait for a person go at once (their journal keeps them; they are
        # taken up after the restart), those taken up as well as those asked for
        self._taken_up_parked.let_go("AgentService (dialogs taken up)")
        self._parked.let_go(type(self).__name__)
        if self._taken_up:  # drained like the requests in hand
            await asyncio.wait(self._taken_up, timeout=self.drain_timeout)
        for task in self._taken_up:
            task.cancel()
        await asyncio.gather(*self._taken_up, return_exceptions=True)
        await self.tool_calls.stop()
        await self.approvals.stop()
        await self.dialogs.stop()
        await self.services_status.stop()
        await self.tool_status.stop()
        await super().stop()
        await self._watcher.stop()
        if self.registry is not None:
            await self.registry.stop()
        await self.prompts.stop()
        await self.gate.stop()
        schemas = self.services.get("mcp-schemas")  # made by the first mcp-tool (mcp_tool.py)
        if schemas is not None:
            await schemas.close()  # its background reads use the client stopped next
        await self.mcp.stop()
        await self.clients.close()

    async def wait_for_config(self, version: int, *, workspace: str | None = None) -> None:
        """Wait until tools from config ``version`` (or later) are in place for ``workspace``
        (default: the service's), loading it if no request has named it yet (for tests)."""
        workspace = workspace or self.workspace
        await self._watcher.ensure(workspace)
        async with self._changed:
            await self._changed.wait_for(lambda: self.toolset_of(workspace).version >= version)

    async def wait_for_tools(self, predicate: Callable[[ToolSet], bool], *,
                             workspace: str | None = None) -> ToolSet:
        """Wait until ``workspace``'s tool set (default: the service's) satisfies
        ``predicate``, checked after each rebuild; the tool set."""
        workspace = workspace or self.workspace
        await self._watcher.ensure(workspace)
        async with self._changed:
            await self._changed.wait_for(lambda: predicate(self.toolset_of(workspace)))
        return self.toolset_of(workspace)

    async def _on_config(self, snapshot: ConfigSnapshot) -> None:
        self._snapshots[snapshot.workspace] = snapshot
        await self._build(snapshot, why=f"config version {snapshot.version}")

    async def _on_announcements(self, workspace: str) -> None:
        snapshot = self._snapshots.get(workspace)
        if snapshot is not None:  # else it is built with them when a request first names it
            await self._build(snapshot, why="announced tool services changed")

    async def _build(self, snapshot: ConfigSnapshot, *, why: str) -> None:
        async with self._rebuild:
            # the newest snapshot of the workspace: an older one may be waiting on the lock
            snapshot = self._snapshots.get(snapshot.workspace, snapshot)
            announced = self.registry.offered(snapshot.workspace) if self.registry else {}
            toolset = await build_toolset(snapshot, clients=self.clients,
                                          services=self.services, announced=announced,
                                          accept=self.registry is not None)
            self.toolsets[snapshot.workspace] = toolset
        log.info("%s: tools of workspace %r: %s", why, snapshot.workspace,
                 ", ".join(toolset.tools) or "(none)")
        async with self._changed:
            self._changed.notify_all()

    async def _forget_workspace(self, workspace: str) -> None:
        self.toolsets.pop(workspace, None)
        self._snapshots.pop(workspace, None)
        schemas = self.services.get("mcp-schemas")
        if schemas is not None:
            schemas.forget(workspace)

    def error_response(self, error: dict[str, str]) -> dict[str, Any]:
        return message("error", error.get("message", ""), message_id=new_message_id(),
                       end_of_dialog=True, error=error)

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        await self._dialog(request, reply, current_request_id())

    async def _dialog(self, request: dict[str, Any], reply: Reply, id: str | None, *,
                      taking_up: bool = False, orphaned: bool = False) -> None:
        """Run (or take up again) the dialog of ``request``, whose id is ``id``;
        ``taking_up``: one the journal holds as running (so may a request the broker says it
        delivered before); ``orphaned``: its client is gone (see ``abandon_unread``)."""
        workspace = request_workspace(request, default=self.workspace)
        parsed = parse_request(request)
        await self._watcher.ensure(workspace)
        if self.registry is not None:
            # a dialog that comes just after start waits for the announced tools it probed for
            await self.registry.settled()
        if self.journal is None or id is None:
            await self._run(parsed, reply, workspace, DialogLog(None, id or new_message_id()))
            return
        if id in self._in_hand:
            # the broker handed the request over again while this process still runs its
            # dialog (its connection broke and came back): that run answers it
            log.info("dialog %s is delivered again while it runs here; the run goes on", id)
            return
        self._in_hand.add(id)
        try:
            await self._journaled(request, parsed, reply, workspace, id,
                                  taking_up=taking_up or redelivered(), orphaned=orphaned)
        finally:
            self._in_hand.discard(id)

    async def _journaled(self, request: dict[str, Any], parsed: AgentRequest, reply: Reply,
                         workspace: str, id: str, *, taking_up: bool,
                         orphaned: bool = False) -> None:
        assert self.journal is not None
        opening: dict[str, Any] = {"workspace": workspace, "user": parsed.user,
                                   "question": parsed.question, "request": request,
                                   "timeout": deadline.remaining()}
        if not taking_up:
            # a request delivered for the first time: its id names no dialog yet, and the
            # dialog is begun by its first write
            await self._run(parsed, reply, workspace,
                            DialogLog(self.journal, id, opening=opening))
            return
        try:
            begun = await self.journal.begin(id, **opening)
        except JournalError as e:
            log.warning("dialog %s runs unrecorded: %s", id, e.message)
            await self._run(parsed, reply, workspace, DialogLog(None, id))
            return
        if begun.fresh:  # delivered again before its first write: it begins now
            await self._run(parsed, reply, workspace, DialogLog(self.journal, id))
            return
        resumed = resumption(begun.entries, state=parsed.state)
        if await self._settled(begun.dialog, resumed, begun.expired, reply):
            return
        if orphaned and not any(e.kind in (REQUEST_ENTRY, ANSWER_ENTRY) for e in begun.entries):
            await self._abandon(id)
            return
        log.info("taking up dialog %s after step %d", id, resumed.steps)
        if resumed.pending is not None:
            await self._tools_of(resumed, workspace, id)
        await self._run(parsed, reply, workspace, DialogLog(self.journal, id), resumed=resumed,
                        left=begun.remaining)

    async def _run(self, parsed: AgentRequest, reply: Reply, workspace: str,
                   journal: DialogLog, *, resumed: Resumption | None = None,
                   left: float | None = None) -> None:
        """The loop's run of one dialog; a dialog taken up again (``resumed``) keeps the
        deadline its client asked for at first: ``left`` seconds from now."""
        try:
            with deadline.handling(left if resumed is not None else None):
                async with asyncio.timeout(left if resumed is not None else None):
                    await self.loop.run(parsed, reply, tools=lambda: self.toolset_of(workspace),
                                        workspace=workspace, journal=journal, resumed=resumed)
        except TimeoutError:
            await self._timed_out(journal, reply)
        except asyncio.CancelledError:
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:  # the client's deadline, not a stop
                await asyncio.shield(self._timed_out(journal, None))
            raise

    async def _settled(self, dialog: Dialog, resumed: Resumption, expired: bool,
                       reply: Reply) -> bool:
        """Answer a request whose dialog needs no running: it ended (its last message again,
        for a client that may have missed it) or its client stopped waiting."""
        if resumed.end is not None:
            await reply(resumed.end)
            return True
        if expired or dialog.status == ABANDONED:
            log.info("dialog %s is not taken up: its client stopped waiting at %s", dialog.id,
                     dialog.due.isoformat() if dialog.due else "?")
            await reply(self.error_response({
                "type": "timeout", "message": "the dialog was not finished before its "
                "client's deadline"}))
            return True
        return dialog.status != RUNNING

    async def _tools_of(self, resumed: Resumption, workspace: str, id: str) -> None:
        """Wait (a little) until the tools of the calls a dialog taken up makes again are
        here: a replica that has just started may not have heard their services announce
        themselves yet, and the model must not be told they do not exist."""
        assert resumed.pending is not None
        names = {call.name for call in resumed.pending.calls}

        def present(toolset: ToolSet) -> bool:
            return names <= {tool.name for tool in toolset.tools.values()}

        try:
            async with asyncio.timeout(TAKE_UP_GRACE):
                await self.wait_for_tools(present, workspace=workspace)
        except TimeoutError:
            log.warning("dialog %s is taken up without tool(s) %s, still not offered after "
                        "%g s", id, ", ".join(sorted(names)), TAKE_UP_GRACE)

    async def _abandon(self, id: str) -> None:
        """Mark a dialog nobody can read the outcome of abandoned, without running it."""
        log.info("dialog %s is not taken up: its client's connection died with the process "
                 "and no person takes part in it; marked abandoned", id)
        await DialogLog(self.journal, id).end(self.error_response({
            "type": ABANDONED, "message": "the dialog was not taken up after a restart: its "
            "client was gone, and no person waited on it; ask again"}), steps=None)

    async def _timed_out(self, journal: DialogLog, reply: Reply | None) -> None:
        end = self.error_response({"type": "timeout", "message": "the dialog did not finish "
                                   "within its client's deadline"})
        await journal.end(end, steps=None)
        if reply is not None:
            await reply(end)

    async def _take_up_unfinished(self, journal: DialogJournal) -> None:
        """Take up, in tasks of their own, the dialogs a process of this agent left running."""
        try:
            dialogs = await journal.unfinished()
        except JournalError as e:
            log.warning("cannot take up unfinished dialogs: %s", e.message)
            return
        for dialog in dialogs:
            if dialog.request is None:
                continue
            reply: Reply = functools.partial(self.reply_producer.send,
                                             properties={"id": dialog.id})
            task = asyncio.create_task(self._take_up(dialog, reply))
            self._taken_up.add(task)
            task.add_done_callback(self._taken_up.discard)
        if dialogs:
            log.info("taking up %d unfinished dialog(s)", len(dialogs))

    async def _take_up(self, dialog: Dialog, reply: Reply) -> None:
        assert dialog.request is not None
        task = asyncio.current_task()
        assert task is not None
        parking = self._taken_up_parked.enter(task)
        try:
            await self._dialog(dialog.request, reply, dialog.id, taking_up=True,
                               orphaned=self.abandon_unread)
        except Exception:  # a dialog of the past must not stop the agent from starting
            log.exception("dialog %s could not be taken up", dialog.id)
        finally:
            self._taken_up_parked.leave(parking)
