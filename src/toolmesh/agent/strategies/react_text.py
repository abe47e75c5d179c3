"""``react``: TrustGraph's text protocol, as the agent has always spoken it.

The step is the ``agent-react`` template (a workspace may replace it) rendered with the
question, the offered tools and the steps so far, and the reply is parsed as ``Thought:`` then
``Action:``/``Args:`` or ``Final Answer:`` (:mod:`toolmesh.agent.parser`). Any model follows it
in principle; nothing constrains the reply, so the step is bounded instead: ``max_tokens``, and
a stop sequence at ``Observation:`` (a model that goes on to invent the tool's answer stops
there). A step that may only answer is shown no tools.
"""

from __future__ import annotations

from typing import Any

from toolmesh.agent.parser import Action, FinalAnswer, Reply
from toolmesh.agent.strategies.base import (
    PASS_ON,
    WRAP_NOTES,
    Answer,
    CallRequest,
    Calls,
    Decision,
    StepContext,
    Unusable,
    limits,
)
from toolmesh.agent.streaming import StreamingParser
from toolmesh.llm.base import ToolCalling

#: where a reply that goes on past its action is cut
STOP = ("\nObservation:",)
#: where a reply turns out to be an answer
ANSWER_MARKER = "Final Answer:"

PROTOCOL_HINT = ("Reply with 'Thought:' and then either 'Action:' with the tool name and "
                 "'Args:' with a JSON object, or 'Final Answer:'.")


class ReactText:
    """The ``react`` strategy (module docstring)."""

    name: ToolCalling = "react"

    async def step(self, context: StepContext) -> Decision:
        tools = [] if context.wrap else [t.describe() for t in context.tools.values()]
        variables = {"question": context.transcript.question,
                     "context": WRAP_NOTES[context.wrap] + PASS_ON if context.wrap else "",
                     "tools": tools,
                     "history": [s.to_wire() for s in context.transcript.steps()]}
        template = context.template(self.name)
        options: dict[str, Any] = {"timeout": context.timeout, "workspace": context.workspace,
                                   "limits": limits(context, stop=STOP,
                                                    answer_marker=ANSWER_MARKER)}
        narrator = context.narrator
        parser = StreamingParser()
        stream = context.llm.stream(template, variables, **options)
        # streamed even when the client is not: a whole reply is the pieces joined, and the
        # stream says why it ended (an answer cut by the model's limit is marked so)
        await narrator.follow(stream, parser.feed)
        *_, reply = parser.finish()
        done = getattr(stream, "completion", None)
        return _decision(reply, len(context.transcript.turns),
                         cut=done is not None and done.finish_reason == "length")


def _decision(reply: Reply, step: int, *, cut: bool = False) -> Decision:
    if isinstance(reply, FinalAnswer):
        return Answer(thought=reply.thought, answer=reply.answer, cut=cut)
    if isinstance(reply, Action):
        return Calls(thought=reply.thought, calls=(CallRequest(
            id=f"call_{step + 1}", name=reply.name, arguments=reply.arguments),))
    return Unusable(thought=reply.thought,
                    problem=f"your reply could not be parsed: {reply.problem}. {PROTOCOL_HINT}")
