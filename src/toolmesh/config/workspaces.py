"""Config per workspace, for services that serve every workspace (agent, mcp-tool, prompt).

A request names its workspace (the gateway fills in the caller's); the service answers it from
that workspace's items only. :class:`WorkspaceWatcher` loads a workspace's snapshot of the
watched types the first time a request names it — a workspace exists from its first put, and
one with no items is simply empty — and reloads it whenever a config push names it for one of
those types. Nothing is shared between workspaces but the process.

At most :data:`MAX_WORKSPACES` are kept; the least recently used beyond that is forgotten (and
loaded again when a request names it), so requests naming made-up workspaces cannot grow a
service without bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import MappingProxyType, TracebackType
from typing import Any

from toolmesh.bus.base import Bus, Message, Subscription
from toolmesh.config.client import ConfigClient, ConfigSnapshot
from toolmesh.config.service import CONFIG_PUSH_QUEUE, DEFAULT_WORKSPACE
from toolmesh.errors import MalformedMessage, RequestError, ServiceError
from toolmesh.telemetry import metrics

log = logging.getLogger("toolmesh.config.workspaces")

#: workspaces a service keeps loaded at once
MAX_WORKSPACES = 1024

OnChange = Callable[[ConfigSnapshot], Awaitable[None]]
OnForget = Callable[[str], Awaitable[None]]


def request_workspace(request: dict[str, Any], *, default: str = DEFAULT_WORKSPACE) -> str:
    """The workspace a request names (``default`` when it names none)."""
    workspace = request.get("workspace")
    if workspace is None or workspace == "":
        return default
    if not isinstance(workspace, str):
        raise ServiceError(f"'workspace' must be a string, not {type(workspace).__name__}",
                           type="bad-request")
    return workspace


class WorkspaceWatcher:
    """Delivers a :class:`ConfigSnapshot` of ``types`` for each workspace in use to
    ``on_change``: at its first use (:meth:`ensure`) and after every change to it, in version
    order per workspace. ``on_forget(workspace)`` is called when one is dropped (LRU).

    ``preload``: workspaces loaded at :meth:`start` (the default one, so a service's log shows
    its tools at start as before).
    """

    def __init__(self, bus: Bus, *, types: Sequence[str], on_change: OnChange,
                 on_forget: OnForget | None = None, preload: Iterable[str] = (DEFAULT_WORKSPACE,),
                 max_workspaces: int = MAX_WORKSPACES, timeout: float = 30.0,
                 push_queue: str = CONFIG_PUSH_QUEUE, **queues: str) -> None:
        self.types = tuple(types)
        self.max_workspaces = max_workspaces
        self._bus = bus
        self._on_change = on_change
        self._on_forget = on_forget
        self._preload = tuple(preload)
        self._push_queue = push_queue
        self._client = ConfigClient(bus, timeout=timeout, **queues)
        self._subscription: Subscription | None = None
        #: workspace -> the version last delivered for it (most recently used last)
        self._versions: OrderedDict[str, int] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        #: the newest version any push announced: a workspace loaded later is at least this
        self.pushed = -1

    async def start(self) -> None:
        await self._client.start()
        self._subscription = await self._bus.subscribe(
            self._push_queue, self._on_push, subscription="config-watcher", concurrency=1)
        for workspace in self._preload:
            try:
                await self.ensure(workspace)
            except RequestError as e:
                log.warning("config not loaded yet (%s); waiting for the config service",
                            e.message)

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None
        await self._client.stop()

    async def __aenter__(self) -> WorkspaceWatcher:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    def version(self, workspace: str) -> int:
        """The version last delivered for ``workspace`` (-1: not loaded)."""
        return self._versions.get(workspace, -1)

    async def ensure(self, workspace: str) -> None:
        """Make sure ``workspace`` has been delivered (load it at its first use)."""
        if workspace in self._versions:
            self._versions.move_to_end(workspace)
            return
        await self.reload(workspace)

    async def reload(self, workspace: str) -> None:
        """Fetch ``workspace``'s watched types and deliver them if newer than its last
        delivery (:class:`RequestError` when the config service does not answer)."""
        lock = self._locks.setdefault(workspace, asyncio.Lock())
        try:
            await self._deliver(workspace, lock)
        finally:
            # a workspace that never loaded (a name the store refuses, the config service
            # down) keeps no lock: made-up names must not grow the table
            if workspace not in self._versions and not lock.locked():
                self._locks.pop(workspace, None)
        await self._trim()

    async def _deliver(self, workspace: str, lock: asyncio.Lock) -> None:
        async with lock:
            version, config = await self._client.config(workspace=workspace)
            if version <= self._versions.get(workspace, -1):
                return
            items = {t: MappingProxyType(dict(config.get(t, {}))) for t in self.types}
            snapshot = ConfigSnapshot(version, workspace, MappingProxyType(items))
            try:
                await self._on_change(snapshot)
            except Exception:
                log.exception("applying config version %d of workspace %r failed", version,
                              workspace)
            self._versions[workspace] = version
            metrics.saw_config_version(version)
            self._versions.move_to_end(workspace)

    async def _trim(self) -> None:
        while len(self._versions) > self.max_workspaces:
            workspace, _ = self._versions.popitem(last=False)
            lock = self._locks.get(workspace)
            if lock is not None and not lock.locked():
                del self._locks[workspace]
            log.info("workspace %r not used lately: its config is dropped until its next "
                     "request", workspace)
            if self._on_forget is not None:
                await self._on_forget(workspace)

    def _named(self, push: Any) -> list[str] | None:
        """The loaded workspaces a push changes for our types (``None``: all of them)."""
        if not isinstance(push, dict) or not isinstance(push.get("version"), int):
            raise MalformedMessage(f"config push is not {{version, changes}}: {push!r}")
        self.pushed = max(self.pushed, push["version"])
        metrics.saw_config_version(self.pushed)
        changes = push.get("changes")
        if not isinstance(changes, dict):
            return None  # a push without a change list: reload everything to be safe
        named: set[str] = set()
        for type in self.types:
            workspaces = changes.get(type) or []
            if isinstance(workspaces, list):
                named.update(w for w in workspaces if isinstance(w, str))
        return [w for w in self._versions if w in named]

    async def _on_push(self, message: Message) -> None:
        try:
            push = message.json()
            named = self._named(push)
        except MalformedMessage as e:
            log.warning("config push not applied: %s", e.message)
            return
        # never loaded anything (the config service was down at start): load what we preload
        targets = list(self._versions) if named is None else named
        if not self._versions:
            targets = list(self._preload)
        for workspace in targets:
            if push["version"] <= self._versions.get(workspace, -1):
                continue
            try:
                await self.reload(workspace)
            except RequestError as e:
                log.warning("config push for workspace %r not applied: %s", workspace,
                            e.message)
