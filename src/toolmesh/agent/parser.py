"""Parsing the LLM's reply in TrustGraph's ReAct text protocol.

A reply is either ::

    Thought: <reasoning>
    Action: <tool name>
    Args: {"json": "object"}

or ::

    Thought: <reasoning>
    Final Answer: <answer, newlines kept>

Markdown code fences around the reply or the Args are tolerated. Anything else is a
:class:`ParseFailure`, which the agent turns into an observation so the LLM can try again.
"""

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
    an answer may contain code).

    The opening fence line goes even when no closing one follows (a reply still streaming,
    or the model forgot it); the last line goes when it is a bare fence. Lines are split at
    ``\n`` only, exactly as :class:`~toolmesh.agent.streaming.StreamingParser` splits them,
    so a reply parsed whole and the same reply followed chunk by chunk agree.
    """
    stripped = text.strip()
    first, _, body = stripped.partition("\n")
    if not _FENCE.match(first):
        return text
    cut = body.rfind("\n")
    if body[cut + 1:].strip() == "```":
        return body[:max(cut, 0)]
    return body


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
    labels = [label for label, _ in sections]
    # Thought sections after "Final Answer:" are the answer's own text, not thought.
    end = labels.index("final answer") if "final answer" in labels else len(sections)
    thought = "\n".join(b.strip() for label, b in sections[:end] if label == "thought").strip()
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
