"""The reply parser as it was before it became incremental (git 6cabbb4), verbatim below this
docstring: the oracle the tests compare the incremental parser with. Not used by the code."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_FENCE = re.compile(r"^\s*```[\w-]*\s*$", re.M)
_LABEL = re.compile(r"^[ \t*]*(Thought|Action|Args|Final Answer|Observation)[ \t*]*:[ \t]?", re.M | re.I)


@dataclass(frozen=True, slots=True)
class Action:
    """The LLM picked a tool."""

    thought: str
    name: str
    arguments: Any = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    thought: str
    answer: str


@dataclass(frozen=True, slots=True)
class ParseFailure:
    """The reply is not in the protocol; ``problem`` tells the LLM what to fix."""

    thought: str
    problem: str


Reply = Action | FinalAnswer | ParseFailure


def _unwrap(text: str) -> str:
    """The reply without a code fence wrapped around all of it (fences inside are kept:
    an answer may contain code)."""
    lines = text.strip().splitlines()
    if len(lines) >= 2 and _FENCE.match(lines[0]) and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1])
    if lines and _FENCE.match(lines[0]) and text.count("```") == 1:
        return "\n".join(lines[1:])  # an opening fence still streaming, or never closed
    return text


def _sections(text: str) -> list[tuple[str, str]]:
    """``[(label, body)]`` in order; text before the first label counts as a thought."""
    found = list(_LABEL.finditer(text))
    sections: list[tuple[str, str]] = []
    head = text[: found[0].start()].strip() if found else text.strip()
    if head:
        sections.append(("thought", head))
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        sections.append((m.group(1).lower(), text[m.end():end]))
    return sections


def parse_reply(text: str) -> Reply:
    """Parse one complete reply."""
    text = _unwrap(text)
    sections = _sections(text)
    thought = "\n".join(b.strip() for label, b in sections if label == "thought").strip()
    labels = [label for label, _ in sections]
    if "final answer" in labels:
        i = labels.index("final answer")
        # The answer is everything after the label, later labels included: an answer may
        # legitimately say "Action:" in its text.
        answer_start = _find_label_end(text, "Final Answer")
        answer = text[answer_start:] if answer_start is not None else sections[i][1]
        return FinalAnswer(thought, answer.strip())
    if "action" not in labels:
        return ParseFailure(thought, "the reply has neither 'Action:' nor 'Final Answer:'")
    name = sections[labels.index("action")][1].strip().splitlines()
    tool = name[0].strip().strip("`'\"*") if name else ""
    if not tool:
        return ParseFailure(thought, "'Action:' names no tool")
    if "args" not in labels:
        return Action(thought, tool, {})
    raw = _FENCE.sub("", sections[labels.index("args")][1]).strip()
    if not raw:
        return Action(thought, tool, {})
    try:
        start = next(i for i, c in enumerate(raw) if c in "{[\"0123456789-tfn")
        value, _ = json.JSONDecoder().raw_decode(raw[start:])
    except (StopIteration, json.JSONDecodeError) as e:
        return ParseFailure(thought, f"the Args of {tool!r} are not valid JSON ({e}): {raw[:200]!r}")
    return Action(thought, tool, value)


def _find_label_end(text: str, label: str) -> int | None:
    for m in _LABEL.finditer(text):
        if m.group(1).lower() == label.lower():
            return m.end()
    return None


_LABELS = ("thought:", "action:", "args:", "final answer:", "observation:")


def _could_become_label(line: str) -> bool:
    probe = line.lstrip(" \t*").lower()
    return bool(probe) and any(label.startswith(probe) for label in _LABELS)


def _views(text: str) -> tuple[str, str]:
    """``(thought, answer)`` of a reply, complete or not."""
    reply = parse_reply(text)
    return reply.thought, reply.answer if isinstance(reply, FinalAnswer) else ""


class StreamingParser:
    """Follows a reply as it streams and says which new text is thought and which is answer.

    :meth:`feed` returns ``(thought_delta, answer_delta)`` for the text that is settled: a
    last line that could still grow into a label (``"Final Ans"``) is held back until the
    next chunk decides it. Thought and answer are stripped views of the text so far, and a
    stripped view of a longer text always extends the shorter one's, so the deltas join to
    exactly the thought and answer of :meth:`finish`'s complete parse.
    """

    def __init__(self) -> None:
        self.text = ""
        self._thought = ""
        self._answer = ""

    def feed(self, chunk: str) -> tuple[str, str]:
        self.text += chunk
        settled = self.text
        tail = settled[settled.rfind("\n") + 1:]
        if _could_become_label(tail):
            settled = settled[: len(settled) - len(tail)]
        return self._deltas(*_views(settled))

    def finish(self) -> tuple[str, str, Reply]:
        """The last deltas and the complete parse."""
        reply = parse_reply(self.text)
        thought_delta, answer_delta = self._deltas(*_views(self.text))
        return thought_delta, answer_delta, reply

    def _deltas(self, thought: str, answer: str) -> tuple[str, str]:
        # A view that does not extend what was sent (a later label reshaped the reply) sends
        # nothing more rather than something contradictory.
        thought_delta = thought[len(self._thought):] if thought.startswith(self._thought) else ""
        answer_delta = answer[len(self._answer):] if answer.startswith(self._answer) else ""
        self._thought += thought_delta
        self._answer += answer_delta
        return thought_delta, answer_delta
