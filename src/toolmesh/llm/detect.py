"""Which tool-calling strategy works with an LLM, found by trying, in the order
``native`` → ``json`` → ``react`` (docs/tool-calling.md).

* ``native`` works when, offered a tool with ``tool_choice: "auto"``, the model calls it with
  well-formed arguments for a question that needs it, *and* answers in text a question that
  does not. The second half matters: llama-cpp-python's ``chatml-function-calling`` format
  returns tool calls but (constrained by its own grammar) no usable text answer under
  ``auto``, so a dialog there could never end.
* ``json`` works when a reply constrained by a response schema is JSON that matches it.
* ``react`` (TrustGraph's text protocol) needs nothing from the server: the fallback.

Each probe is one short request at temperature 0. A server that cannot be reached raises
:class:`~toolmesh.llm.base.LLMError` — nothing is learnt then, and the caller asks again
later; a server that refuses a probe (an HTTP error) has shown that it lacks the feature.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

from toolmesh.llm.base import Completion, LLMError, LLMProvider, LLMRefused, ToolCalling
from toolmesh.llm.chat import ChatMessage, ChatRequest, ToolSpec

log = logging.getLogger("toolmesh.llm")

Source = Literal["detected", "configured", "provider"]

_WEATHER = ToolSpec(name="get_weather", description="Get the current weather in a city",
                    parameters={"type": "object",
                                "properties": {"city": {"type": "string",
                                                        "description": "The city"}},
                                "required": ["city"]})
_PLACE = {"type": "object", "properties": {"city": {"type": "string"},
                                            "country": {"type": "string"}},
          "required": ["city", "country"], "additionalProperties": False}
#: tokens a probe's answer may take: enough for a call or a short sentence
_PROBE_TOKENS = 96


@dataclass(frozen=True, slots=True, kw_only=True)
class Detection:
    """The strategy to use with an LLM, where that choice came from, and why."""

    strategy: ToolCalling
    source: Source
    #: what the probes found (or who configured it), in words
    detail: str

    def to_wire(self) -> dict[str, str]:
        return {"tool_calling": self.strategy, "source": self.source, "detail": self.detail}


async def detect(provider: LLMProvider, *, timeout: float = 120.0) -> Detection:
    """The first strategy of native → json → react that works with ``provider``.

    A provider that knows its strategy (``provider.tool_calling``, e.g. the scripted model's
    ``react``) is not probed. :class:`LLMError` when the LLM cannot be reached.
    """
    known = getattr(provider, "tool_calling", None)
    if known is not None:
        return Detection(strategy=known, source="provider",
                         detail=f"{provider.name} follows the {known} protocol")
    if not callable(getattr(provider, "chat", None)):
        return Detection(strategy="react", source="provider",
                         detail=f"{provider.name} takes only text prompts")
    found: list[str] = []
    async with asyncio.timeout(timeout):
        for strategy, probe in (("native", _native), ("json", _json)):
            problem = await probe(provider)
            if problem is None:
                found.append(f"{strategy}: works")
                return Detection(strategy=strategy, source="detected",  # type: ignore[arg-type]
                                 detail="; ".join(found))
            found.append(f"{strategy}: {problem}")
    return Detection(strategy="react", source="detected",
                     detail="; ".join([*found, "react: the text protocol, which needs nothing "
                                                "from the server"]))


async def _native(provider: LLMProvider) -> str | None:
    """Why native tool calls do not work, or ``None`` when they do."""
    reply = await _ask(provider, ChatRequest(
        messages=(ChatMessage(role="user", content="What is the weather in Paris right now?"),),
        tools=(_WEATHER,), tool_choice="auto", max_tokens=_PROBE_TOKENS, temperature=0.0))
    if isinstance(reply, str):
        return reply
    if not reply.tool_calls:
        return "the model answered in text where it needed the tool (the server ignores tools)"
    call = reply.tool_calls[0]
    arguments = _object(call.arguments)
    if call.name != _WEATHER.name or not isinstance(arguments, dict) \
            or not isinstance(arguments.get("city"), str) or not arguments["city"].strip():
        return f"the tool call was malformed: {call.name} {call.arguments[:100]}"
    reply = await _ask(provider, ChatRequest(
        messages=(ChatMessage(role="user", content="Say hello, without using any tool."),),
        tools=(_WEATHER,), tool_choice="auto", max_tokens=_PROBE_TOKENS, temperature=0.0))
    if isinstance(reply, str):
        return reply
    if reply.tool_calls or not reply.text.strip():
        return ("the model called a tool where none was needed, or gave no text (with tools "
                "offered it cannot answer)")
    return None


async def _json(provider: LLMProvider) -> str | None:
    """Why schema-constrained replies do not work, or ``None`` when they do."""
    reply = await _ask(provider, ChatRequest(
        messages=(ChatMessage(role="user", content="In which city and country is the Eiffel "
                                                   "Tower? Reply in JSON."),),
        response_schema=_PLACE, max_tokens=_PROBE_TOKENS, temperature=0.0))
    if isinstance(reply, str):
        return reply
    value = _object(reply.text)
    if not isinstance(value, dict) or set(value) != {"city", "country"} \
            or not all(isinstance(v, str) for v in value.values()):
        return f"the reply did not match the schema: {reply.text[:100]!r}"
    return None


async def _ask(provider: LLMProvider, request: ChatRequest) -> Completion | str:
    """The whole reply, or why the server refused the request."""
    stream = provider.chat(request)
    try:
        async for _ in stream:
            pass
    except LLMRefused as e:
        return f"refused ({e.message})"
    finally:
        await stream.aclose()
    if stream.completion is None:
        raise LLMError(f"{provider.name} ended its reply without completing it")
    return stream.completion


def _object(text: str) -> Any:
    """``text`` as JSON (control characters inside strings allowed: grammar-constrained
    servers let raw newlines through), or ``None``."""
    try:
        return json.loads(text, strict=False)
    except (json.JSONDecodeError, RecursionError):
        return None
