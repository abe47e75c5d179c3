"""Sampling for MCP servers: a server's ``sampling/createMessage`` answered by the deployment's
own LLM, through the text-completion service.

Only for servers whose ``mcp`` item says ``"sampling": true`` (off by default: a server that
samples spends the deployment's LLM budget, and its prompts go to that LLM). For the others no
callback is given to the SDK, which then neither advertises the capability nor answers with
anything but its ``Sampling not supported`` error.

The text-completion wire has a system prompt and one prompt, so the conversation becomes a
transcript (``User: …`` / ``Assistant: …``) when it has more than one message; content that is
not text is described (``[image: image/png, 68 bytes]``), not sent. ``maxTokens``,
``temperature`` and model preferences cannot be passed on; stop sequences are applied to the
answer here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from toolmesh.errors import RequestError
from toolmesh.llm.base import Completion
from toolmesh.mcp.config import McpServer
from toolmesh.mcp.results import content_text
from toolmesh.rpc import deadline
from toolmesh.telemetry import tracing

if TYPE_CHECKING:
    import mcp_types
    from mcp.client.session import ClientRequestContext, SamplingFnT

log = logging.getLogger("toolmesh.mcp.sampling")

#: seconds one sampling request may take the LLM
DEFAULT_TIMEOUT = 120.0


class Completer(Protocol):
    """What answers sampling: :class:`toolmesh.llm.service.TextCompletionClient` does."""

    async def complete(self, system: str, prompt: str, *,
                       timeout: float | None = ...) -> Completion: ...


class Sampler:
    """Builds the SDK's ``sampling_callback`` for the servers allowed to sample."""

    def __init__(self, llm: Completer, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.llm = llm
        self.timeout = timeout

    def callback_for(self, server: McpServer) -> SamplingFnT | None:
        """The callback for ``server``'s session, or ``None`` when its item does not allow
        sampling (the SDK's default then refuses it)."""
        if not server.sampling:
            return None

        async def sample(context: ClientRequestContext,
                         params: mcp_types.CreateMessageRequestParams
                         ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
            # The server's request names the trace of the tool call it serves in its _meta
            # (the SDK writes it there, traced or not); the session's task has no span.
            with tracing.span("mcp sampling", kind="server", parent=dict(context.meta or {}),
                              attributes={"mcp.server": server.id}):
                return await self.answer(server, params)

        return sample

    async def answer(self, server: McpServer, params: mcp_types.CreateMessageRequestParams
                     ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        """The LLM's answer to one ``sampling/createMessage``, or the error the server gets."""
        # here, not at the top: the mcp-tool service makes its Sampler at start, without the
        # MCP SDK; a server that samples has a session, so the SDK is loaded by now
        import mcp_types

        choice = params.tool_choice
        if params.tools and choice is not None and getattr(choice, "mode", None) == "required":
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_PARAMS,
                message="this client's sampling cannot make tool calls (tool_choice 'required')")
        system, prompt = render(params)
        try:
            # This runs in the connection's task, which has no deadline of its own (it is not
            # a bus request's): give the LLM call one.
            with deadline.handling(self.timeout):
                done = await self.llm.complete(system, prompt, timeout=self.timeout)
        except RequestError as e:
            log.warning("sampling for MCP server %r failed: %s", server.id, e.message)
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR,
                                       message=f"the LLM could not answer: {e.message}")
        text, stop_reason = cut_at_stop(done.text, params.stop_sequences or ())
        log.info("answered a sampling request of MCP server %r (%d characters)", server.id,
                 len(text))
        return mcp_types.CreateMessageResult(
            role="assistant", content=mcp_types.TextContent(type="text", text=text),
            model=done.model or "toolmesh", stop_reason=stop_reason)


def render(params: mcp_types.CreateMessageRequestParams) -> tuple[str, str]:
    """``(system, prompt)`` for the text-completion service."""
    turns = [(m.role, _content(m.content)) for m in params.messages]
    if len(turns) == 1 and turns[0][0] == "user":
        prompt = turns[0][1]
    else:
        prompt = "\n\n".join(f"{role.capitalize()}: {text}" for role, text in turns)
        prompt += "\n\nAssistant:"
    return params.system_prompt or "", prompt


def _content(content: Any) -> str:
    items = content if isinstance(content, list) else [content]
    return "\n".join(content_text(item) for item in items)


def cut_at_stop(text: str, stops: Any) -> tuple[str, str]:
    """``text`` up to the first stop sequence, and the stop reason to report."""
    cuts = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    if cuts:
        return text[:min(cuts)], "stopSequence"
    return text, "endTurn"
