"""``native``: OpenAI's tool calling — the tools as functions with JSON Schema parameters,
``tool_choice``, ``tool_calls`` in the reply, a ``tool`` message answering each call.

The conversation is the ``agent-native`` template as the system message, the question, then
for each step an assistant message with the model's thought and calls and a tool message per
call, in the order of the calls. Several calls in one reply are run together by the loop.
A step that may only answer keeps the tools in the request (the prompt, and the server's
cache of it, stay the same) with ``tool_choice: "none"``. What the model writes as text
streams to the client as the answer; arguments that are not a JSON object are the model's
fault, told to it as that call's result. How each server wants these messages is the
quirk table's business (:mod:`toolmesh.llm.quirks`).
"""

from __future__ import annotations

import json

from toolmesh.agent.strategies.base import (
    PASS_ON,
    WRAP_NOTES,
    Answer,
    CallRequest,
    Calls,
    Decision,
    StepContext,
    Unusable,
)
from toolmesh.agent.strategies.schemas import arguments_schema
from toolmesh.llm.base import ToolCalling
from toolmesh.llm.chat import ChatMessage, ChatRequest, ToolCall, ToolSpec


class NativeCalls:
    """The ``native`` strategy (module docstring)."""

    name: ToolCalling = "native"

    async def step(self, context: StepContext) -> Decision:
        narrator = context.narrator
        tools = tuple(ToolSpec(name=t.name, description=t.info.description,
                               parameters=arguments_schema(t)) for t in context.tools.values())
        request = ChatRequest(
            messages=tuple(messages(context)), tools=tools,
            tool_choice=("none" if context.wrap else "auto") if tools else None,
            max_tokens=context.answer_max_tokens,
            # the calls of a step are bound tightly; its text (the answer) is not
            action_max_tokens=context.max_tokens if context.wrap is None else None,
            temperature=context.temperature, stream=narrator.streaming)
        variables = {"tools": [t.describe() for t in context.tools.values()], "context": ""}
        reply = context.llm.chat(request, id=context.template(self.name), variables=variables,
                                 timeout=context.timeout, workspace=context.workspace)
        await narrator.follow(reply, lambda chunk: ("", chunk))  # text is the answer
        done = reply.completion
        text = done.text if done else ""
        if done is None or not done.tool_calls or context.wrap:
            if not text.strip():
                # llama-cpp-python's chatml-function-calling does this under "auto"
                return Unusable(thought="", problem="your answer was empty: call a tool, or "
                                                    "write the answer")
            return Answer(thought="", answer=text,
                          cut=done is not None and done.finish_reason == "length")
        return Calls(thought=text, calls=tuple(_call(c) for c in done.tool_calls))


def _call(call: ToolCall) -> CallRequest:
    try:
        arguments = json.loads(call.arguments or "{}", strict=False)
    except (json.JSONDecodeError, RecursionError) as e:
        return CallRequest(id=call.id, name=call.name, arguments=call.arguments,
                           problem=f"the arguments are not valid JSON ({e}): "
                                   f"{call.arguments[:200]!r}")
    return CallRequest(id=call.id, name=call.name, arguments=arguments)


def messages(context: StepContext) -> list[ChatMessage]:
    """The conversation after the system message (module docstring)."""
    out = [ChatMessage(role="user", content=context.transcript.question)]
    for turn in context.transcript.shown():
        if not turn.calls:
            out.append(ChatMessage(role="assistant", content=turn.thought))
            out.append(ChatMessage(role="user", content=turn.problem or ""))
            continue
        out.append(ChatMessage(role="assistant", content=turn.thought, tool_calls=tuple(
            ToolCall(id=c.id, name=c.name, arguments=json.dumps(c.arguments, ensure_ascii=False)
                     if not isinstance(c.arguments, str) else c.arguments)
            for c in turn.calls)))
        for c in turn.calls:
            out.append(ChatMessage(role="tool", tool_call_id=c.id,
                                   content=f"Result of {c.name}: {c.observation}"))
    if context.wrap is not None:
        out.append(ChatMessage(role="user", content=WRAP_NOTES[context.wrap] + PASS_ON))
    return out
