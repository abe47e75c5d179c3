"""The ReAct loop: think, act, observe, until a final answer.

Errors are kept apart as DESIGN.md says: the model's faults (unknown tool, bad arguments,
unparsable reply) and a tool's faults (error response, timeout) become observations the LLM
sees, and the loop goes on; the system's faults (LLM unreachable, too many iterations) end
the dialog with an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from toolmesh.agent.action import tool_call_message
from toolmesh.agent.observation import DEFAULT_MAX_OBSERVATION, cut
from toolmesh.agent.parser import Action, FinalAnswer, ParseFailure, Reply, parse_reply
from toolmesh.agent.progress import ProgressRelay
from toolmesh.agent.streaming import StreamingParser
from toolmesh.agent.tally import DialogTally
from toolmesh.agent.tools import Call, Tool, ToolError
from toolmesh.agent.toolset import ToolSet
from toolmesh.errors import RequestError, RequestTimeout
from toolmesh.llm.coalesce import Coalescer, Coalescing
from toolmesh.llm.usage import metering
from toolmesh.schema.agent import AgentRequest, Step, message, new_message_id
from toolmesh.telemetry import metrics, tracing

log = logging.getLogger("toolmesh.agent")

Emit = Callable[[dict[str, Any]], Awaitable[None]]

#: seconds a streaming dialog may keep the event loop before it lets the others run
STREAM_SLICE = 0.005

PROTOCOL_HINT = ("Reply with 'Thought:' and then either 'Action:' with the tool name and "
                 "'Args:' with a JSON object, or 'Final Answer:'.")


class Prompts(Protocol):
    """Renders a named template and completes it with the LLM (the prompt service's client)."""

    async def render_and_complete(self, id: str, variables: Mapping[str, Any], *,
                                  timeout: float, workspace: str | None = None) -> str: ...

    def stream(self, id: str, variables: Mapping[str, Any], *, timeout: float,
               workspace: str | None = None) -> AsyncIterator[str]: ...


@dataclass(frozen=True, kw_only=True)
class AgentOptions:
    max_iterations: int = 10
    tool_timeout: float = 120.0
    #: the most a tool call may take while the tool keeps reporting progress (each report
    #: grants ``tool_timeout`` more); tools that report none get ``tool_timeout``
    tool_max_timeout: float = 600.0
    llm_timeout: float = 600.0
    template: str = "agent-react"
    #: the most bytes (UTF-8) of a tool's result the LLM sees; more is cut, with a note
    max_observation: int = DEFAULT_MAX_OBSERVATION
    #: how a streamed thought's and answer's pieces are gathered into messages
    #: (:data:`toolmesh.llm.coalesce.OFF`: a message per piece the parser sets free)
    coalescing: Coalescing = Coalescing()


class ReactLoop:
    """Runs dialogs; each :meth:`run` has its own history, so many run at once."""

    def __init__(self, *, prompts: Prompts, tools: Callable[[], ToolSet],
                 options: AgentOptions = AgentOptions()) -> None:
        self.prompts = prompts
        self.tools = tools
        self.options = options

    async def run(self, request: AgentRequest, emit: Emit, *,
                  tools: Callable[[], ToolSet] | None = None,
                  workspace: str | None = None) -> None:
        """Run one dialog; ``tools``: where its tool set comes from (default: the loop's),
        e.g. the request's workspace's; ``workspace``: whose prompt templates it uses
        (default: the prompt service's).

        The dialog's last message carries the tokens of every LLM answer in it, summed
        (``in_token``, ``out_token``; ``None`` where none was reported), and the last
        ``model``, as TrustGraph's agent does (:mod:`toolmesh.llm.usage`); and the tool calls
        it made, ``tool_calls`` and ``tool_time`` (:mod:`toolmesh.agent.tally`).
        """
        started = time.perf_counter()
        tally = DialogTally()
        last: dict[str, Any] | None = None
        outcome = "cancelled"
        metrics.dialog_started()
        with tracing.span("agent dialog", attributes={
                "toolmesh.workspace": workspace or "", "toolmesh.streaming": request.streaming,
                }) as span, metering() as usage:
            async def emit_with_usage(out: dict[str, Any]) -> None:
                nonlocal last
                if out.get("end_of_dialog"):
                    last = out
                    out = {**out, **usage.wire(), **tally.wire()}
                await emit(out)

            try:
                await self._dialog(request, emit_with_usage, tools or self.tools, workspace,
                                   tally)
                outcome = _outcome(last)
            except Exception:
                outcome = "agent-error"
                raise
            finally:
                if outcome != "answer":
                    tracing.failed(span, outcome)
                metrics.dialog_finished(outcome=outcome, steps=tally.steps,
                                        seconds=time.perf_counter() - started)

    async def _dialog(self, request: AgentRequest, emit: Emit,
                      toolset: Callable[[], ToolSet], workspace: str | None,
                      tally: DialogTally) -> None:
        history = list(request.history)
        state = request.state
        for number in range(1, self.options.max_iterations + 1):
            tally.steps = number
            with tracing.span(f"agent step {number}"):
                step, state = await self._step(request, emit, toolset, workspace, history,
                                               state, tally)
            if step is None:
                return
            history.append(step)
        limit = self.options.max_iterations
        await emit(message("error", f"no final answer after {limit} steps", end_of_dialog=True,
                           message_id=new_message_id(),
                           error={"type": "max-iterations",
                                  "message": f"the agent reached its limit of {limit} steps "
                                             "without a final answer"}))

    async def _step(self, request: AgentRequest, emit: Emit, toolset: Callable[[], ToolSet],
                    workspace: str | None, history: list[Step], state: str | None,
                    tally: DialogTally) -> tuple[Step | None, str | None]:
        """One step: ask the LLM, act on its reply. The step for the history and the state
        after it; no step when the dialog ended (an answer, or the LLM unreachable)."""
        # The tool set is read at every step: config changes apply from the next step on.
        offered = {t.name: t for t in toolset().offered(groups=request.groups, state=state)}
        await asyncio.gather(*(t.prepare() for t in offered.values()))
        # a tool that found it cannot work (its MCP server lacks it, say) is left out
        offered = {n: t for n, t in offered.items() if t.unavailable is None}
        variables = {"question": request.question, "context": "",
                     "tools": [t.describe() for t in offered.values()],
                     "history": [s.to_wire() for s in history]}
        try:
            reply = await self._think(variables, request.streaming, emit, workspace)
        except RequestError as e:
            await emit(message("error", f"the LLM could not be reached: {e.message}",
                               message_id=new_message_id(), end_of_dialog=True,
                               error={"type": e.type, "message": e.message}))
            return None, state
        if isinstance(reply, FinalAnswer):
            return None, state
        if isinstance(reply, ParseFailure):
            step = Step(thought=reply.thought,
                        observation=f"Error: your reply could not be parsed: {reply.problem}. "
                                    + PROTOCOL_HINT)
        else:
            # before the call: its progress and its observation follow it
            await emit(tool_call_message(reply.name, reply.arguments))
            observation, ok = await self._act(reply, offered, request.user, emit, tally)
            # it goes into every later prompt of the dialog: a huge result must not
            observation = cut(observation, limit=self.options.max_observation)
            step = Step(thought=reply.thought, action=reply.name, arguments=reply.arguments,
                        observation=observation)
            tool = offered.get(reply.name)
            if ok and tool is not None and tool.info.state:
                state = tool.info.state
        await emit(message("observation", step.observation, message_id=new_message_id()))
        return step, state

    async def _think(self, variables: dict[str, Any], streaming: bool, emit: Emit,
                     workspace: str | None = None) -> Reply:
        """Ask the LLM for the next step; emit its thought (and answer, if it is final)."""
        thought_id, answer_id = new_message_id(), new_message_id()
        if not streaming:
            reply = parse_reply(await self.prompts.render_and_complete(
                self.options.template, variables, timeout=self.options.llm_timeout,
                workspace=workspace))
            if reply.thought:
                await emit(message("thought", reply.thought, message_id=thought_id))
            if isinstance(reply, FinalAnswer):
                await emit(message("answer", reply.answer, message_id=answer_id,
                                   end_of_dialog=True, answer=reply.answer))
            return reply
        parser = StreamingParser()
        # The thought and the answer go out as the LLM writes them, the pieces that come close
        # together in one message (toolmesh.llm.coalesce): a message per word would cost a
        # publish and a delivery per word.
        coalescing = self.options.coalescing
        thoughts = Coalescer(lambda text: emit(message("thought", text, message_id=thought_id,
                                                       end_of_message=False)), coalescing)
        answers = Coalescer(lambda text: emit(message("answer", text, message_id=answer_id,
                                                      end_of_message=False)), coalescing)
        thought_open = answer_started = False

        async def end_thought(text: str) -> None:
            """The thought's last message: what is held of it, then ``text``."""
            nonlocal thought_open
            text = await thoughts.take() + text
            if text or thought_open:
                await emit(message("thought", text, message_id=thought_id, end_of_message=True))
            thought_open = False

        # Chunks already waiting are handed over without the event loop ever running anything
        # else, so a long answer would hold up every other dialog until it ends: give way once
        # per time slice.
        loop = asyncio.get_running_loop()
        give_way_at = loop.time() + STREAM_SLICE
        try:
            try:
                async for chunk in self.prompts.stream(self.options.template, variables,
                                                       timeout=self.options.llm_timeout,
                                                       workspace=workspace):
                    if loop.time() >= give_way_at:
                        await asyncio.sleep(0)
                        give_way_at = loop.time() + STREAM_SLICE
                    thought, answer = parser.feed(chunk)
                    if thought:
                        if answer_started:
                            await answers.flush()  # what is out stays in order
                        thought_open = True
                        await thoughts.add(thought)
                    if answer:
                        if thought_open:
                            await end_thought("")  # the thought is over once the answer begins
                        answer_started = True
                        await answers.add(answer)
            except Exception:
                with contextlib.suppress(Exception):  # what came before the failure goes out
                    await thoughts.flush()
                    await answers.flush()
                raise
            thought, answer, reply = parser.finish()
            await end_thought(thought)
            if isinstance(reply, FinalAnswer):
                await answers.add(answer)
                await answers.flush()
                await emit(message("answer", "", message_id=answer_id, end_of_dialog=True,
                                   answer=reply.answer))
            else:
                await answers.flush()
                if answer_started:
                    log.warning("a streamed answer turned out not to be final")
        finally:
            thoughts.cancel()
            answers.cancel()
        return reply

    async def _act(self, action: Action, offered: Mapping[str, Tool], user: str,
                   emit: Emit, tally: DialogTally) -> tuple[str, bool]:
        """The observation of one action, and whether the tool succeeded."""
        tool = offered.get(action.name)
        if tool is None:
            # the name the LLM made up is no label: a model could invent one per call
            metrics.tool_call(tool="", type="", outcome="unknown-tool", seconds=None)
            names = ", ".join(repr(n) for n in offered) or "none"
            return f"Error: there is no tool {action.name!r}. Available tools: {names}.", False
        arguments = action.arguments
        kind = tool.info.type or "tool"
        problems = tool.check(arguments)
        if problems:
            metrics.tool_call(tool=tool.name, type=kind, outcome="invalid-arguments",
                              seconds=None)
            return (f"Error: invalid arguments for {tool.name!r}: " + "; ".join(problems)
                    + f". You passed: {json.dumps(arguments, ensure_ascii=False)}"), False
        started = time.perf_counter()
        with tracing.span(f"tool {tool.name}", kind="client",
                          attributes={"toolmesh.tool": tool.name,
                                      "toolmesh.tool.type": kind}) as span:
            observation, outcome = await self._invoke(tool, arguments, user, emit)
            if outcome != "ok":
                tracing.failed(span, outcome)
        seconds = time.perf_counter() - started
        tally.tool_ran(seconds)
        metrics.tool_call(tool=tool.name, type=kind, outcome=outcome, seconds=seconds)
        return observation, outcome == "ok"

    async def _invoke(self, tool: Tool, arguments: dict[str, Any], user: str,
                      emit: Emit) -> tuple[str, str]:
        """The observation of one call of ``tool``, and its outcome (``ok``, ``timeout``,
        or the error type)."""
        timeout = self.options.tool_timeout
        most = max(self.options.tool_max_timeout, timeout)
        try:
            # The deadline is passed down so a client can cancel its call; the timeout here is
            # the backstop for a tool that ignores it. Progress moves both (agent/progress.py).
            async with asyncio.timeout(timeout + 1.0) as backstop:
                relay = ProgressRelay(tool=tool.name, emit=emit, backstop=backstop,
                                      timeout=timeout + 1.0, max_timeout=most + 1.0)
                call = Call(user=user, timeout=timeout, max_timeout=most, progress=relay)
                return await tool.invoke(arguments, call), "ok"
        except (RequestTimeout, TimeoutError):
            return (f"Error: the tool {tool.name!r} did not answer within {timeout:g} s",
                    "timeout")
        except (RequestError, ToolError) as e:
            return f"Error: {e.message}", e.type
        except Exception as e:
            log.exception("tool %r failed", tool.name)
            return (f"Error: the tool {tool.name!r} failed: {type(e).__name__}: {e}",
                    "tool-error")


def _outcome(last: Mapping[str, Any] | None) -> str:
    """How a dialog ended, from its last message: ``answer`` or the error type."""
    if last is None:
        return "agent-error"  # it ended without a last message: a bug
    if last.get("message_type") == "answer":
        return "answer"
    error = last.get("error")
    return str(error.get("type") or "error") if isinstance(error, Mapping) else "error"
