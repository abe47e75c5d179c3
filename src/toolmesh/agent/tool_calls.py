"""The agent's ``tool-calls`` service: a workspace's tools for callers that are not its
dialogs — the gateway's MCP endpoint (:mod:`toolmesh.mcp_endpoint.endpoint`).

Requests on ``request:tg:tool-calls:{flow}``:

* ``{"operation": "list", "workspace"?, "version"?}`` → ``{"workspace", "version", "tools":
  [{"name", "description", "inputSchema", "annotations"?}, ...]}``: the tools the agent offers there
  (:mod:`toolmesh.agent.catalog`);
* ``{"operation": "call", "workspace"?, "name", "arguments", "user"?, "progress"?: true,
  "ask"?: true, "approved"?: DIGEST, "key"?}`` → with ``progress``, ``{"progress": {"progress",
  "total", "message"}, "end_of_stream": false}`` for each report of the tool (an MCP server's
  progress; each piece of a streaming tool service's answer, as ``message``), then ``{"text",
  "is_error"}``: what the tool answered (whole), or why it failed.

A call goes the way a dialog's calls go (:class:`~toolmesh.agent.calls.ToolRunner`): the
arguments are checked against the tool's schema, the agent's tool timeouts apply, and so do
its metrics and traces; it carries an idempotency key (``key``, else one of its own). A tool
whose approval policy asks a person (docs/approvals.md) runs only when the request carries
``approved``: the digest of this very call (:func:`~toolmesh.approvals.digest.call_digest`),
which the caller got from a person. A caller
that can ask one (``ask``: the MCP endpoint, for a client that takes elicitations and a token
that may ``approve``) is answered ``{"approval": {"tool", "arguments", "digest"}}`` instead of
a result, and calls again with the digest once the person said yes; any other caller is told
why the call did not run. A call run so is logged with its approver (``actor``, and
``actor-name`` when the caller gives it) and counted with face ``mcp``
(:mod:`toolmesh.approvals.audit`): no dialog records it.
"""

from __future__ import annotations

import asyncio
import uuid
from functools import partial
from collections.abc import Awaitable, Callable
from typing import Any

from toolmesh.agent.calls import ToolRunner
from toolmesh.agent.status_service import read_your_writes
from toolmesh.agent.tally import DialogTally
from toolmesh.agent.tools import Tool
from toolmesh.agent.toolset import ToolSet
from toolmesh.approvals import Policy
from toolmesh.approvals.audit import NAME_FIELD, approved_through_mcp
from toolmesh.approvals.digest import call_digest
from toolmesh.approvals.gate import ApprovalGate
from toolmesh.approvals.wire import seconds_left
from toolmesh.bus.base import Bus
from toolmesh.config.workspaces import request_workspace
from toolmesh.errors import ServiceError
from toolmesh.agent.catalog import GROUPS, catalog
from toolmesh.rpc.service import Reply, Service, current_request_id
from toolmesh.schema.agent import DEFAULT_USER

TOOL_CALLS_REQUEST_QUEUE = "request:tg:tool-calls:default"
TOOL_CALLS_RESPONSE_QUEUE = "response:tg:tool-calls:default"
ERROR = "Error: "


class ToolCallsService(Service):
    """Lists and calls the tools of ``toolset(workspace)`` (loaded first by ``load``)."""

    error_type = "tool-error"

    def __init__(self, bus: Bus, *, toolset: Callable[[str], ToolSet],
                 load: Callable[[str], Awaitable[None]],
                 reload: Callable[[str], Awaitable[None]] | None = None, runner: ToolRunner,
                 approval: Policy, workspace: str, id: str = "agent",
                 gate: ApprovalGate | None = None,
                 request_queue: str = TOOL_CALLS_REQUEST_QUEUE,
                 response_queue: str = TOOL_CALLS_RESPONSE_QUEUE) -> None:
        super().__init__(bus, request_queue=request_queue, response_queue=response_queue,
                         subscription=f"{id}-tool-calls-request", concurrency=64)
        self._toolset = toolset
        self._load = load
        self._reload = reload
        self.runner = runner
        self.approval = approval
        self.workspace = workspace
        #: where the answers to servers' questions arrive (the agent's; None: none asked)
        self.gate = gate

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        workspace = request_workspace(request, default=self.workspace)
        # a list after a config change the caller heard of shows that change
        await read_your_writes(request, workspace, toolset=self._toolset, load=self._load,
                               reload=self._reload)
        toolset = self._toolset(workspace)
        offered = await _offered(toolset)
        operation = request.get("operation") or "list"
        if operation == "list":
            await reply({"workspace": workspace, "version": toolset.version,
                         "tools": catalog(offered.values())})
        elif operation == "call":
            await self._call(request, offered, reply)
        else:
            raise ServiceError(f"unknown operation {operation!r}; operations: list, call",
                               type="bad-request")

    async def _call(self, request: dict[str, Any], offered: dict[str, Tool],
                    reply: Reply) -> None:
        name, arguments = request.get("name"), request.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise ServiceError("'name' must name a tool", type="bad-request")
        user = request.get("user") if isinstance(request.get("user"), str) else DEFAULT_USER
        streaming = request.get("progress") is True

        async def emit(message: dict[str, Any]) -> None:
            if streaming and message.get("message_type") == "progress":
                await reply({"progress": message.get("progress"), "end_of_stream": False})

        approved = request.get("approved")
        asking: dict[str, Any] = {}
        actor = request.get("actor")  # set by the gateway's /mcp, never by a client

        async def permit(tool: Tool, arguments: Any) -> str | None:
            if not tool.needs_approval(self.approval):
                return None
            digest = call_digest(tool.name, arguments)
            if approved == digest:
                # no dialog records it: the log line and the metrics are its audit
                name = request.get(NAME_FIELD)
                approved_through_mcp(tool=tool.name, digest=digest,
                                     actor=actor if isinstance(actor, str) else None,
                                     name=name if isinstance(name, str) else None)
                return None
            if request.get("ask") is True:
                asking.update(tool=tool.name, arguments=arguments, digest=digest)
                return f"{ERROR}{tool.name!r} waits for a person's approval"
            return (f"{ERROR}{tool.name!r} waits for a person's approval before each call "
                    "(its approval policy), and no one could be asked: call it from an MCP "
                    "client that takes questions (elicitation) with a token that may approve, "
                    "or from a dialog")

        pieces = 0

        async def part(text: str) -> None:  # a streaming tool service's piece
            nonlocal pieces
            pieces += 1
            await reply({"progress": {"progress": pieces, "total": None, "message": text},
                         "end_of_stream": False})

        # an idempotency key of its own (the caller's, if it gave one; else this request's
        # id, the same on each delivery): a tool service that gets this call twice can tell
        key = request.get("key")
        if not isinstance(key, str) or not key:
            key = f"tool-calls/{current_request_id() or uuid.uuid4().hex}"
        questions = request.get("questions") is True and self.gate is not None

        async def ask(tool: str, question: dict[str, Any]) -> None:
            # a server's question (a sign-in link) for the caller's person: held here, so
            # the approvals service takes its answer, and sent to the caller
            assert self.gate is not None
            shown = {**question, "tool": tool, "journaled": False,
                     "workspace": request_workspace(request, default=self.workspace)}
            future = self.gate.expect(shown)
            forget = partial(self.gate.forget, str(shown["dialog"]), str(shown["call"]))
            future.add_done_callback(lambda _: forget())
            asyncio.get_running_loop().call_later(max(seconds_left(shown), 0.0), forget)
            await reply({"elicitation": shown, "end_of_stream": False})
            await self.gate.announce_asked(shown)  # for those who watch what waits

        outcome = await self.runner.run(name, arguments, offered, user=user, emit=emit,
                                        tally=DialogTally(), key=key, permit=permit,
                                        ask=ask if questions else None,
                                        actor=actor if isinstance(actor, str) else None,
                                        parts=part if streaming else None)
        if asking:
            await reply({"approval": asking, "end_of_stream": True})
            return
        text = outcome.observation
        if not outcome.ok and text.startswith(ERROR):
            text = text[len(ERROR):]
        answer: dict[str, Any] = {"text": text, "is_error": not outcome.ok,
                                  "end_of_stream": True}
        if not outcome.ok and outcome.kind:
            answer["type"] = outcome.kind  # a caller may act on it (a sign-in: sign_in.py)
        await reply(answer)


async def _offered(toolset: ToolSet) -> dict[str, Tool]:
    tools = toolset.offered(groups=GROUPS, state=None)
    await asyncio.gather(*(t.prepare() for t in tools))
    return {t.name: t for t in tools if t.unavailable is None}
