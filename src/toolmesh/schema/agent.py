"""Agent wire messages (SPEC §5), TrustGraph's shapes.

Request: ``{"question", "state"?, "group"?, "history"?: [{"thought", "action", "arguments",
"observation"}], "user"?, "streaming"?}``.

Response messages: ``{"message_type": "thought"|"observation"|"answer"|"error", "content",
"end_of_message", "end_of_dialog", "message_id", "error"}``; the final answer also carries
``"answer"`` (the whole answer) for older clients.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from toolmesh.errors import ServiceError

MessageType = Literal["thought", "observation", "answer", "error"]

DEFAULT_USER = "trustgraph"


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One ReAct step, as the history carries it."""

    thought: str = ""
    action: str = ""
    arguments: Any = field(default_factory=dict)
    observation: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"thought": self.thought, "action": self.action, "arguments": self.arguments,
                "observation": self.observation}


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRequest:
    question: str
    state: str | None = None
    groups: tuple[str, ...] | None = None
    history: tuple[Step, ...] = ()
    user: str = DEFAULT_USER
    streaming: bool = False


def _bad(message: str) -> ServiceError:
    return ServiceError(message, type="bad-request")


def parse_request(body: Mapping[str, Any]) -> AgentRequest:
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        raise _bad("an agent request needs 'question' (a non-empty string)")
    state = body.get("state") or None
    if state is not None and not isinstance(state, str):
        raise _bad("'state' must be a string")
    group = body.get("group")
    if isinstance(group, str):
        group = [group]
    if group is not None and not (isinstance(group, list) and all(isinstance(g, str) for g in group)):
        raise _bad("'group' must be a list of strings")
    history = []
    for i, raw in enumerate(body.get("history") or []):
        if not isinstance(raw, dict):
            raise _bad(f"history[{i}] must be an object with thought, action, arguments, observation")
        history.append(Step(thought=str(raw.get("thought") or ""), action=str(raw.get("action") or ""),
                            arguments=raw.get("arguments") or {},
                            observation=str(raw.get("observation") or "")))
    user = body.get("user") or DEFAULT_USER
    if not isinstance(user, str):
        raise _bad("'user' must be a string")
    return AgentRequest(question=question, state=state, groups=tuple(group) if group else None,
                        history=tuple(history), user=user, streaming=bool(body.get("streaming")))


def message(message_type: MessageType, content: str, *, message_id: str,
            end_of_message: bool = True, end_of_dialog: bool = False,
            error: Mapping[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"message_type": message_type, "content": content, "end_of_message": end_of_message,
            "end_of_dialog": end_of_dialog, "message_id": message_id,
            "error": dict(error) if error else None, **extra}


def new_message_id() -> str:
    return str(uuid.uuid4())


def is_final(response: Mapping[str, Any]) -> bool:
    """The last message of a dialog."""
    return bool(response.get("end_of_dialog"))
