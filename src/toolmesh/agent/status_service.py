"""The agent's ``agent-tools`` service: which tools it offers, and why it offers no others.

Request ``{"workspace"?: str, "version"?: int}`` on ``request:tg:agent-tools:{flow}`` → one response
``{"workspace", "version", "tools": [{"key", "name", "type", "status", "reason"?}],
"tool_calling": {"tool_calling", "source", "detail", "llm"?}}``, the tool items of that
workspace (default: the agent's) by key; ``status`` is ``available`` or ``not-offered`` (then
``reason`` says why); ``tool_calling``: how the workspace's dialogs ask the LLM for tool calls
(:meth:`toolmesh.agent.loop.AgentLoop.tool_calling`; ``null`` if it could not be learnt within
the refresh budget).
The gateway serves it as ``POST /api/v1/flow/{flow}/service/agent-tools``; `toolmesh tools`
and ``tg-show-tools`` print it.

``version``: the config version the caller last saw (a put's answer, a read's): an agent whose
tools come from an older one loads the config first, so a status read right after a put shows
that put (the push that would tell the agent may still be on its way).

The answer is the agent's own view, so it is the truth about what the LLM is shown: it comes
from the tool set the agent built from the config, after asking each tool whether it can work
now (an MCP tool asks its server whether it still has the remote tool). That refresh gets at
most :data:`REFRESH_BUDGET` seconds; a tool slower than that keeps its last known status (a
server that does not answer must not make the status slow too) and finishes in the background.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from toolmesh.agent.toolset import ToolSet
from toolmesh.bus.base import Bus
from toolmesh.config.workspaces import request_workspace
from toolmesh.errors import RequestError
from toolmesh.rpc.service import Reply, Service

log = logging.getLogger("toolmesh.agent")

AGENT_TOOLS_REQUEST_QUEUE = "request:tg:agent-tools:default"
AGENT_TOOLS_RESPONSE_QUEUE = "response:tg:agent-tools:default"
#: seconds a status request waits for the tools to find out whether they can work
REFRESH_BUDGET = 3.0


class AgentToolsService(Service):
    """Answers ``agent-tools`` requests from the tool set ``toolset(workspace)`` returns
    (``load(workspace)`` first: a workspace no dialog has named yet is loaded for it)."""

    error_type = "agent-error"

    def __init__(self, bus: Bus, *, toolset: Callable[[str], ToolSet],
                 load: Callable[[str], Awaitable[None]],
                 reload: Callable[[str], Awaitable[None]], workspace: str,
                 request_queue: str = AGENT_TOOLS_REQUEST_QUEUE,
                 response_queue: str = AGENT_TOOLS_RESPONSE_QUEUE, id: str = "agent",
                 refresh_budget: float = REFRESH_BUDGET,
                 tool_calling: Callable[[ToolSet], Awaitable[dict[str, Any]]] | None = None
                 ) -> None:
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=f"{id}-tools-request", concurrency=16)
        self._toolset = toolset
        self._load = load
        self._reload = reload
        self.workspace = workspace
        self.refresh_budget = refresh_budget
        self._tool_calling = tool_calling
        self._background: set[asyncio.Task[None]] = set()

    async def stop(self) -> None:
        await super().stop()
        for task in list(self._background):
            task.cancel()

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        workspace = request_workspace(request, default=self.workspace)
        await read_your_writes(request, workspace, toolset=self._toolset, load=self._load,
                               reload=self._reload)
        toolset = self._toolset(workspace)
        calling = asyncio.ensure_future(self._calling(toolset))
        await self._refresh(toolset)
        await reply({"workspace": workspace, "version": toolset.version,
                     "tools": [status.to_wire() for status in toolset.statuses()],
                     "tool_calling": await calling})

    async def _calling(self, toolset: ToolSet) -> dict[str, Any] | None:
        """How the workspace's dialogs call tools; ``None`` when not learnt in time (the
        first detection probes the LLM, which a slow one may take long over)."""
        if self._tool_calling is None:
            return None
        try:
            async with asyncio.timeout(self.refresh_budget * 3):
                return await self._tool_calling(toolset)
        except (TimeoutError, RequestError) as e:
            log.info("how the agent calls tools is not known yet: %r", e)
            return None

    async def _refresh(self, toolset: ToolSet) -> None:
        tasks = [asyncio.ensure_future(tool.prepare()) for tool in toolset.tools.values()]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=self.refresh_budget)
        for task in tasks:
            task.add_done_callback(_log_failure)
        for task in pending:
            self._background.add(task)
            task.add_done_callback(self._background.discard)


async def read_your_writes(request: dict[str, Any], workspace: str, *,
                           toolset: Callable[[str], ToolSet],
                           load: Callable[[str], Awaitable[None]],
                           reload: Callable[[str], Awaitable[None]] | None) -> None:
    """Load ``workspace`` for a status request, and reload it when the request's
    ``version`` (the config version its caller last saw) is newer than the tool set's: the
    push that would tell the agent may still be on its way."""
    await load(workspace)
    seen = request.get("version")
    if (reload is not None and isinstance(seen, int) and not isinstance(seen, bool)
            and seen > toolset(workspace).version):
        try:
            await reload(workspace)
        except RequestError as e:  # answer from what the agent has; "version" says which
            log.warning("could not load config version %d of workspace %r for a status "
                        "request: %s", seen, workspace, e.message)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("a tool failed to prepare for a status request: %r", task.exception())
