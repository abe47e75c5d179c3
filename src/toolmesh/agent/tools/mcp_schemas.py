"""The agent's cache of MCP tools' ``inputSchema``\\ s: fresh, and never a reason to stall.

A schema is read from the mcp-tool service (``describe``) and kept for :data:`SCHEMA_TTL`
seconds. It is read again sooner when the service says the server's tool list changed (the
server sent ``notifications/tools/list_changed``, or refused a call's arguments — a sign that
our copy is stale), see :meth:`McpSchemas.invalidate`.

A dialog step waits for a read at most :data:`SCHEMA_BUDGET` seconds. A server that does not
answer within it, or whose read fails, is *unavailable*: its tools are not offered and the
read goes on (or is retried after :data:`RETRY_AFTER` s) in the background, so a dead server
costs one budget once, not ~10 s on every step of every dialog.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.errors import RequestError
from toolmesh.mcp.errors import needs_task_augmentation

log = logging.getLogger("toolmesh.agent.mcp")

#: how long a schema read from the server is used before it is read again
SCHEMA_TTL = 300.0
#: the most a dialog step waits for a schema read
SCHEMA_BUDGET = 1.0
#: the deadline of one read (it runs on in the background past the budget)
DESCRIBE_TIMEOUT = 10.0
#: after a failed read, how long before the next one
RETRY_AFTER = 15.0


@dataclass
class _Entry:
    item: Any  # the mcp config item the schema was read for: a changed item reads anew
    schema: dict[str, Any] | None = None
    #: the tool's MCP annotations (``readOnlyHint``, ``destructiveHint``...)
    annotations: dict[str, Any] | None = None
    expires: float = 0.0  # clock time after which the schema is read again
    unavailable: str | None = None
    retry_at: float = 0.0
    generation: int = 0  # bumped by invalidate(): a read begun before it is already stale
    fetch: asyncio.Task[None] | None = field(default=None, repr=False)


class McpSchemas:
    """``inputSchema``\\ s of MCP tools by workspace and mcp config id, shared by every tool
    and dialog of an agent (and kept across tool rebuilds: a config change does not re-read
    every schema)."""

    def __init__(self, client: Any, *, ttl: float = SCHEMA_TTL, budget: float = SCHEMA_BUDGET,
                 describe_timeout: float = DESCRIBE_TIMEOUT, retry_after: float = RETRY_AFTER,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.ttl = ttl
        self.budget = budget
        self.describe_timeout = describe_timeout
        self.retry_after = retry_after
        self._clock = clock
        self._entries: dict[tuple[str, str], _Entry] = {}  # (workspace, id) -> entry
        self._watching = False

    async def watch(self) -> None:
        """Subscribe to the service's "tools changed" notices (once; a client without them,
        like a test double, leaves the TTL and call failures as the only triggers)."""
        if self._watching or not hasattr(self.client, "watch_tools"):
            return
        self._watching = True
        await self.client.watch_tools(self.invalidate)

    def invalidate(self, workspace: str, ids: Iterable[str]) -> None:
        """The schemas of ``ids`` (mcp items of ``workspace``) may have changed: read them
        again at their next use."""
        for id in ids:
            entry = self._entries.get((workspace, id))
            if entry is not None:
                entry.expires = 0.0
                entry.retry_at = 0.0
                # the notice came from the server, so it answers: the next step may wait for it
                entry.unavailable = None
                entry.generation += 1
                log.info("MCP tool %r of workspace %r: its server's tools changed; reading its "
                         "schema again", id, workspace)

    def unavailable(self, id: str, *, workspace: str = DEFAULT_WORKSPACE) -> str | None:
        entry = self._entries.get((workspace, id))
        return entry.unavailable if entry is not None else None

    def annotations(self, id: str, *, workspace: str = DEFAULT_WORKSPACE
                    ) -> dict[str, Any] | None:
        """The MCP annotations of the tool of mcp item ``id``, when read."""
        entry = self._entries.get((workspace, id))
        return entry.annotations if entry is not None else None

    def prefetch(self, id: str, *, item: Any, workspace: str = DEFAULT_WORKSPACE) -> None:
        """Start reading the schema of ``id`` if it is due, without waiting for it (when a
        tool is built: the first step that offers it then finds it read, or waits the budget)."""
        self._due(workspace, id, item)

    async def get(self, id: str, *, item: Any,
                  workspace: str = DEFAULT_WORKSPACE) -> dict[str, Any] | None:
        """The schema of ``id`` (``None`` while unknown), read again if it is due, waiting at
        most the budget; :meth:`unavailable` then says whether its server answers."""
        entry = self._due(workspace, id, item)
        if entry.fetch is not None and entry.unavailable is None:
            # asyncio.wait does not cancel the read: past the budget it goes on for later steps
            done, _ = await asyncio.wait({entry.fetch}, timeout=self.budget)
            if not done:
                entry.unavailable = (f"its MCP server did not describe it within "
                                     f"{self.budget:g} s; asking again in the background")
                log.warning("MCP tool %r of workspace %r is not offered: %s", id, workspace,
                            entry.unavailable)
        # else: a server already found unresponsive is asked in the background, never waited on
        return entry.schema

    def _due(self, workspace: str, id: str, item: Any) -> _Entry:
        """The entry of ``id``, with a read started if its schema is due (expired, invalidated,
        never read, or its failed read's retry time has come)."""
        entry = self._entries.get((workspace, id))
        if entry is None or entry.item != item:
            entry = self._entries[workspace, id] = _Entry(item=_frozen(item))
        if entry.fetch is None:
            now = self._clock()
            fresh = entry.unavailable is None and entry.schema is not None and now < entry.expires
            waiting = entry.unavailable is not None and now < entry.retry_at
            if not (fresh or waiting):
                # A fresh context: the read outlives the step that started it, and must not
                # inherit that dialog's deadline (toolmesh.rpc.deadline reads it from context).
                entry.fetch = asyncio.create_task(self._read(workspace, id, entry),
                                                  name=f"mcp-schema:{workspace}:{id}",
                                                  context=contextvars.Context())
        return entry

    async def close(self) -> None:
        tasks = [e.fetch for e in self._entries.values() if e.fetch is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def forget(self, workspace: str) -> None:
        """Drop the schemas of ``workspace`` (the agent no longer keeps its tools)."""
        for key in [k for k in self._entries if k[0] == workspace]:
            entry = self._entries.pop(key)
            if entry.fetch is not None:
                entry.fetch.cancel()

    async def _read(self, workspace: str, id: str, entry: _Entry) -> None:
        generation = entry.generation
        try:
            described = await self.client.describe(id, timeout=self.describe_timeout,
                                                   workspace=workspace)
        except RequestError as e:
            if e.type == LOGIN_REQUIRED:
                # a server that signs in each person: the tool is offered with its declared
                # arguments, and the call asks its person to sign in (mcp/signin.py)
                entry.unavailable = None
                entry.expires = self._clock() + self.retry_after
                return
            entry.unavailable = e.message  # no such remote tool, or no server: not offered
            entry.retry_at = self._clock() + self.retry_after
            log.warning("MCP tool %r of workspace %r is not offered: %s (asking again in "
                        "%g s)", id, workspace, e.message,
                        self.retry_after)
            return
        finally:
            entry.fetch = None
        # a notice that came while we read may postdate what we read: read again next time
        entry.expires = 0.0 if generation != entry.generation else self._clock() + self.ttl
        entry.schema = described.get("inputSchema") or {"type": "object"}
        annotations = described.get("annotations")
        entry.annotations = annotations if isinstance(annotations, dict) else None
        execution = described.get("execution")
        if isinstance(execution, dict) and execution.get("taskSupport") == "required":
            # not a failure of the server: it answers, but only with a task; asked again
            # like any schema (after the TTL or a notice), in case the tool changes
            reason = needs_task_augmentation(str(described.get("name") or id))
            if entry.unavailable != reason:
                log.warning("MCP tool %r of workspace %r is not offered: %s", id, workspace,
                            reason)
            entry.unavailable, entry.retry_at = reason, entry.expires
            return
        if entry.unavailable is not None:
            log.info("MCP tool %r of workspace %r answers again; it is offered", id,
                     workspace)
        entry.unavailable = None


#: the mcp-tool service's error when a server wants a sign-in the caller has not given
LOGIN_REQUIRED = "login-required"


def _frozen(item: Any) -> Any:
    """A copy of a config item to compare later ones with (the caller's dict may change)."""
    if isinstance(item, Mapping):
        return {k: _frozen(v) for k, v in item.items()}
    if isinstance(item, list):
        return [_frozen(v) for v in item]
    return item
