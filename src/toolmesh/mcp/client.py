"""The client of the mcp-tool service (:mod:`toolmesh.mcp.service` describes the wire).

Apart from the service, which it needs none of: the agent calls MCP tools through it and
starts without the service's modules (and never loads the MCP SDK for it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolmesh.bus.base import Bus
from toolmesh.config.admin import ACTOR_FIELD
from toolmesh.errors import RequestError
from toolmesh.mcp.meta import IDEMPOTENCY_KEY
from toolmesh.mcp.notices import MCP_TOOL_NOTIFY_QUEUE, NoticeWatcher, ToolsChanged
from toolmesh.mcp.progress import ProgressSink, QuestionSink, stream_call
from toolmesh.mcp.results import McpResult, result_text
from toolmesh.rpc.client import RequestClient, RpcClient

MCP_TOOL_REQUEST_QUEUE = "request:tg:mcp-tool:default"
MCP_TOOL_RESPONSE_QUEUE = "response:tg:mcp-tool:default"
#: how much longer a client waits than the deadline it gives the service, so the service's
#: "timed out" answer (sent after it cancelled the MCP call) arrives before the client gives up
CLIENT_MARGIN = 2.0


class McpToolClient(RpcClient):
    """Calls the mcp-tool service; one client serves any number of concurrent calls.

    Errors raise :class:`toolmesh.RequestError`: ``type`` "tool-error" when the MCP tool
    reported a failure, "invalid-arguments" when the server refused the arguments, "mcp-error"
    when the server could not be reached or timed out.
    """

    def __init__(self, bus: Bus, *, request_queue: str = MCP_TOOL_REQUEST_QUEUE,
                 response_queue: str = MCP_TOOL_RESPONSE_QUEUE,
                 notify_queue: str = MCP_TOOL_NOTIFY_QUEUE) -> None:
        self._rpc = RequestClient(bus, request_queue=request_queue, response_queue=response_queue)
        self._notices = NoticeWatcher(bus, queue=notify_queue)

    async def stop(self) -> None:
        await self._notices.stop()
        await super().stop()

    async def watch_tools(self, callback: ToolsChanged) -> None:
        """Call ``callback(ids)`` whenever the service says the tools of these mcp items
        changed (subscribes at the first call)."""
        await self._notices.watch(callback)

    async def invoke(self, name: str, parameters: Mapping[str, Any], *,
                     timeout: float = 60.0, max_timeout: float | None = None,
                     on_progress: ProgressSink | None = None,
                     on_question: QuestionSink | None = None,
                     workspace: str | None = None, key: str | None = None,
                     actor: str | None = None) -> str:
        """The tool's text, or the JSON text of its structured result; ``name`` is an mcp
        item of ``workspace`` (default: the service's); ``key``: the call's idempotency key,
        passed to the server in the call's ``_meta`` (docs/dialogs.md).

        With ``on_progress``, the server's progress reports go there as they come, and each
        pushes ``timeout`` back, up to ``max_timeout`` (default: ``timeout``); with
        ``on_question`` too, the server's questions for the person go there (the call then
        waits for their answer, which comes another way: :mod:`toolmesh.mcp.elicitation`)."""
        body: dict[str, Any] = {"name": name, "parameters": dict(parameters), "timeout": timeout}
        if workspace is not None:
            body["workspace"] = workspace
        if key is not None:
            body[IDEMPOTENCY_KEY] = key
        if actor is not None:  # whose sign-in the call uses (a dialog's person)
            body[ACTOR_FIELD] = actor
        if on_progress is not None:
            answer = await stream_call(self._rpc, body, timeout=timeout,
                                       max_timeout=max(max_timeout or timeout, timeout),
                                       margin=CLIENT_MARGIN, on_progress=on_progress,
                                       on_question=on_question)
        else:
            answer = await self._rpc.request(body, timeout=timeout + CLIENT_MARGIN)
        text, obj = answer.get("text"), answer.get("object")
        return result_text(McpResult(text if isinstance(text, str) else None,
                                     _decode(obj), False))

    async def describe(self, name: str, *, timeout: float = 30.0,
                       workspace: str | None = None) -> dict[str, Any]:
        """``{"name", "description", "inputSchema"}`` of the MCP tool ``name`` (an mcp item
        of ``workspace``, default: the service's)."""
        described = await self._operation("describe", name, timeout=timeout,
                                          workspace=workspace)
        if not isinstance(described, dict):
            raise RequestError(f"the mcp-tool service described {name!r} as {described!r}",
                               type="mcp-error")
        return described

    async def list_tools(self, name: str, *, timeout: float = 30.0,
                         workspace: str | None = None) -> list[dict[str, Any]]:
        """Every tool the server of mcp item ``name`` lists (``[{"name", "description",
        "inputSchema"}, ...]``, asked afresh), whichever of them the item names."""
        tools = await self._operation("list-tools", name, timeout=timeout, workspace=workspace)
        if not isinstance(tools, list):
            raise RequestError(f"the mcp-tool service listed the tools of {name!r} as "
                               f"{tools!r}", type="mcp-error")
        return tools

    async def _operation(self, operation: str, name: str, *, timeout: float,
                         workspace: str | None) -> Any:
        """The decoded ``object`` of the service's answer to ``operation`` on item ``name``."""
        body: dict[str, Any] = {"name": name, "operation": operation, "timeout": timeout}
        if workspace is not None:
            body["workspace"] = workspace
        answer = await self._rpc.request(body, timeout=timeout + CLIENT_MARGIN)
        return _decode(answer.get("object"))


def _decode(obj: Any) -> Any:
    """``object`` of a response: JSON text (TrustGraph's form), or already a value."""
    if isinstance(obj, str):
        try:
            return json.loads(obj)
        except json.JSONDecodeError:
            return obj
    return obj
