"""The streaming reply parser: whatever the chunking, it says what the whole reply says, what
the parser before it said, and it looks at each character a bounded number of times."""

from __future__ import annotations

import json
from dataclasses import astuple
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.agent import reference_parser as before
from toolmesh.agent.parser import FinalAnswer, ParseFailure, parse_reply
from toolmesh.agent.streaming import StreamingParser

LABELS = ["Thought", "Action", "Args", "Final Answer", "Observation"]


def chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in pairwise(points)]


def stream(chunks: list[str]) -> tuple[str, str, Any, list[tuple[str, str]]]:
    """Joined thought, joined answer, the final reply, and what was out after each chunk."""
    parser = StreamingParser()
    thought = answer = ""
    progress = []
    for chunk in chunks:
        t, a = parser.feed(chunk)
        thought, answer = thought + t, answer + a
        progress.append((thought, answer))
    t, a, reply = parser.finish()
    return thought + t, answer + a, reply, progress


def views(reply: Any) -> tuple[str, str]:
    final = isinstance(reply, (FinalAnswer, before.FinalAnswer))
    return reply.thought, reply.answer if final else ""


def same(reply: Any) -> tuple[str, tuple[Any, ...]]:
    """A reply of either parser, comparable with the other's."""
    return type(reply).__name__, astuple(reply)


# -- any text: the stream agrees with the complete parse -------------------------------------

PIECES = [*LABELS, "final answer", "ARGS", "thoughts", "Fin", "Thou", ":", ": ", " ", "\t", "*",
          "**", "\n", "\n", "\n\n", "\r\n", "`", "``", "```", "```json", "{", "}", '"a"', "x",
          "é", "42", "tell-joke", "\u2028", "\x0b"]
soup = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=5)), max_size=40).map("".join)
cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=30)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=soup, cuts=cuts)
def test_any_chunking_of_any_text_joins_to_the_complete_parse(text: str, cuts: list[int]) -> None:
    thought, answer, reply, progress = stream(chunked(text, cuts))
    assert reply == parse_reply(text)
    assert (thought, answer) == views(reply)
    # nothing said is ever taken back: what is out after a chunk begins what is out at the end
    assert all(thought.startswith(t) and answer.startswith(a) for t, a in progress)


# -- replies in the protocol: as the parser before said --------------------------------------

words = st.sampled_from(["I", "need", "the", "tool", "Action", "items:", "answer", "`x`", "42",
                         "é", "**bold**", "x:", "{", "}"])
#: a line of prose; one that starts with a label's name, or with the stars of a bold label
#: ("**Thought:**"), is held back until its end shows it is no label (the parser before sent a
#: leading "*" at once, and so sent bold labels as thought)
prose = st.lists(words, min_size=1, max_size=6).map(" ".join).filter(
    lambda line: not line.startswith("*")
    and not any(line.lower().startswith(n.lower()) for n in LABELS))
answer_line = st.one_of(prose, st.just(""), st.sampled_from([
    "Action: not really", "Args: {}", "Observation: quoted", "```python", "```", "  indented",
    "Final Answer: twice"]))


@st.composite
def protocol_replies(draw: st.DrawFn) -> str:
    thought = "\n".join(draw(st.lists(prose, min_size=1, max_size=3)))
    label = draw(st.sampled_from(["Thought: ", "Thought:", "**Thought:** ", "thought: ", ""]))
    if draw(st.booleans()):
        answer = "\n".join(draw(st.lists(answer_line, min_size=1, max_size=6)))
        body = f"{label}{thought}\nFinal Answer: {answer}"
    else:
        name = draw(st.sampled_from(["tell-joke", "`clock`", "x"]))
        args = json.dumps(draw(st.dictionaries(st.sampled_from(["topic", "n"]),
                                               st.one_of(st.integers(), st.text(max_size=4)),
                                               max_size=2)))
        args = draw(st.sampled_from([f"Args: {args}", f"Args:\n```json\n{args}\n```", ""]))
        body = f"{label}{thought}\nAction: {name}\n{args}"
    fence = draw(st.sampled_from(["", "```", "```json"]))
    return f"{fence}\n{body}\n```" if fence else body


@settings(max_examples=600, deadline=None)
@given(text=protocol_replies(), cuts=cuts)
def test_replies_in_the_protocol_read_as_they_did_before(text: str, cuts: list[int]) -> None:
    chunks = chunked(text, cuts)
    thought, answer, reply, progress = stream(chunks)
    assert same(parse_reply(text)) == same(reply) == same(before.parse_reply(text))
    assert (thought, answer) == views(before.parse_reply(text))
    if not text.startswith(("`", "*")):
        # ...and each piece comes out no later than it did. Not compared chunk by chunk: a
        # reply that begins with what may be a fence or the stars of "**Thought:**" (the parser
        # before sent such a start as thought when a chunk ended there; this one waits for
        # the rest of the line)
        old = before.StreamingParser()
        old_thought = old_answer = ""
        for chunk, (new_thought, new_answer) in zip(chunks, progress):
            t, a = old.feed(chunk)
            old_thought, old_answer = old_thought + t, old_answer + a
            assert new_thought.startswith(old_thought) and new_answer.startswith(old_answer)


def test_a_fenced_reply_streamed_character_by_character() -> None:
    # the parser before sent "``" as thought here, and "a\n``" as the answer
    text = "```\nThought: t\nFinal Answer: a\n```"
    assert stream(list(text))[:2] == ("t", "a")


def test_what_changed_on_purpose() -> None:
    # a "Thought:" line inside the answer is the answer's text, not more thought
    text = "Thought: t\nFinal Answer: the format is\nThought: x"
    assert parse_reply(text) == FinalAnswer("t", "the format is\nThought: x")
    assert before.parse_reply(text).thought == "t\nx"
    # a wrapping fence left open is dropped even when the answer holds a fence of its own
    text = "```\nThought: t\nFinal Answer: run\n```sh\nls"
    assert parse_reply(text) == FinalAnswer("t", "run\n```sh\nls")
    assert before.parse_reply(text).thought == "```\nt"


def test_labels_may_be_split_anywhere() -> None:
    text = "**Thought** : a\nAction : x\nArgs :{}"
    for size in range(1, len(text) + 1):
        thought, answer, reply, _ = stream([text[i:i + size] for i in range(0, len(text), size)])
        assert (thought, answer) == ("a", "") and reply == parse_reply(text)
        assert not isinstance(reply, ParseFailure)


# -- the work is linear -----------------------------------------------------------------------

LINE = "The quick brown fox jumps over the lazy dog: it does so again. "
TEXTS = {
    "a 1 MB answer in lines": "Thought: t\nFinal Answer: " + "\n".join([LINE * 2] * 8_000),
    "a 1 MB answer on one line": "Thought: t\nFinal Answer: " + LINE * 16_000,
    "a 1 MB thought in lines": "\n".join([LINE * 2] * 8_000) + "\nAction: x",
    "a fenced 1 MB answer": "```\nThought: t\nFinal Answer: " + "\n".join([LINE] * 16_000)
                            + "\n```",
    # pathological: lines that stay undecided for long
    "spaces before labels": "\n".join([" " * 5_000 + "Thought: x"] * 20),
    "a long run of stars": "*" * 100_000 + "Thought: x",
    "a long opening fence": "```" + "a" * 100_000 + "\nFinal Answer: y",
    "whitespace": "Thought:" + " \t" * 50_000 + "x",
}


def test_each_character_is_looked_at_a_bounded_number_of_times() -> None:
    for name, text in TEXTS.items():
        for size in (1, 7, 1000):
            if size == 1 and len(text) > 250_000:
                continue  # a million one-character feeds take long; 7 shows the same
            chunks = [text[i:i + size] for i in range(0, len(text), size)]
            parser = StreamingParser()
            for chunk in chunks:
                parser.feed(chunk)
            parser.finish()
            # The parser before re-read the whole text on every chunk: for 1 MB in 1,000-
            # character chunks, half a billion characters. A short undecided line is looked at
            # again on each chunk, hence the per-chunk allowance.
            assert parser.scanned <= 4 * len(text) + 64 * len(chunks), (name, size)
