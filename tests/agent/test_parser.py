"""The ReAct reply parser, whole and streaming."""

from __future__ import annotations

import pytest

from toolmesh.agent.parser import Action, FinalAnswer, ParseFailure, parse_reply
from toolmesh.agent.streaming import StreamingParser


@pytest.mark.parametrize(("text", "expected"), [
    ('Thought: I need a joke.\nAction: tell-joke\nArgs: {"topic": "food"}',
     Action("I need a joke.", "tell-joke", {"topic": "food"})),
    ('Thought: t\nAction: `tell-joke`\nArgs:\n```json\n{"topic": "ü"}\n```',
     Action("t", "tell-joke", {"topic": "ü"})),
    ('```\nThought: t\nAction: x\nArgs: {"a": [1, 2]}\n```', Action("t", "x", {"a": [1, 2]})),
    ("Thought: no args needed\nAction: clock", Action("no args needed", "clock", {})),
    ('Thought: t\nAction: x\nArgs: {"a": 1}\nObservation: made up by the model',
     Action("t", "x", {"a": 1})),
    ("Thought: done\nFinal Answer: line one\nline two\n\n  indented",
     FinalAnswer("done", "line one\nline two\n\n  indented")),
    ("Thought: t\nFinal Answer: Use this:\n```python\nprint('Action: no')\n```",
     FinalAnswer("t", "Use this:\n```python\nprint('Action: no')\n```")),
    ("final answer: lower case works", FinalAnswer("", "lower case works")),
])
def test_replies_in_the_protocol(text: str, expected: object) -> None:
    assert parse_reply(text) == expected


@pytest.mark.parametrize(("text", "problem"), [
    ("I think the answer is 4", "neither 'Action:' nor 'Final Answer:'"),
    ("Thought: t\nAction:\nArgs: {}", "names no tool"),
    ('Thought: t\nAction: x\nArgs: {"a": 1,}', "the Args of 'x' are not valid JSON"),
    ("Thought: t\nAction: x\nArgs: {'a': 1}", "not valid JSON"),
])
def test_replies_outside_the_protocol(text: str, problem: str) -> None:
    reply = parse_reply(text)
    assert isinstance(reply, ParseFailure) and problem in reply.problem


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 1000])
@pytest.mark.parametrize("text", [
    "Thought: Let me think about it.\nFinal Answer: Here is\nthe answer: 42.\n",
    'Thought: Use the tool.\nAction: tell-joke\nArgs: {"topic": "x"}',
    "Thought: multi\nline thought\nFinal Answer: a\n\nb",
    "Final Answer: no thought at all",
])
def test_streamed_deltas_join_to_the_complete_parse(text: str, size: int) -> None:
    parser = StreamingParser()
    thought = answer = ""
    for i in range(0, len(text), size):
        t, a = parser.feed(text[i:i + size])
        assert "Action" not in t and "Final" not in t  # labels never leak into the thought
        thought, answer = thought + t, answer + a
    t, a, reply = parser.finish()
    thought, answer = thought + t, answer + a
    assert reply == parse_reply(text)
    assert thought == reply.thought
    assert answer == (reply.answer if isinstance(reply, FinalAnswer) else "")
