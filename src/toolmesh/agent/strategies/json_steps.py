"""``json``: every step is one JSON object that a schema built from the offered tools
constrains, so every reply parses — the strategy for models and servers without native tool
calls that can follow a grammar (llama.cpp, vLLM, Ollama, OpenAI's structured outputs).

The conversation is the ``agent-json`` template (the tools and how to reply) as the system
message, the question as the user's, then for each step the model's call as the assistant's
and what the tool returned as the user's: every step's prompt begins with the previous one,
so the server's prompt cache is reused. The model's earlier thoughts are not sent back (the
call is, with an empty thought): measured on a small model, it copies its own earlier
thoughts into its answer instead of the tool's result — and OpenAI's reasoning models are
not shown their earlier reasoning either. The schema (:mod:`.schemas`) has one branch per
tool and one for the answer; a step that may only answer is asked for ``final_answer``
alone — or for which of the dialog's results is the answer, passed on as the tool returned
it: measured on a small model, picking one of a few labels is reliable where retyping a
result word for word is not. That step is shown the question and the results alone, without
the calls that led to them (with them, the small model copies the shape of its own calls
again). The thought and the final answer stream to the client as they are written
(:mod:`.json_stream`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
from toolmesh.agent.strategies.schemas import (
    ANSWER_FROM,
    answer_alone,
    relaxed,
    step_schema,
)
from toolmesh.agent.transcript import CallRecord, Turn
from toolmesh.errors import RequestError
from toolmesh.llm.base import ToolCalling
from toolmesh.llm.chat import ChatMessage, ChatRequest

#: the error type a text-completion service gives a request the LLM's server refused
REFUSED = "llm-refused"


class JsonSteps:
    """The ``json`` strategy (module docstring)."""

    name: ToolCalling = "json"

    async def step(self, context: StepContext) -> Decision:
        if context.wrap is not None:
            results = context.transcript.results()
            return await self._ask(context, answer_alone([label for label, _ in results]),
                                   wrap_messages(context, results), dict(results))
        results = context.transcript.results()
        schema = step_schema(context.tools.values(), [label for label, _ in results])
        try:
            return await self._ask(context, schema, messages(context), dict(results))
        except RequestError as e:
            # a tool's schema the server cannot turn into a grammar: ask once more with
            # each tool's arguments as just "an object" (they are checked before the call)
            if e.type != REFUSED or schema == relaxed(schema):
                raise
            return await self._ask(context, relaxed(schema), messages(context), dict(results))

    async def _ask(self, context: StepContext, schema: dict[str, Any],
                   conversation: list[ChatMessage],
                   results: dict[str, CallRecord]) -> Decision:
        narrator = context.narrator
        request = ChatRequest(messages=tuple(conversation), response_schema=schema,
                              max_tokens=context.max_tokens, temperature=context.temperature,
                              stream=narrator.streaming)
        # a step that may only answer is shown no tools (nor how to call them)
        variables = {"tools": [{**t.describe(), "parameters": t.parameters()}
                               for t in context.tools.values()] if context.wrap is None else [],
                     "context": ""}
        reply = context.llm.chat(request, id=context.template(self.name), variables=variables,
                                 timeout=context.timeout, workspace=context.workspace)
        follow = JsonStepStream()
        await narrator.follow(reply, follow.feed)
        done = reply.completion
        text = done.text if done else ""
        return decide(text, step=len(context.transcript.turns),
                      cut=done is not None and done.finish_reason == "length", follow=follow,
                      results=results)


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
        return turn.raw or json.dumps({"thought": ""})
    call = turn.calls[0]
    return json.dumps({"thought": "", "action": call.name, "arguments": call.arguments},
                      ensure_ascii=False)


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
            # max_tokens ended it in the middle of the answer, which the client has seen
            # stream: that is the answer, cut
            return Answer(thought=_thought_of(text), answer=_partial_answer(text))
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
