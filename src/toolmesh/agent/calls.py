"""Running the tool calls of a step: checks first, then the tool with its deadline, its
progress passed on, and whatever goes wrong turned into an observation the model sees.

Errors stay apart as DESIGN.md says: the model's faults (an unknown tool, bad arguments) and a
tool's faults (an error response, a timeout) become ``Error: ...`` observations and the dialog
goes on; only the system's faults end it (the loop's business).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolmesh.agent.progress import ProgressRelay
from toolmesh.agent.tally import DialogTally
from toolmesh.agent.tools import Call, Tool, ToolError
from toolmesh.errors import RequestError, RequestTimeout
from toolmesh.telemetry import metrics, tracing

log = logging.getLogger("toolmesh.agent")

Emit = Callable[[dict[str, Any]], Awaitable[None]]
#: asks whether a checked call may run: ``None`` if so, else the observation saying why not
Permit = Callable[[Tool, Any], Awaitable[str | None]]
#: takes a question of a tool's server for the person (the tool's name, the question)
Ask = Callable[[str, dict[str, Any]], Awaitable[None]]
#: what is wrong with a call's arguments beyond its schema (empty: nothing)
Vet = Callable[[Tool, Any], list[str]]


class Offered(dict[str, Tool]):
    """The tools a step offers, by name, and (:attr:`left_out`) the tools it does not offer
    because they cannot work now, with why: a call of one is told why, not that there is no
    such tool (its MCP server cannot be reached, refused the token...)."""

    def __init__(self, tools: Mapping[str, Tool], *,
                 left_out: Mapping[str, str] | None = None) -> None:
        super().__init__(tools)
        self.left_out: dict[str, str] = dict(left_out or {})


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one call came to: the observation, and whether the tool ran and succeeded."""

    observation: str
    ok: bool
    #: how a call that ran ended: ``ok``, ``timeout``, or the error's type
    #: (``login-required``...); empty for a call that did not run
    kind: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolRunner:
    """Runs calls with the agent's tool deadlines (see :class:`~toolmesh.agent.loop.
    AgentOptions`)."""

    tool_timeout: float
    tool_max_timeout: float

    async def run(self, name: str, arguments: Any, offered: Mapping[str, Tool], *, user: str,
                  emit: Emit, tally: DialogTally, key: str | None = None,
                  actor: str | None = None,
                  permit: Permit | None = None, ask: Ask | None = None,
                  parts: Callable[[str], Awaitable[None]] | None = None,
                  vet: Vet | None = None) -> Outcome:
        """The outcome of calling ``name`` with ``arguments``; ``key``: the call's
        idempotency key, passed to the tool (the same on every attempt of this call);
        ``vet``: what is wrong with arguments that pass the tool's schema (values the model
        took from its prompt, not the dialog: :mod:`toolmesh.agent.grounding`);
        ``permit``: asked once the call is checked (a person may have to approve it);
        ``ask``: where the questions of the tool's server go (elicitation); ``parts``: where
        the pieces of a streamed answer go as they come."""
        tool = offered.get(name)
        left_out = offered.left_out if isinstance(offered, Offered) else {}
        if tool is None and name in left_out:
            metrics.tool_call(tool=name, type="", outcome="unavailable", seconds=None)
            names = ", ".join(repr(n) for n in offered) or "none"
            return Outcome(observation=f"Error: the tool {name!r} cannot be used now: "
                                       f"{left_out[name]}. Available tools: {names}.",
                           ok=False)
        if tool is None:
            # the name the LLM made up is no label: a model could invent one per call
            metrics.tool_call(tool="", type="", outcome="unknown-tool", seconds=None)
            names = ", ".join(repr(n) for n in offered) or "none"
            return Outcome(observation=f"Error: there is no tool {name!r}. Available tools: "
                                       f"{names}.", ok=False)
        kind = tool.info.type or "tool"
        problems = tool.check(arguments)
        if problems:
            metrics.tool_call(tool=tool.name, type=kind, outcome="invalid-arguments",
                              seconds=None)
            return Outcome(observation=f"Error: invalid arguments for {tool.name!r}: "
                                       + "; ".join(problems) + ". You passed: "
                                       + json.dumps(arguments, ensure_ascii=False), ok=False)
        copied = vet(tool, arguments) if vet is not None else []
        if copied:
            metrics.tool_call(tool=tool.name, type=kind, outcome="ungrounded-arguments",
                              seconds=None)
            return Outcome(observation=f"Error: arguments for {tool.name!r} that the question "
                                       "does not give: " + "; ".join(copied) + ". Use the "
                                       "values the question gives; if it gives none, answer "
                                       "without this tool.", ok=False)
        if permit is not None:
            refusal = await permit(tool, arguments)
            if refusal is not None:
                metrics.tool_call(tool=tool.name, type=kind, outcome="not-approved",
                                  seconds=None)
                return Outcome(observation=refusal, ok=False)
        started = time.perf_counter()
        with tracing.span(f"tool {tool.name}", kind="client",
                          attributes={"toolmesh.tool": tool.name,
                                      "toolmesh.tool.type": kind}) as span:
            observation, outcome = await self._invoke(tool, arguments, user, emit, key, ask,
                                                      parts, actor)
            if outcome != "ok":
                tracing.failed(span, outcome)
        seconds = time.perf_counter() - started
        tally.tool_ran(seconds)
        metrics.tool_call(tool=tool.name, type=kind, outcome=outcome, seconds=seconds)
        return Outcome(observation=observation, ok=outcome == "ok", kind=outcome)

    async def _invoke(self, tool: Tool, arguments: dict[str, Any], user: str,
                      emit: Emit, key: str | None, ask: Ask | None,
                      parts: Callable[[str], Awaitable[None]] | None,
                      actor: str | None = None) -> tuple[str, str]:
        """The observation of one call of ``tool``, and its outcome (``ok``, ``timeout``,
        or the error type)."""
        timeout = self.tool_timeout
        most = max(self.tool_max_timeout, timeout)
        try:
            # The deadline is passed down so a client can cancel its call; the timeout here is
            # the backstop for a tool that ignores it. Progress moves both (agent/progress.py).
            async with asyncio.timeout(timeout + 1.0) as backstop:
                relay = ProgressRelay(tool=tool.name, emit=emit, backstop=backstop,
                                      timeout=timeout + 1.0, max_timeout=most + 1.0)

                async def question(request: dict[str, Any]) -> None:
                    relay.hold()  # the person answers when they answer
                    if ask is not None:
                        await ask(tool.name, request)

                call = Call(user=user, timeout=timeout, max_timeout=most, progress=relay,
                            key=key, ask=question if ask is not None else None, parts=parts,
                            actor=actor)
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
