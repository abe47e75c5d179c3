"""Chat requests on the text-completion service's wire, on every bus backend."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Backend
from tests.llm.test_text_completion_service import TIMEOUT, started
from toolmesh import RequestError
from toolmesh.llm import Completion, ScriptedLLM
from toolmesh.llm.chat import (
    ChatMessage,
    ChatRequest,
    ToolCall,
    ToolSpec,
    request_to_wire,
)
from toolmesh.llm.coalesce import OFF

CALL = Completion(text="", tool_calls=(ToolCall(id="c1", name="tell-joke",
                                                arguments='{"topic": "cats"}'),))
REQUEST = ChatRequest(messages=(ChatMessage(role="system", content="Be funny."),
                                ChatMessage(role="user", content="A joke about cats")),
                      tools=(ToolSpec(name="tell-joke", description="Tells jokes"),),
                      tool_choice="auto", max_tokens=50, temperature=0.0)


async def test_a_chat_request_is_answered_with_its_tool_calls(
        backend: Backend, stop_later: list[Any]) -> None:
    llm = ScriptedLLM([CALL, "Here you go."])
    _, raw = await started(backend, llm, stop_later, OFF)
    answer = await raw.request(request_to_wire(REQUEST), timeout=TIMEOUT)
    assert answer["tool_calls"] == [{"id": "c1", "name": "tell-joke",
                                     "arguments": '{"topic": "cats"}'}]
    assert answer["finish_reason"] == "tool_calls" and answer["end_of_stream"] is True
    # the provider got the request as it was sent: the limits, the tools, the messages
    got = llm.requests[0]
    assert (got.max_tokens, got.temperature, got.tool_choice) == (50, 0.0, "auto")
    assert got.tools == REQUEST.tools and got.messages == REQUEST.messages
    # streamed: the text as it comes, the calls (none here) and the finish in the last one
    messages = [m async for m in raw.stream(request_to_wire(
        ChatRequest(messages=REQUEST.messages, stream=True)), timeout=TIMEOUT)]
    assert [m["response"] for m in messages] == ["Here ", "you ", "go.", ""]
    assert messages[-1]["tool_calls"] is None and messages[-1]["finish_reason"] == "stop"


@pytest.mark.parametrize(("body", "problem"), [
    ({"messages": []}, "'messages' must be a non-empty list"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role must be one of"),
    ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content must be a string"),
    ({"messages": [{"role": "user"}], "tools": [{"name": ""}]}, "tools[0] must be an object"),
    ({"messages": [{"role": "user"}], "tool_choice": {"name": "nope"}}, "'tool_choice' must be"),
    ({"messages": [{"role": "user"}], "max_tokens": 0}, "'max_tokens' must be a positive"),
    ({"messages": [{"role": "user"}], "stop": ["", 1]}, "'stop' must be a list"),
    ({"prompt": "p", "temperature": -1}, "'temperature' must be a number, 0 or more"),
    ({"operation": "train"}, "unknown operation 'train'"),
])
async def test_a_malformed_chat_request_is_refused_and_the_service_goes_on(
        backend: Backend, stop_later: list[Any], body: dict[str, Any], problem: str) -> None:
    _, raw = await started(backend, ScriptedLLM(default="still here"), stop_later)
    with pytest.raises(RequestError) as e:
        await raw.request(body, timeout=TIMEOUT)
    assert e.value.type == "malformed-request" and problem in e.value.message
    assert (await raw.request({"prompt": "p"}, timeout=TIMEOUT))["response"] == "still here"


async def test_a_provider_of_the_text_protocol_alone_is_still_served(
        backend: Backend, stop_later: list[Any]) -> None:
    class TextOnly:
        name = "text only"

        async def complete(self, *, system: str, prompt: str) -> Completion:
            return Completion(text=f"re: {prompt}")

        async def close(self) -> None: ...

    _, raw = await started(backend, TextOnly(), stop_later)  # type: ignore[arg-type]
    # limits it cannot honour are its own business; a chat request it cannot take is refused
    assert (await raw.request({"prompt": "p", "max_tokens": 5}, timeout=TIMEOUT))[
        "response"] == "re: p"
    with pytest.raises(RequestError, match="takes no chat requests"):
        await raw.request(request_to_wire(REQUEST), timeout=TIMEOUT)
    answer = await raw.request({"operation": "capabilities"}, timeout=TIMEOUT)
    assert (answer["tool_calling"], answer["source"]) == ("react", "provider")
