"""What a dialog has done so far: its turns, each a thought and the tool calls it made.

A strategy (:mod:`toolmesh.agent.strategies`) turns the transcript into what its LLM request
carries — TrustGraph's ``history`` steps for the text protocol, assistant and tool messages for
native calls — so one dialog reads the same whichever way it is asked. A client's ``history``
(TrustGraph's steps) becomes turns of one call each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolmesh.schema.agent import Step


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRecord:
    """One tool call and what came of it."""

    #: the call's id: the model's own (native), or one the agent made up
    id: str
    name: str
    arguments: Any
    observation: str
    #: the tool ran and succeeded (not: refused, failed, or repeated)
    ok: bool = True
    #: the call brought nothing new: it repeated an earlier one, or returned what an earlier
    #: call of its tool returned (strategies may leave it out of what the model is shown)
    redundant: bool = False
    #: the tool was called (what the dialog's usage counts); not: refused before it ran
    #: (bad arguments, an unknown tool, no approval) or answered from an earlier call
    ran: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One step of the dialog: what the model thought and called — or, when its reply could
    not be used, ``problem`` (the ``Error: ...`` observation the model is told)."""

    thought: str = ""
    calls: tuple[CallRecord, ...] = ()
    problem: str | None = None
    #: the model's reply exactly as it wrote it, when the strategy sends it back that way
    #: (so the server's prompt cache holds: the next prompt starts with this one)
    raw: str | None = None

    @property
    def redundant(self) -> bool:
        """Every call of the turn brought nothing new."""
        return bool(self.calls) and all(c.redundant for c in self.calls)


@dataclass(kw_only=True)
class Transcript:
    """The question and the turns so far."""

    question: str
    turns: list[Turn] = field(default_factory=list)

    @classmethod
    def of(cls, question: str, history: tuple[Step, ...]) -> Transcript:
        """A transcript that starts from a client's ``history``."""
        turns = []
        for i, step in enumerate(history, 1):
            if step.action:
                turns.append(Turn(thought=step.thought, calls=(CallRecord(
                    id=f"call_h{i}", name=step.action, arguments=step.arguments,
                    observation=step.observation),)))
            else:
                turns.append(Turn(thought=step.thought, problem=step.observation))
        return cls(question=question, turns=turns)

    def steps(self) -> list[Step]:
        """The turns as TrustGraph's history steps: one per call (the thought on the first),
        a turn without calls as a step without an action."""
        out = []
        for turn in self.turns:
            if not turn.calls:
                out.append(Step(thought=turn.thought, observation=turn.problem or ""))
            for i, call in enumerate(turn.calls):
                out.append(Step(thought=turn.thought if i == 0 else "", action=call.name,
                                arguments=call.arguments, observation=call.observation))
        return out

    def earlier(self, name: str, arguments: Any) -> CallRecord | None:
        """An earlier call of ``name`` with the same arguments that ran, if there is one."""
        key = call_key(name, arguments)
        for turn in self.turns:
            for call in turn.calls:
                if call.ok and call_key(call.name, call.arguments) == key:
                    return call
        return None

    def returned(self, name: str, observation: str) -> bool:
        """Whether an earlier call of ``name`` that ran returned exactly ``observation``."""
        return any(call.ok and not call.redundant and call.name == name
                   and call.observation == observation
                   for turn in self.turns for call in turn.calls)

    def results(self) -> list[tuple[str, CallRecord]]:
        """The results the dialog has — calls that ran, succeeded and brought something new —
        each with a label (the tool's name; ``name (2)`` for its second result...), the
        latest first."""
        out: list[tuple[str, CallRecord]] = []
        counts: dict[str, int] = {}
        for turn in self.turns:
            for call in turn.calls:
                if call.ok and not call.redundant:
                    counts[call.name] = counts.get(call.name, 0) + 1
                    n = counts[call.name]
                    out.append((call.name if n == 1 else f"{call.name} ({n})", call))
        return out[::-1]

    def shown(self) -> list[Turn]:
        """The turns a model is shown: those that brought something new. (What a redundant
        call returned the model has already seen; its turn only pulls a small model back into
        calling the tool again.)"""
        return [turn for turn in self.turns if not turn.redundant]


def call_key(name: str, arguments: Any) -> str:
    """What makes two calls the same call: the tool and the arguments, key order aside."""
    return name + " " + json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
