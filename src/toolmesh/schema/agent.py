"""Agent wire messages, TrustGraph's shapes (docs/api.md).

Request: ``{"question", "state"?, "group"?, "history"?: [{"thought", "action", "arguments",
"observation"}], "user"?, "streaming"?}``.

Response messages: ``{"message_type": "thought"|"observation"|"answer"|"error", "content",
"end_of_message", "end_of_dialog", "message_id", "error"}``; the final answer also carries
``"answer"`` (the whole answer) for older clients. The dialog's last message (``end_of_dialog``)
carries its token usage, as TrustGraph's does: ``"in_token"`` and ``"out_token"`` summed over
every LLM answer of the dialog (``null`` when the LLM reported none) and the last
``"model"``; and toolmesh's own ``"tool_calls"`` (how many tool calls ran) and ``"tool_time"``
(the seconds they took, summed). ``"tool-call"`` messages (the tool a step calls, with ``tool`` and ``arguments``,
sent before it runs; see :mod:`toolmesh.agent.action`) and ``"progress"`` messages (a tool's
progress report, with a ``progress`` object; see :mod:`toolmesh.agent.progress`) are
toolmesh's own: TrustGraph's clients skip types they do not know.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from toolmesh.errors import ServiceError
from toolmesh.schema.json_object import json_object

MessageType = Literal["thought", "tool-call", "observation", "answer", "error", "progress",
                      "approval-request", "elicitation-request", "approval-answer", "offer"]

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
    #: the toolmesh identity that asked, as the gateway stamped it (``actor``; a client's own
    #: is overwritten): whose sign-ins the dialog's MCP calls use. ``None``: not through it
    actor: str | None = None


def _bad(message: str) -> ServiceError:
    return ServiceError(message, type="bad-request")


def parse_request(body: Mapping[str, Any]) -> AgentRequest:
    """The request ``body`` describes, or a ``bad-request`` :class:`ServiceError` naming the
    field that is wrong. An absent field, ``null`` and ``""`` mean the default; any other value
    of the wrong type is refused, never coerced (a client sending ``"state": {}`` has a bug)."""
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        raise _bad("an agent request needs 'question' (a non-empty string)")
    state = _optional_string(body, "state")
    group = body.get("group")
    if isinstance(group, str):
        group = [group]
    if group is not None and not (isinstance(group, list) and all(isinstance(g, str) for g in group)):
        raise _bad("'group' must be a list of strings")
    history = body.get("history")
    if history is None:
        history = []
    if not isinstance(history, list):
        raise _bad(f"'history' must be a list of steps {{thought, action, arguments, "
                   f"observation}}, not {_type_name(history)}")
    user = _optional_string(body, "user") or DEFAULT_USER
    streaming = body.get("streaming")
    if streaming is not None and not isinstance(streaming, bool):
        raise _bad(f"'streaming' must be true or false, not {_type_name(streaming)}")
    actor = body.get("actor")
    return AgentRequest(question=question, state=state, groups=tuple(group) if group else None,
                        history=tuple(_step(i, raw) for i, raw in enumerate(history)), user=user,
                        streaming=bool(streaming),
                        actor=actor if isinstance(actor, str) and actor else None)


def _step(i: int, raw: Any) -> Step:
    where = f"history[{i}]"
    if not isinstance(raw, dict):
        raise _bad(f"{where} must be an object with thought, action, arguments, observation, "
                   f"not {_type_name(raw)}")
    try:
        arguments = json_object(raw.get("arguments"), name=f"'{where}.arguments'")
    except ValueError as e:
        raise _bad(str(e)) from None
    return Step(thought=_optional_string(raw, "thought", where=where) or "",
                action=_optional_string(raw, "action", where=where) or "",
                arguments=arguments,
                observation=_optional_string(raw, "observation", where=where) or "")


def _optional_string(body: Mapping[str, Any], name: str, *, where: str = "") -> str | None:
    """``body[name]``: a string, or ``None`` when absent, ``null`` or ``""``."""
    value = body.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        field_name = f"{where}.{name}" if where else name
        raise _bad(f"{field_name!r} must be a string, not {_type_name(value)}")
    return value


def _type_name(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "an array", str: "a string", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


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
