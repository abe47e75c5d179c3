"""Chat requests in OpenAI's wire format, and the answers back out of it.

:func:`payload` encodes a :class:`~toolmesh.llm.chat.ChatRequest` the way the server at hand
accepts it (:mod:`toolmesh.llm.quirks`); :func:`completion` reads a whole answer;
:class:`DeltaAssembler` follows a streamed one, joining the pieces of each tool call
(``index``, then ``id``/``name`` once, then ``arguments`` a few characters at a time) in the
order the calls were opened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolmesh.llm.base import Completion
from toolmesh.llm.chat import ChatMessage, ChatRequest, ToolCall
from toolmesh.llm.quirks import LOOKALIKES, Quirks


def payload(request: ChatRequest, *, model: str, quirks: Quirks,
            default_temperature: float | None = None,
            default_max_tokens: int | None = None, escaping: bool = False) -> dict[str, Any]:
    """The JSON body of ``POST /chat/completions`` for ``request``; ``escaping``: the server
    HTML-escapes what the model reads (:func:`toolmesh.llm.quirks.escapes`)."""
    messages = [_message(m, quirks) for m in request.messages]
    if escaping:
        for m in messages:
            if isinstance(m.get("content"), str):
                m["content"] = m["content"].translate(LOOKALIKES)
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": request.stream}
    if request.tools:
        body["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": dict(t.parameters)}}
            for t in request.tools]
        choice = request.tool_choice
        if choice == "required" and not quirks.tool_choice_required:
            choice = "auto"  # the server would refuse it; the agent checks the reply anyway
        if choice in ("auto", "required", "none"):
            body["tool_choice"] = choice
        elif choice is not None:
            body["tool_choice"] = {"type": "function", "function": {"name": choice}}
    if request.response_schema is not None:
        body["response_format"] = quirks.response_format(request.response_schema)
    temperature = request.temperature if request.temperature is not None else default_temperature
    if temperature is not None:
        body["temperature"] = temperature
    max_tokens = request.max_tokens if request.max_tokens is not None else default_max_tokens
    if request.action_max_tokens is not None and not request.stream:
        # asked whole, a reply cannot be cut once it turns out to be an action: the tighter
        # bound holds for all of it (the provider streams whenever the server lets it)
        max_tokens = min(request.action_max_tokens, max_tokens or request.action_max_tokens)
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if request.stop:
        body["stop"] = list(request.stop)
    return body


def _message(message: ChatMessage, quirks: Quirks) -> dict[str, Any]:
    if message.role == "tool" and quirks.tool_results_as_user:
        return {"role": "user", "content": message.content}
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.name, "arguments": c.arguments}}
                             for c in message.tool_calls]
        if not message.content and not quirks.empty_content_with_tool_calls:
            out["content"] = None  # what OpenAI itself sends back for a call without text
    if message.tool_call_id is not None and message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    return out


def completion(body: dict[str, Any], *, model: str) -> Completion:
    """The :class:`Completion` of a whole (non-streamed) answer; ``ValueError`` saying what is
    missing when ``body`` holds none."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError(f"no choices: {json.dumps(body)[:200]}")
    message = choices[0].get("message")
    message = message if isinstance(message, dict) else {}
    text = message.get("content")
    calls = []
    for i, raw in enumerate(message.get("tool_calls") or []):
        call = _call(raw, i)
        if call is not None:
            calls.append(call)
    raw_usage = body.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    finish = choices[0].get("finish_reason")
    in_tokens, out_tokens = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    return Completion(text=text if isinstance(text, str) else "",
                      in_tokens=in_tokens, out_tokens=out_tokens,
                      model=body.get("model") or model, tool_calls=tuple(calls),
                      finish_reason=finish if isinstance(finish, str) else None,
                      token_source=_source(in_tokens, out_tokens))


def _call(raw: Any, index: int) -> ToolCall | None:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return None
    arguments = function.get("arguments")
    if isinstance(arguments, dict):  # some servers send the object itself
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(id=str(raw.get("id") or f"call_{index}"), name=function["name"],
                    arguments=arguments if isinstance(arguments, str) and arguments else "{}")


def _source(in_tokens: int | None, out_tokens: int | None) -> str | None:
    return "reported" if in_tokens is not None or out_tokens is not None else None


def _count(usage: dict[str, Any], name: str) -> int | None:
    value = usage.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class _Partial:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class DeltaAssembler:
    """Follows the events of a streamed answer: :meth:`add` returns the text of each event
    (``None`` when it has none); :meth:`completion` the whole answer once the stream ended."""

    def __init__(self, *, model: str) -> None:
        self.model = model
        self._calls: dict[int, _Partial] = {}
        self._usage: dict[str, Any] = {}
        self._finish: str | None = None
        #: events that carried text or a piece of a tool call (a bound for ``max_tokens``
        #: when the server ignores it: servers send about one token per event)
        self.pieces = 0
        #: of those, the pieces of tool calls
        self.call_pieces = 0

    def add(self, event: dict[str, Any]) -> str | None:
        self.model = event.get("model") or self.model
        if isinstance(event.get("usage"), dict):
            self._usage = event["usage"]
        choices = event.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return None  # e.g. the usage-only last event
        choice = choices[0]
        if isinstance(choice.get("finish_reason"), str):
            self._finish = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return None
        for raw in delta.get("tool_calls") or []:
            self._add_call(raw)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.pieces += 1
            return content
        return None

    def _add_call(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            return
        index = raw.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = len(self._calls) if raw.get("id") or not self._calls else max(self._calls)
        part = self._calls.setdefault(index, _Partial())
        if isinstance(raw.get("id"), str) and raw["id"]:
            part.id = raw["id"]
        function = raw.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("name"), str) and function["name"]:
                part.name = function["name"]
            arguments = function.get("arguments")
            if isinstance(arguments, dict):
                arguments = json.dumps(arguments, ensure_ascii=False)
            if isinstance(arguments, str) and arguments:
                part.arguments.append(arguments)
                self.pieces += 1
                self.call_pieces += 1

    def completion(self) -> Completion:
        """The tool calls, usage and finish reason (the text is joined by the caller)."""
        calls = tuple(ToolCall(id=p.id or f"call_{i}", name=p.name,
                               arguments="".join(p.arguments) or "{}")
                      for i, p in sorted(self._calls.items()) if p.name)
        in_tokens = _count(self._usage, "prompt_tokens")
        out_tokens = _count(self._usage, "completion_tokens")
        return Completion(text="", in_tokens=in_tokens, out_tokens=out_tokens,
                          model=self.model, tool_calls=calls, finish_reason=self._finish,
                          token_source=_source(in_tokens, out_tokens))


#: how many times in a row a passage must repeat before a stream counts as stuck in a loop
LOOP_REPEATS = 6
#: the longest passage looked for (characters)
LOOP_PERIOD = 200


def looping(text: str) -> bool:
    """Whether ``text`` ends in one passage (8 to :data:`LOOP_PERIOD` characters, of at least
    four different characters: not a rule of dashes) repeated :data:`LOOP_REPEATS` times — a
    model stuck in a loop ("The answer is: The answer is: ..."), which small models fall into
    and which only ``max_tokens`` would otherwise end."""
    for period in range(8, LOOP_PERIOD + 1):
        span = period * LOOP_REPEATS
        if len(text) < span:
            break
        end = text[-span:]
        if end[period:] == end[:-period] and len(set(end[:period])) >= 4:
            return True
    return False


class ActionBound:
    """Whether a streamed reply has run past its action bound (``ChatRequest.
    action_max_tokens``): the pieces of its tool calls, and with an ``answer_marker``, the
    pieces before the marker appears in its text. Once the marker is there the reply is an
    answer, and only ``max_tokens`` bounds it."""

    def __init__(self, limit: int | None, marker: str | None, *, slack: int = 0) -> None:
        self.limit = limit
        self.marker = marker
        self._slack = slack
        self._tail = ""
        self.answering = False
        self._at_answer = 0

    def passed(self, deltas: DeltaAssembler, text: str | None) -> bool:
        """After one event (``text``: what it added to the reply's text)."""
        if self.limit is None:
            return False
        if self.marker is None:
            return deltas.call_pieces > self.limit + self._slack
        if not self.answering and text:
            self._tail = (self._tail + text)[-(len(self.marker) + len(text)):]
            if self.marker in self._tail:
                self.answering = True
                self._at_answer = deltas.pieces
        pieces = self._at_answer if self.answering else deltas.pieces
        return pieces > self.limit + self._slack
