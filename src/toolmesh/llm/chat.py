"""The chat-request seam: what the agent asks an LLM for one step, and what comes back.

A :class:`ChatRequest` carries a conversation (:class:`ChatMessage`), the tools the model may
call (:class:`ToolSpec`, each with the JSON Schema of its arguments), how it must choose among
them (``tool_choice``), an optional JSON Schema its reply must match (``response_schema``,
sent in each server's structured-output form) and the step's limits (``max_tokens``, ``stop``,
``temperature``). The answer is a :class:`~toolmesh.llm.base.Completion`: the text, and the
:class:`ToolCall` s of a reply that calls tools.

These types are neutral: how OpenAI, llama-cpp-python, Ollama or vLLM want them on their wire
is :mod:`toolmesh.llm.quirks`' business. On the bus they travel as plain JSON
(:func:`request_to_wire` / :func:`request_from_wire`), beside TrustGraph's ``{system,
prompt}`` requests, which stay as they are::

    {"messages": [{"role": "system" | "user" | "assistant" | "tool", "content": "...",
                   "tool_calls"?: [{"id", "name", "arguments"}], "tool_call_id"?: "..."}],
     "tools"?: [{"name", "description", "parameters"}],
     "tool_choice"?: "auto" | "required" | "none" | {"name": "..."},
     "response_schema"?: {...}, "max_tokens"?: int, "stop"?: [str], "temperature"?: float,
     "action_max_tokens"?: int, "answer_marker"?: str, "streaming": bool}

``action_max_tokens`` bounds a reply that calls tools (or has not reached ``answer_marker``
yet), ``max_tokens`` an answer: a step's actions are held short, its answer is not cut.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolmesh.errors import ServiceError

Role = Literal["system", "user", "assistant", "tool"]
ToolChoice = Literal["auto", "required", "none"] | str
"""``auto``, ``required``, ``none``, or the name of the one tool the model must call."""

ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
CHOICES: tuple[str, ...] = ("auto", "required", "none")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One call of a tool in a model's reply; ``arguments`` is the JSON text the model wrote
    (it may not parse: that is the model's fault, and the agent tells it so)."""

    id: str
    name: str
    arguments: str = "{}"

    def to_wire(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as the model is shown it: name, description, JSON Schema of its arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object",
                                                                   "properties": {}})

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "parameters": dict(self.parameters)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One message of a conversation."""

    role: Role
    content: str = ""
    #: an assistant message's tool calls
    tool_calls: tuple[ToolCall, ...] = ()
    #: a ``tool`` message answers the call with this id
    tool_call_id: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_wire() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """One step's request (module docstring). ``stream``: whether the answer is wanted piece
    by piece (providers may stream either way)."""

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    #: the JSON Schema the reply's text must match (structured output); ``None``: free text
    response_schema: Mapping[str, Any] | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    temperature: float | None = None
    stream: bool = False
    #: the most tokens a reply that is not an answer may take (``None``: ``max_tokens``
    #: alone): tool calls, and text before ``answer_marker`` when one is given. A step that
    #: may call tools is bound tightly this way, its answer by ``max_tokens``
    action_max_tokens: int | None = None
    #: where the answer begins in the reply's text (``"final_answer"``, ``Final Answer:``);
    #: ``None``: the reply's text is the answer, and only its tool calls are actions
    answer_marker: str | None = None

    @classmethod
    def of_prompt(cls, system: str, prompt: str, **options: Any) -> ChatRequest:
        """The chat form of TrustGraph's ``{system, prompt}``."""
        messages = (ChatMessage(role="system", content=system),) if system else ()
        return cls(messages=(*messages, ChatMessage(role="user", content=prompt)), **options)


# --- the bus wire -------------------------------------------------------------------------


def request_to_wire(request: ChatRequest) -> dict[str, Any]:
    """``request`` as the text-completion service's chat request (module docstring)."""
    out: dict[str, Any] = {"messages": [m.to_wire() for m in request.messages],
                           "streaming": request.stream}
    if request.tools:
        out["tools"] = [t.to_wire() for t in request.tools]
    if request.tool_choice is not None:
        out["tool_choice"] = (request.tool_choice if request.tool_choice in CHOICES
                              else {"name": request.tool_choice})
    if request.response_schema is not None:
        out["response_schema"] = dict(request.response_schema)
    out.update(limits_to_wire(max_tokens=request.max_tokens, stop=request.stop,
                              temperature=request.temperature,
                              action_max_tokens=request.action_max_tokens,
                              answer_marker=request.answer_marker))
    return out


def limits_to_wire(*, max_tokens: int | None, stop: Sequence[str],
                   temperature: float | None, action_max_tokens: int | None = None,
                   answer_marker: str | None = None) -> dict[str, Any]:
    """The limit fields a request carries (only those that are set)."""
    out: dict[str, Any] = {}
    if max_tokens is not None:
        out["max_tokens"] = max_tokens
    if stop:
        out["stop"] = list(stop)
    if temperature is not None:
        out["temperature"] = temperature
    if action_max_tokens is not None:
        out["action_max_tokens"] = action_max_tokens
    if answer_marker is not None:
        out["answer_marker"] = answer_marker
    return out


def is_chat_request(body: Mapping[str, Any]) -> bool:
    """Whether a text-completion request is the chat form (it has ``messages``)."""
    return body.get("messages") is not None


def request_from_wire(body: Mapping[str, Any]) -> ChatRequest:
    """The :class:`ChatRequest` a chat request on the bus describes; a ``malformed-request``
    :class:`ServiceError` naming the field that is wrong."""
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _bad("'messages' must be a non-empty list of {role, content} objects")
    messages = tuple(_message(i, m) for i, m in enumerate(raw))
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise _bad("'tools' must be a list of {name, description, parameters} objects")
    specs = tuple(_tool(i, t) for i, t in enumerate(tools))
    choice = _tool_choice(body.get("tool_choice"), {t.name for t in specs})
    schema = body.get("response_schema")
    if schema is not None and not isinstance(schema, dict):
        raise _bad("'response_schema' must be a JSON Schema object")
    streaming = body.get("streaming", False)
    if not isinstance(streaming, bool):
        raise _bad("'streaming' must be true or false")
    return ChatRequest(messages=messages, tools=specs, tool_choice=choice,
                       response_schema=schema, stream=streaming, **limits_from_wire(body))


def limits_from_wire(body: Mapping[str, Any]) -> dict[str, Any]:
    """``max_tokens``, ``stop``, ``temperature``, ``action_max_tokens`` and ``answer_marker``
    of a request (any form), checked."""
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                   or max_tokens < 1):
        raise _bad("'max_tokens' must be a positive integer")
    action = body.get("action_max_tokens")
    if action is not None and (not isinstance(action, int) or isinstance(action, bool)
                               or action < 1):
        raise _bad("'action_max_tokens' must be a positive integer")
    marker = body.get("answer_marker")
    if marker is not None and (not isinstance(marker, str) or not marker):
        raise _bad("'answer_marker' must be a non-empty string")
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise _bad("'stop' must be a list of non-empty strings")
    temperature = body.get("temperature")
    if temperature is not None and (not isinstance(temperature, (int, float))
                                    or isinstance(temperature, bool) or not temperature >= 0):
        raise _bad("'temperature' must be a number, 0 or more")
    return {"max_tokens": max_tokens, "stop": tuple(stop),
            "temperature": None if temperature is None else float(temperature),
            "action_max_tokens": action, "answer_marker": marker}


def tool_calls_to_wire(calls: Sequence[ToolCall]) -> list[dict[str, str]] | None:
    return [c.to_wire() for c in calls] if calls else None


def tool_calls_from_wire(raw: Any) -> tuple[ToolCall, ...]:
    """The tool calls of a response (``null`` or absent: none); odd entries are skipped."""
    if not isinstance(raw, list):
        return ()
    calls: list[ToolCall] = []
    for entry in raw:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            arguments = entry.get("arguments")
            calls.append(ToolCall(id=str(entry.get("id") or f"call_{len(calls)}"),
                                  name=entry["name"],
                                  arguments=arguments if isinstance(arguments, str) else "{}"))
    return tuple(calls)


def _message(i: int, raw: Any) -> ChatMessage:
    where = f"messages[{i}]"
    if not isinstance(raw, dict):
        raise _bad(f"{where} must be an object {{role, content}}")
    role = raw.get("role")
    if role not in ROLES:
        raise _bad(f"{where}.role must be one of {', '.join(ROLES)}, not {role!r}")
    content = raw.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise _bad(f"{where}.content must be a string")
    calls = raw.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise _bad(f"{where}.tool_calls must be a list of {{id, name, arguments}}")
    call_id = raw.get("tool_call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise _bad(f"{where}.tool_call_id must be a string")
    return ChatMessage(role=role, content=content, tool_calls=tool_calls_from_wire(calls),
                       tool_call_id=call_id)


def _tool(i: int, raw: Any) -> ToolSpec:
    where = f"tools[{i}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise _bad(f"{where} must be an object with a non-empty 'name'")
    description = raw.get("description") or ""
    parameters = raw.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(description, str) or not isinstance(parameters, dict):
        raise _bad(f"{where}: 'description' must be a string and 'parameters' a JSON Schema")
    return ToolSpec(name=raw["name"], description=description, parameters=parameters)


def _tool_choice(raw: Any, names: set[str]) -> ToolChoice | None:
    if raw is None:
        return None
    if isinstance(raw, str) and raw in CHOICES:
        return raw
    name = raw.get("name") if isinstance(raw, dict) else None
    if isinstance(name, str) and name in names:
        return name
    raise _bad("'tool_choice' must be 'auto', 'required', 'none' or {\"name\": <one of the "
               "request's tools>}")


def _bad(message: str) -> ServiceError:
    return ServiceError(message, type="malformed-request")
