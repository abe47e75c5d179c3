"""The mcp-tool service's notice to its clients: "the tools of these ``mcp`` items changed".

The service holds the MCP sessions, so it is the one that hears a server's
``notifications/tools/list_changed`` (or sees a server refuse arguments that fit the schema a
client was given). It says so on a notify queue — every subscriber gets every notice —
``{"tools-changed": ["<mcp config id>", ...], "workspace": "<the items' workspace>"}`` (a notice
without ``workspace`` is about the default one), and a client that keeps copies of schemas (the
agent) reads those again. A notice is a hint: a client that misses one still reads schemas
again after its TTL.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from toolmesh.bus.base import Bus, Message, Producer, Subscription
from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.errors import MalformedMessage, ToolmeshError

log = logging.getLogger("toolmesh.mcp")

MCP_TOOL_NOTIFY_QUEUE = "notify:tg:mcp-tool:default"

#: ``(workspace, ids)``: the tools of these mcp items of that workspace changed
ToolsChanged = Callable[[str, list[str]], None]
#: ``(workspace, principal, resource, at)``: a login finished (mcp_oauth), at that time
LoginCompleted = Callable[[str, str, str, float], None]


class NoticeSender:
    """Publishes notices without making the caller wait (the caller is the SDK's message
    handler, which must not block the session's read loop on the bus)."""

    def __init__(self, bus: Bus, *, queue: str = MCP_TOOL_NOTIFY_QUEUE) -> None:
        self._bus = bus
        self._queue = queue
        self._producer: Producer | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._producer = await self._bus.producer(self._queue)

    async def stop(self) -> None:
        await asyncio.gather(*self._sending, return_exceptions=True)

    def tools_changed(self, workspace: str, ids: Iterable[str]) -> None:
        if self._producer is None:
            return  # not started: nobody can have copied a schema from us yet
        task = asyncio.create_task(self._send({"tools-changed": sorted(ids),
                                               "workspace": workspace}))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    def login_completed(self, workspace: str, principal: str, resource: str) -> None:
        """Tell the other replicas a login finished here (a call waiting for it there goes
        on): ``{"login-completed": {"workspace", "principal", "resource"}}``."""
        if self._producer is None:
            return
        task = asyncio.create_task(self._send({"login-completed": {
            "workspace": workspace, "principal": principal, "resource": resource,
            "at": time.time()}}))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, notice: dict[str, Any]) -> None:
        assert self._producer is not None
        try:
            await self._producer.send(notice)
        except (ToolmeshError, OSError) as e:  # a lost hint: clients fall back on their TTL
            log.warning("could not send the notice %r: %s", notice, e)


class NoticeWatcher:
    """Subscribes (once, at the first :meth:`watch`) and hands each notice's ids on."""

    def __init__(self, bus: Bus, *, queue: str = MCP_TOOL_NOTIFY_QUEUE) -> None:
        self._bus = bus
        self._queue = queue
        self._callbacks: list[ToolsChanged] = []
        self._login_callbacks: list[LoginCompleted] = []
        self._subscription: Subscription | None = None
        self._subscribing: asyncio.Lock = asyncio.Lock()

    async def watch(self, callback: ToolsChanged) -> None:
        self._callbacks.append(callback)
        await self._subscribe()

    async def watch_logins(self, callback: LoginCompleted) -> None:
        """Call ``callback(workspace, principal, resource)`` for each login finished."""
        self._login_callbacks.append(callback)
        await self._subscribe()

    async def _subscribe(self) -> None:
        async with self._subscribing:
            if self._subscription is None:
                # a name of our own: a notify queue gives each subscription every notice
                name = f"mcp-notices-{uuid.uuid4().hex[:8]}"
                self._subscription = await self._bus.subscribe(
                    self._queue, self._on_notice, subscription=name, concurrency=1)

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None

    async def _on_notice(self, message: Message) -> None:
        try:
            notice = message.json()
        except MalformedMessage as e:
            log.warning("ignored a malformed mcp-tool notice: %s", e.message)
            return
        if isinstance(notice, dict) and "login-completed" in notice:
            self._on_login(notice["login-completed"])
            return
        ids = notice.get("tools-changed") if isinstance(notice, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            log.warning("ignored an mcp-tool notice without a list of ids: %r", notice)
            return
        workspace = notice.get("workspace") or DEFAULT_WORKSPACE
        if not isinstance(workspace, str):
            log.warning("ignored an mcp-tool notice whose workspace is not a string: %r",
                        notice)
            return
        for callback in list(self._callbacks):
            callback(workspace, ids)

    def _on_login(self, done: Any) -> None:
        fields = [done.get(k) for k in ("workspace", "principal", "resource")] \
            if isinstance(done, dict) else []
        if len(fields) != 3 or not all(isinstance(f, str) for f in fields):
            log.warning("ignored a malformed login notice: %r", done)
            return
        at = done.get("at")
        at = float(at) if isinstance(at, int | float) and not isinstance(at, bool) else time.time()
        for callback in list(self._login_callbacks):
            callback(*fields, at)
