"""``json``: every step is one JSON object that a schema built from the offered tools
constrains, so every reply parses — the strategy for models and servers without native tool
calls that can follow a grammar (llama.cpp, vLLM, Ollama, OpenAI's structured outputs).

The conversation is the ``agent-json`` template (the tools and how to reply) as the system
message, the question as the user's, then for each step the model's call as the assistant's
and what the tool returned as the user's: every step's prompt begins with the previous one,
so the server's prompt cache is reused. The schema (:mod:`.schemas`) has one branch per tool
shown (``action`` and ``arguments``) and one for the answer (``final_answer``). Measured on
SmolLM2-135M (docs/tool-calling.md), these choices matter:

* **no thought**: a thought first leads a small model away from the tool it was shown (the
  right tool first in 15 of 32 tuning questions with one, 25 without);
* **values from the dialog**: a free string argument is one of the dialog's runs of words, a
  free number one of its numbers (:mod:`toolmesh.agent.grounding`) — a small model copies
  ``Madrid`` then, not ``Máximilán``, and never ``"..."``; a tool is not fed its own results;
  an optional argument whose enum value the question names is asked for
  (``--argument-values any``: not held);
* **no example values to copy**: an argument's description is shown without its ``e.g.``
  examples, and example calls (:mod:`.examples`) only when every tool shown has one;
* **one step**: the tool and its arguments in one reply; asked in two (``choice_steps=2``:
  the tool's name first, then its arguments with it alone shown) it chose the same tools and
  filled no more arguments right, for twice the prompt tokens.

A step that may only answer is asked for ``final_answer`` alone — or for which of the
dialog's results is the answer, passed on as the tool returned it: picking one of a few
labels is reliable where retyping a result word for word is not. That step is shown the
question and the results alone, without the calls that led to them. The model's earlier
calls are sent back without any thought, and the final answer streams to the client as it is
written (:mod:`.json_stream`). A reply that calls a tool is bound by the step's tokens, an
answer by the model's limit (``"final_answer"`` marks where one begins).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from toolmesh.agent.strategies.base import (
    WRAP_NOTES,
    Answer,
    CallRequest,
    Calls,
    Decision,
    StepContext,
    Unusable,
)
from toolmesh.agent.strategies.json_stream import JsonStepStream, parse_step
from toolmesh.agent.grounding import dialog_numbers, dialog_spans, dialog_text
from toolmesh.agent.terms import without_examples
from toolmesh.agent.strategies.examples import example_arguments
from toolmesh.agent.strategies.schemas import (
    ANSWER_FROM,
    Grounding,
    Groundings,
    answer_alone,
    choice_schema,
    relaxed,
    step_schema,
)
from toolmesh.agent.tools import Tool
from toolmesh.agent.transcript import CallRecord, Turn
from toolmesh.errors import RequestError
from toolmesh.llm.base import ToolCalling
from toolmesh.llm.chat import ChatMessage, ChatRequest

#: the error type a text-completion service gives a request the LLM's server refused
REFUSED = "llm-refused"
#: where a reply turns out to be an answer
ANSWER_MARKER = '"final_answer"'


class JsonSteps:
    """The ``json`` strategy (module docstring)."""

    name: ToolCalling = "json"

    async def step(self, context: StepContext) -> Decision:
        results = context.transcript.results()
        labels = [label for label, _ in results]
        if context.wrap is not None:
            return await self._ask(context, answer_alone(labels),
                                   wrap_messages(context, results), dict(results))
        grounding = groundings(context) if context.ground_arguments else None
        if context.choice_steps == 2 and context.tools:
            return await self._two_steps(context, labels, grounding, dict(results))
        schema = step_schema(context.tools.values(), labels, thought=False,
                             grounding=grounding)
        return await self._ask_relaxed(context, schema, messages(context), dict(results))

    async def _two_steps(self, context: StepContext, labels: list[str],
                         grounding: Groundings | None,
                         results: dict[str, CallRecord]) -> Decision:
        """The tool first (its name alone, or the answer), then that tool's arguments, asked
        with that tool alone shown (module docstring)."""
        chosen = await self._ask(context, choice_schema(context.tools.values(), labels),
                                 messages(context), results)
        if not isinstance(chosen, Calls) or chosen.calls[0].name not in context.tools:
            return chosen
        tool = context.tools[chosen.calls[0].name]
        alone = replace(context, tools={tool.name: tool})
        return await self._ask_relaxed(alone, step_schema([tool], labels, thought=False,
                                                          grounding=grounding),
                                       messages(alone), results)

    async def _ask_relaxed(self, context: StepContext, schema: dict[str, Any],
                           conversation: list[ChatMessage],
                           results: dict[str, CallRecord]) -> Decision:
        try:
            return await self._ask(context, schema, conversation, results)
        except RequestError as e:
            # a tool's schema the server cannot turn into a grammar: ask once more with
            # each tool's arguments as just "an object" (they are checked before the call)
            if e.type != REFUSED or schema == relaxed(schema):
                raise
            return await self._ask(context, relaxed(schema), conversation, results)

    async def _ask(self, context: StepContext, schema: dict[str, Any],
                   conversation: list[ChatMessage],
                   results: dict[str, CallRecord]) -> Decision:
        narrator = context.narrator
        request = ChatRequest(messages=tuple(conversation), response_schema=schema,
                              temperature=context.temperature, stream=narrator.streaming,
                              **_bounds(context))
        # a step that may only answer is shown no tools (nor how to call them)
        variables = {"tools": shown(context.tools.values(), grounded=context.ground_arguments)
                     if context.wrap is None else [], "context": ""}
        reply = context.llm.chat(request, id=context.template(self.name), variables=variables,
                                 timeout=context.timeout, workspace=context.workspace)
        follow = JsonStepStream()
        await narrator.follow(reply, follow.feed)
        done = reply.completion
        text = done.text if done else ""
        return decide(text, step=len(context.transcript.turns),
                      cut=done is not None and done.finish_reason == "length", follow=follow,
                      results=results)


def groundings(context: StepContext) -> dict[str, Grounding]:
    """The values each tool's free arguments are held to: the dialog's, but the tool's own
    results (:mod:`toolmesh.agent.grounding`)."""
    transcript = context.transcript
    said = dialog_text(transcript)
    return {name: Grounding(strings=dialog_spans(transcript, tool=name),
                            numbers=dialog_numbers(transcript, tool=name), said=said)
            for name in context.tools}


def shown(tools: Iterable[Tool], *, grounded: bool) -> list[dict[str, Any]]:
    """The tools as the ``agent-json`` template shows them. With ``grounded`` values, an
    argument's description goes without its ``e.g.`` examples (measured on SmolLM2-135M:
    asked to convert 250 GBP to JPY, it reaches for the description's USD and EUR), and the
    example calls (:mod:`.examples`) are shown only if every tool has one: an example for one
    tool alone draws the model to that tool."""
    out = []
    for tool in tools:
        described = tool.describe()
        if grounded:
            described["arguments"] = [{**a, "description": without_examples(a["description"]),
                                       "outline": ""} for a in described["arguments"]]
        out.append({**described, "parameters": tool.parameters(),
                    "example": example_arguments(tool)})
    if any(t["example"] is None for t in out):
        for t in out:
            t["example"] = None
    return out


def _bounds(context: StepContext) -> dict[str, Any]:
    """A step's token bounds (docs/tool-calling.md): a reply that calls a tool by the step
    bound, one that answers (it reaches ``"final_answer"``) by the answer bound."""
    return {"max_tokens": context.answer_max_tokens,
            "action_max_tokens": context.max_tokens if context.wrap is None else None,
            "answer_marker": ANSWER_MARKER if context.wrap is None else None}


def messages(context: StepContext) -> list[ChatMessage]:
    """The conversation after the system message (module docstring)."""
    out = [ChatMessage(role="user", content=context.transcript.question)]
    for turn in context.transcript.shown():
        out.append(ChatMessage(role="assistant", content=_reply(turn)))
        out.append(ChatMessage(role="user", content=_result(turn)))
    return out


def wrap_messages(context: StepContext,
                  results: list[tuple[str, CallRecord]]) -> list[ChatMessage]:
    """The conversation of a step that may only answer: the question, the results, and
    what to do (module docstring)."""
    note = WRAP_NOTES[context.wrap or "limit"]
    if results:
        note += " If a result above answers the question, answer with it."
    out = [ChatMessage(role="user", content=context.transcript.question)]
    shown = [f"Result of {label}: {call.observation}" for label, call in reversed(results)]
    out.append(ChatMessage(role="user", content="\n\n".join([*shown, note])))
    return out


def _reply(turn: Turn) -> str:
    """A turn as the model is reminded of it: its call, without its thought (module
    docstring); a reply that could not be used, as the model wrote it."""
    if not turn.calls:
        return turn.raw or json.dumps({"final_answer": ""})
    call = turn.calls[0]
    return json.dumps({"action": call.name, "arguments": call.arguments}, ensure_ascii=False)


def _result(turn: Turn) -> str:
    if not turn.calls:
        return turn.problem or ""
    return "\n\n".join(f"Result of {c.name}: {c.observation}" for c in turn.calls)


def decide(text: str, *, step: int, cut: bool, follow: JsonStepStream,
           results: Mapping[str, CallRecord] | None = None) -> Decision:
    """What a step's reply decided; ``results``: the labels a step that may only answer
    could name."""
    value = parse_step(text)
    if value is None:
        if cut and follow.open == "final_answer":
            # the model's limit ended it in the middle of the answer, which the client has
            # seen stream: that is the answer, cut (and marked so)
            return Answer(thought=_thought_of(text), answer=_partial_answer(text), cut=True)
        problem = ("your reply was cut off (it reached the step's token limit); keep the "
                   "thought short" if cut else "your reply was not one JSON object")
        return Unusable(thought="", problem=problem, raw=text)
    raw_thought = value.get("thought")
    thought = raw_thought if isinstance(raw_thought, str) else ""
    chosen = (results or {}).get(value.get(ANSWER_FROM))  # type: ignore[arg-type]
    if chosen is not None:
        return Answer(thought=thought, answer=chosen.observation)
    if isinstance(value.get("final_answer"), str):
        if not value["final_answer"].strip():
            return Unusable(thought=thought, raw=text, problem="your final_answer was empty")
        return Answer(thought=thought, answer=value["final_answer"])
    action = value.get("action")
    if isinstance(action, str) and action:
        arguments = value.get("arguments", {})
        return Calls(thought=thought, raw=text, calls=(CallRequest(
            id=f"call_{step + 1}", name=action, arguments=arguments),))
    return Unusable(thought=thought, raw=text,
                    problem="your reply has neither an action nor a final_answer")


def _thought_of(text: str) -> str:
    follow = JsonStepStream()
    return follow.feed(text)[0]


def _partial_answer(text: str) -> str:
    follow = JsonStepStream()
    return follow.feed(text)[1]
