"""The strategy seam: how one agent step is asked of the LLM, and what the reply decided.

A :class:`Strategy` builds the step's request from the dialog so far (:class:`StepContext`),
asks the LLM through the prompt service, tells the thought and answer to the client as they
stream (:class:`~toolmesh.agent.narrator.Narrator`) and returns a :class:`Decision`: tool
calls, a final answer, or a reply that could not be used (the model's fault: it is told why).
What the agent then does — run the calls, check for repeats, count the steps — is the loop's
(:mod:`toolmesh.agent.loop`), the same for every strategy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from toolmesh.agent.narrator import Narrator
from toolmesh.agent.tools import Tool
from toolmesh.agent.transcript import Transcript
from toolmesh.llm.base import CompletionStream, ToolCalling
from toolmesh.llm.chat import ChatRequest

#: why a step may only answer: an identical call was repeated, the step limit or the token
#: budget was reached
Wrap = Literal["repeat", "limit", "budget"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRequest:
    """A tool call the model asked for. ``problem``: why its arguments are unusable (they
    did not parse), told to the model instead of calling."""

    id: str
    name: str
    arguments: Any
    problem: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Calls:
    thought: str
    calls: tuple[CallRequest, ...]
    raw: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    thought: str
    answer: str
    #: the answer was cut short by the model's limit (it is passed on as it is, marked)
    cut: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Unusable:
    """A reply the agent cannot act on; ``problem`` tells the model what to fix."""

    thought: str
    problem: str
    raw: str | None = None


Decision = Calls | Answer | Unusable


class LLM(Protocol):
    """The prompt service's client, as a strategy uses it."""

    def stream(self, id: str, variables: Mapping[str, Any], *, timeout: float,
               workspace: str | None = None,
               limits: Mapping[str, Any] | None = None) -> AsyncIterator[str]: ...

    async def render_and_complete(self, id: str, variables: Mapping[str, Any], *,
                                  timeout: float, workspace: str | None = None,
                                  limits: Mapping[str, Any] | None = None) -> str: ...

    def chat(self, chat: ChatRequest, *, id: str | None = None,
             variables: Mapping[str, Any] | None = None, timeout: float | None = ...,
             workspace: str | None = None) -> CompletionStream: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class StepContext:
    """What one step is asked from."""

    transcript: Transcript
    #: the tools offered in this step, by name
    tools: Mapping[str, Tool]
    #: this step may only answer, and why (``None``: it may call tools)
    wrap: Wrap | None
    llm: LLM
    narrator: Narrator
    workspace: str | None
    timeout: float
    #: the most tokens the step's reply may take while it may call tools
    max_tokens: int | None
    temperature: float | None = None
    #: the prompt template of each strategy (an option of the agent: a workspace may
    #: replace the shipped ones with config items)
    templates: Mapping[str, str] | None = None
    #: ``json``: ask for the tool and its arguments in one reply (1) or the tool first, then
    #: its arguments with it alone shown (2)
    choice_steps: int = 1
    #: ``json``: hold free argument values to the dialog's words and numbers
    ground_arguments: bool = True
    #: the most tokens a final answer may take (``None``: the model's limit)
    answer_max_tokens: int | None = None

    def template(self, strategy: str) -> str:
        return (self.templates or {}).get(strategy, DEFAULT_TEMPLATES[strategy])


#: the shipped template of each strategy (toolmesh.prompt.defaults)
DEFAULT_TEMPLATES: Mapping[str, str] = {"react": "agent-react", "json": "agent-json",
                                        "native": "agent-native"}

#: what the model is told when it must answer now
WRAP_NOTES: Mapping[str, str] = {
    "repeat": "You have what the tools can give. Give your final answer now.",
    "limit": "You have no steps left. Give your final answer now, from what you know.",
    "budget": "You have used this dialog's token budget. Give your final answer now, from what "
              "you know.",
}
#: what a model that writes its own answer is told about the results it has
PASS_ON = " If a result above answers the question, pass it on word for word."


class Strategy(Protocol):
    """One way of getting tool calls out of a model."""

    name: ToolCalling

    async def step(self, context: StepContext) -> Decision:
        """Ask for one step; raises :class:`toolmesh.RequestError` when the LLM cannot be
        asked (it ends the dialog)."""
        ...


def limits(context: StepContext, *, stop: Sequence[str] = (),
           answer_marker: str | None = None) -> dict[str, Any]:
    """The step's limits as a prompt request carries them: an answer bound by
    ``answer_max_tokens``; in a step that may call tools, a reply that has not reached
    ``answer_marker`` by ``max_tokens``."""
    out: dict[str, Any] = {}
    if context.answer_max_tokens is not None:
        out["max_tokens"] = context.answer_max_tokens
    if context.wrap is None and context.max_tokens is not None:
        out["action_max_tokens"] = context.max_tokens
        if answer_marker is not None:
            out["answer_marker"] = answer_marker
    if stop:
        out["stop"] = list(stop)
    if context.temperature is not None:
        out["temperature"] = context.temperature
    return out
