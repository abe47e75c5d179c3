"""The agent's loop: think, act, observe, until a final answer — with the model asked the way
that works with it, and the loop kept within bounds whatever the model does.

Each dialog asks its LLM through one strategy (:mod:`toolmesh.agent.strategies`): the one a
workspace's ``settings/workspace`` item or the agent's options name, or else the one the
text-completion service found to work with its model (:mod:`toolmesh.llm.detect`). The loop
is the same for all of them, and so is what the client sees (thought, tool-call,
observation, answer messages). Loop control, docs/tool-calling.md:

* every step is bounded: ``max_step_tokens`` (and, in ``react``, a stop sequence);
* a call identical to an earlier one (same tool, same arguments) is not run again: the model
  gets the earlier result, and the next step may only answer; so too when a call returns
  exactly what an earlier call of the same tool returned (it brought nothing new: a small
  model otherwise calls a tool again and again with arguments that differ in a word);
* at the step limit, or once the dialog's token budget is spent, the agent asks once more
  for a final answer with the tools withheld; only if that fails too does the dialog end in
  an error.

Errors are kept apart as DESIGN.md says: the model's faults and a tool's faults become
observations the model sees (:mod:`toolmesh.agent.calls`); the system's faults (the LLM
unreachable, the limits) end the dialog with an error message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from toolmesh.agent.action import tool_call_message
from toolmesh.agent.approving import DEFAULT_APPROVAL_TIMEOUT, DialogApprovals
from toolmesh.agent.calls import Emit, Offered, ToolRunner
from toolmesh.agent.grounding import dialog_text, ungrounded
from toolmesh.agent.journaling import DialogLog, Resumption
from toolmesh.agent.narrator import Narrator
from toolmesh.agent.observation import DEFAULT_MAX_OBSERVATION, cut
from toolmesh.agent.offering import DialogOffers
from toolmesh.agent.selection import SelectionOptions, ToolSelector
from toolmesh.agent.strategies import (
    LLM,
    WRAP_NOTES,
    Answer,
    CallRequest,
    Calls,
    StepContext,
    Strategy,
    Unusable,
    Wrap,
    strategy_for,
)
from toolmesh.agent.tally import DialogTally
from toolmesh.agent.tools import Tool
from toolmesh.agent.toolset import ToolSet
from toolmesh.agent.transcript import CallRecord, Transcript, Turn
from toolmesh.approvals import DEFAULT_POLICY, ApprovalGate, Policy
from toolmesh.errors import RequestError
from toolmesh.llm.coalesce import Coalescing
from toolmesh.llm.usage import Usage, metering
from toolmesh.rpc import parking
from toolmesh.schema.agent import AgentRequest, message, new_message_id
from toolmesh.telemetry import metrics, tracing

log = logging.getLogger("toolmesh.agent")

#: the error each way of running out ends a dialog with: (type, content, message)
_LIMIT_ERRORS = {
    "limit": ("max-iterations", "no final answer after {limit} steps",
              "the agent reached its limit of {limit} steps without a final answer"),
    "budget": ("token-budget", "no final answer within the token budget",
               "the dialog used its budget of {budget} tokens without a final answer"),
}


class Prompts(LLM, Protocol):
    """The prompt service's client, as the agent uses it: as the strategies do, and to ask
    which strategy its LLM takes."""

    async def capabilities(self, *, timeout: float | None = ...) -> dict[str, Any]: ...


@dataclass(frozen=True, kw_only=True)
class AgentOptions:
    max_iterations: int = 10
    tool_timeout: float = 120.0
    #: the most a tool call may take while the tool keeps reporting progress (each report
    #: grants ``tool_timeout`` more); tools that report none get ``tool_timeout``
    tool_max_timeout: float = 600.0
    llm_timeout: float = 600.0
    #: the prompt template of each strategy, where it is not the shipped one
    #: (``{"react": "agent-react"}``: TrustGraph's template id)
    templates: Mapping[str, str] = field(default_factory=dict)
    #: the most bytes (UTF-8) of a tool's result the LLM sees; more is cut, with a note
    max_observation: int = DEFAULT_MAX_OBSERVATION
    #: how a streamed thought's and answer's pieces are gathered into messages
    #: (:data:`toolmesh.llm.coalesce.OFF`: a message per piece the parser sets free)
    coalescing: Coalescing = Coalescing()
    #: how to ask the model for tool calls: ``native``, ``json``, ``react``, or ``auto``: as
    #: the text-completion service found works with its LLM
    tool_calling: str = "auto"
    #: the most tokens one step's reply may take while it may call tools (0: no limit)
    max_step_tokens: int = 1024
    #: the most tokens a final answer may take (0: the model's limit)
    max_answer_tokens: int = 0
    #: the tokens (in and out) a dialog may use before it is asked to answer (0: no limit)
    token_budget: int = 100_000
    #: calls of one reply (``native``) that run at once
    parallel_calls: int = 4
    #: the temperature steps are asked at (``None``: the server's): 0 by default, so that
    #: which tool a model picks is not a roll of the dice
    temperature: float | None = 0.0
    #: whether calls of tools that set no policy wait for a person (docs/approvals.md)
    approval: Policy = DEFAULT_POLICY
    #: seconds an approval request waits before it is taken as denied
    approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT
    #: which of the offered tools each step shows the model (:mod:`toolmesh.agent.selection`)
    selection: SelectionOptions = SelectionOptions()
    #: ``json`` steps: the tool and its arguments in one reply (1), or in two (2)
    choice_steps: int = 1
    #: ``json`` steps: free argument values held to the dialog's words and numbers
    ground_arguments: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class _Outcome:
    """What a step came to: the dialog ended; the state after it; a reason the next step
    may only answer."""

    ended: bool
    state: str | None
    wrap: Wrap | None = None


class AgentLoop:
    """Runs dialogs; each :meth:`run` has its own transcript, so many run at once."""

    def __init__(self, *, prompts: Prompts, tools: Callable[[], ToolSet],
                 options: AgentOptions = AgentOptions(),
                 gate: ApprovalGate | None = None) -> None:
        self.prompts = prompts
        self.tools = tools
        self.options = options
        #: where the answers of calls that wait for a person arrive (``None``: none waits)
        self.gate = gate
        self.runner = ToolRunner(tool_timeout=options.tool_timeout,
                                 tool_max_timeout=options.tool_max_timeout)
        # embeddings come from the LLM's server, through the prompt service, when it has them
        self.selector = ToolSelector(options.selection,
                                     embedder=prompts if hasattr(prompts, "embed") else None)
        self._no_capabilities_logged = False

    async def run(self, request: AgentRequest, emit: Emit, *,
                  tools: Callable[[], ToolSet] | None = None,
                  workspace: str | None = None, journal: DialogLog | None = None,
                  resumed: Resumption | None = None) -> None:
        """Run one dialog; ``tools``: where its tool set comes from (default: the loop's),
        e.g. the request's workspace's; ``workspace``: whose prompt templates it uses
        (default: the prompt service's); ``journal``: where its steps are recorded, and the
        id its calls' idempotency keys start with (default: none, and a new id);
        ``resumed``: where a dialog taken up again from its journal stands.

        The dialog's last message carries the tokens of every LLM answer in it, summed
        (``in_token``, ``out_token``; ``None`` where none was reported), and the last
        ``model``, as TrustGraph's agent does (:mod:`toolmesh.llm.usage`); and the tool calls
        it made, ``tool_calls`` and ``tool_time`` (:mod:`toolmesh.agent.tally`).
        """
        started = time.perf_counter()
        tally = DialogTally()
        journal = journal or DialogLog(None, new_message_id())
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
                    await journal.end(out, steps=tally.steps)
                    return
                journal.told(out)
                await emit(out)

            try:
                await self._dialog(request, emit_with_usage, tools or self.tools, workspace,
                                   tally, usage, journal, resumed)
                outcome = _outcome(last)
            except Exception:
                outcome = "agent-error"
                raise
            finally:
                if outcome != "answer":
                    tracing.failed(span, outcome)
                metrics.dialog_finished(outcome=outcome, steps=tally.steps,
                                        seconds=time.perf_counter() - started)

    async def strategy(self, toolset: ToolSet) -> Strategy:
        """How this dialog asks its model (:meth:`tool_calling`)."""
        return strategy_for((await self.tool_calling(toolset))["tool_calling"])

    async def tool_calling(self, toolset: ToolSet) -> dict[str, Any]:
        """Which strategy the dialogs of ``toolset``'s workspace use, and why: ``{"tool_calling",
        "source", "detail", "llm"?}`` — the workspace's setting, the agent's option, or what
        the text-completion service found to work with its LLM (``react`` if it cannot say:
        an older or TrustGraph's own service, which knows only that protocol)."""
        if toolset.tool_calling != "auto":
            return {"tool_calling": toolset.tool_calling, "source": "workspace",
                    "detail": "set by settings/workspace (tool-calling)"}
        if self.options.tool_calling != "auto":
            return {"tool_calling": self.options.tool_calling, "source": "agent",
                    "detail": f"set on the agent (--tool-calling {self.options.tool_calling})"}
        ask = getattr(self.prompts, "capabilities", None)
        if ask is None:  # a prompt client of the text protocol alone
            return {"tool_calling": "react", "source": "agent",
                    "detail": "the prompt client takes only the text protocol"}
        try:
            capabilities = await ask(timeout=self.options.llm_timeout)
        except RequestError as e:
            if not self._no_capabilities_logged:
                log.warning("the prompt service could not say how to call tools with its LLM "
                            "(%s); asking in the react text protocol", e.message)
                self._no_capabilities_logged = True
            return {"tool_calling": "react", "source": "agent",
                    "detail": f"the LLM's service could not say ({e.message})"}
        name = capabilities.get("tool_calling")
        if name not in ("native", "json", "react"):
            name = "react"
        return {"tool_calling": name, "source": str(capabilities.get("source") or "detected"),
                "detail": str(capabilities.get("detail") or ""),
                "llm": str(capabilities.get("llm") or "")}

    async def _dialog(self, request: AgentRequest, emit: Emit,
                      toolset: Callable[[], ToolSet], workspace: str | None,
                      tally: DialogTally, usage: Usage, journal: DialogLog,
                      resumed: Resumption | None) -> None:
        strategy = await self.strategy(toolset())
        approvals = DialogApprovals(gate=self.gate, journal=journal, emit=emit,
                                    workspace=workspace or toolset().workspace,
                                    user=request.user, default=self.options.approval,
                                    timeout=self.options.approval_timeout, resumed=resumed)
        transcript = Transcript.of(request.question, request.history)
        find = self.options.selection.find_tools
        offers = DialogOffers(self.selector, emit=emit, journal=journal,
                              finder=find == "on" or find == "auto" and strategy.name == "native")
        state = request.state
        wrap: Wrap | None = None
        limit, budget = self.options.max_iterations, self.options.token_budget
        number = 0
        if resumed is not None:  # taken up again: from the last step its journal holds
            transcript.turns.extend(resumed.turns)
            state, wrap, number = resumed.state, resumed.wrap, resumed.steps
            journal.tool_calls = resumed.tool_calls
            if resumed.pending is not None:  # its calls may have been made: same keys
                number += 1
                tally.steps = number
                _, offered = await offers.step(number, await self._offered(
                    request, toolset, state), toolset(), transcript)
                step = await self._act(resumed.pending, offered, request.user, emit,
                                       transcript, state, tally, journal, approvals, number,
                                       known=resumed.known, told=True, actor=request.actor)
                journal.turn(number, step.state, step.wrap)
                state, wrap = step.state, step.wrap
        while True:
            number += 1
            final: Wrap | None = None
            if number > limit:
                final = "limit"
            elif budget and (usage.in_token or 0) + (usage.out_token or 0) >= budget:
                final = "budget"
            tally.steps = number
            with tracing.span(f"agent step {number}"):
                step = await self._step(request, strategy, emit, toolset, workspace, transcript,
                                        state, tally, journal, approvals, offers, number,
                                        wrap=final or wrap, last=final is not None)
            if step.ended:
                return
            journal.turn(number, step.state, step.wrap)
            if final is not None:
                kind, content, text = _LIMIT_ERRORS[final]
                await emit(message("error", content.format(limit=limit), end_of_dialog=True,
                                   message_id=new_message_id(),
                                   error={"type": kind,
                                          "message": text.format(limit=limit, budget=budget)}))
                return
            state, wrap = step.state, step.wrap

    async def _offered(self, request: AgentRequest, toolset: Callable[[], ToolSet],
                       state: str | None) -> Offered:
        """The tools a step may offer, by name (selection picks those it shows). The tool set
        is read at every step: config changes apply from the next step on."""
        offered = {t.name: t for t in toolset().offered(groups=request.groups, state=state)}
        await asyncio.gather(*(t.prepare() for t in offered.values()))
        # a tool that found it cannot work (its MCP server lacks it, say) is left out; a call
        # of it is told why (calls.py)
        return Offered({n: t for n, t in offered.items() if t.unavailable is None},
                       left_out={n: t.unavailable for n, t in offered.items()
                                 if t.unavailable is not None})

    async def _step(self, request: AgentRequest, strategy: Strategy, emit: Emit,
                    toolset: Callable[[], ToolSet], workspace: str | None,
                    transcript: Transcript, state: str | None, tally: DialogTally,
                    journal: DialogLog, approvals: DialogApprovals, offers: DialogOffers,
                    number: int, *, wrap: Wrap | None, last: bool = False) -> _Outcome:
        """One step: ask the LLM, act on its reply. A step with a ``wrap`` may only answer:
        calls it makes are not run; ``last``: nor told to the model (the dialog ends)."""
        shown, offered = await offers.step(number, await self._offered(request, toolset, state),
                                           toolset(), transcript)
        narrator = Narrator(emit, streaming=request.streaming,
                            coalescing=self.options.coalescing)
        options = self.options
        context = StepContext(transcript=transcript, tools=shown, wrap=wrap,
                              llm=self.prompts, narrator=narrator, workspace=workspace,
                              timeout=options.llm_timeout,
                              max_tokens=options.max_step_tokens or None,
                              temperature=options.temperature, templates=options.templates,
                              choice_steps=options.choice_steps,
                              ground_arguments=options.ground_arguments,
                              answer_max_tokens=options.max_answer_tokens or None)
        try:
            decision = await strategy.step(context)
        except RequestError as e:
            narrator.close()
            await emit(message("error", f"the LLM could not be reached: {e.message}",
                               message_id=new_message_id(), end_of_dialog=True,
                               error={"type": e.type, "message": e.message}))
            return _Outcome(ended=True, state=state)
        answer = decision.answer if isinstance(decision, Answer) else None
        cut = isinstance(decision, Answer) and decision.cut
        if cut:
            log.warning("dialog %s: the model's answer was cut short by its limit (%s)",
                        journal.id, f"--max-answer-tokens {options.max_answer_tokens}"
                        if options.max_answer_tokens else "its own")
        await narrator.finish(thought=decision.thought, answer=answer,
                              cut=options.max_answer_tokens if cut else None)
        if isinstance(decision, Answer):
            return _Outcome(ended=True, state=state)
        if last:
            return _Outcome(ended=False, state=state)
        if isinstance(decision, Calls) and wrap is not None:
            # the model was asked for its answer and called a tool anyway (react and native
            # cannot enforce it): nothing runs, and it is told once more
            decision = Unusable(thought=decision.thought, raw=decision.raw,
                                problem="no tool may be called now. " + WRAP_NOTES[wrap])
        if isinstance(decision, Unusable):
            journal.reply(number, decision)
            problem = f"Error: {decision.problem}"
            transcript.turns.append(Turn(thought=decision.thought, problem=problem,
                                         raw=decision.raw))
            await emit(message("observation", problem, message_id=new_message_id()))
            return _Outcome(ended=False, state=state)
        journal.reply(number, decision)
        # every call that may be made is in the journal first, with its id
        await journal.flush(steps=number)
        return await self._act(decision, offered, request.user, emit, transcript, state,
                               tally, journal, approvals, number, actor=request.actor)

    async def _act(self, decision: Calls, offered: Mapping[str, Tool], user: str, emit: Emit,
                   transcript: Transcript, state: str | None, tally: DialogTally,
                   journal: DialogLog, approvals: DialogApprovals, number: int, *,
                   known: Mapping[str, CallRecord] | None = None,
                   told: bool = False, actor: str | None = None) -> _Outcome:
        """Run a reply's calls — at most ``parallel_calls`` at once — and tell the client
        each call before it runs, then each result in the order of the calls. ``known``:
        results the journal holds already (not run again); ``told``: the client was told the
        calls before (a dialog taken up again)."""
        for call in decision.calls if not told else ():
            # before the call: its progress and its observation follow it
            await emit(tool_call_message(call.name, call.arguments))
        room = asyncio.Semaphore(max(1, self.options.parallel_calls))
        repeated = False
        said = dialog_text(transcript)

        def vet(tool: Tool, arguments: Any) -> list[str]:
            # values the model copied from its prompt (grounding.py): it is asked again
            return [] if tool.info.type == "find-tools" else ungrounded(tool, arguments, said)

        async def one(call: CallRequest) -> CallRecord:
            nonlocal repeated
            record = partial(CallRecord, id=call.id, name=call.name, arguments=call.arguments)
            if known and call.id in known:
                return known[call.id]
            if call.problem is not None:
                return record(observation=f"Error: {call.problem}", ok=False, ran=False)
            earlier = transcript.earlier(call.name, call.arguments)
            if earlier is not None:
                repeated = True
                metrics.tool_call(tool=call.name, type="", outcome="repeated", seconds=None)
                return record(ok=False, redundant=True, ran=False, observation=(
                    f"{earlier.observation}\n\n({call.name} was called with these arguments "
                    "before: this is that call's result.)"))
            async with room:
                outcome = await self.runner.run(call.name, call.arguments, offered, user=user,
                                                actor=actor,
                                                vet=vet,
                                                emit=emit, tally=tally,
                                                key=journal.key(number, call.id),
                                                permit=partial(approvals.permit, step=number,
                                                               call=call.id),
                                                ask=partial(approvals.relay, step=number))
            # it goes into every later prompt of the dialog: a huge result must not
            observation = cut(outcome.observation, limit=self.options.max_observation)
            ran = bool(outcome.kind)  # empty: refused before the tool was called
            if outcome.ok and transcript.returned(call.name, observation):
                repeated = True
                return record(ok=True, redundant=True, observation=(
                    f"{observation}\n\n(the same result as an earlier call of {call.name}.)"))
            return record(observation=observation, ok=outcome.ok, ran=ran)

        # each call works until its result is recorded: a stop lets the dialog go at once
        # only while every call not recorded waits for a person (rpc/parking.py)
        working = [parking.hold() for _ in decision.calls]
        tasks = [asyncio.ensure_future(one(call)) for call in decision.calls]
        records = []
        try:
            for task, done in zip(tasks, working):
                record = await task
                records.append(record)
                if not (known and record.id in known):
                    journal.result(number, record, None)
                await approvals.recorded()
                done()
                await emit(message("observation", record.observation,
                                   message_id=new_message_id()))
        finally:
            for task in tasks:
                task.cancel()
            for done in working:
                done()
        for record in records:
            tool = offered.get(record.name)
            if record.ok and tool is not None and tool.info.state:
                state = tool.info.state
        transcript.turns.append(Turn(thought=decision.thought, calls=tuple(records),
                                     raw=decision.raw))
        return _Outcome(ended=False, state=state, wrap="repeat" if repeated else None)


def _outcome(last: Mapping[str, Any] | None) -> str:
    """How a dialog ended, from its last message: ``answer`` or the error type."""
    if last is None:
        return "agent-error"  # it ended without a last message: a bug
    if last.get("message_type") == "answer":
        return "answer"
    error = last.get("error")
    return str(error.get("type") or "error") if isinstance(error, Mapping) else "error"
