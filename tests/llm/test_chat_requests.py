"""Chat requests through OpenAICompatible against a real local HTTP server: tools, tool calls
(whole and streamed, several at once), response schemas and each server's quirks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tests.llm.openai_server import Answer, OpenAITestServer
from toolmesh.llm import Completion, LLMError, OpenAICompatible
from toolmesh.llm.base import LLMRefused
from toolmesh.llm.chat import ChatMessage, ChatRequest, ToolCall, ToolSpec
from toolmesh.llm.quirks import LOOKALIKES

WEATHER = ToolSpec(name="get_weather", description="The weather in a city",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})
#: a conversation that has made one call and has its result
AFTER_A_CALL = (
    ChatMessage(role="system", content="Be helpful."),
    ChatMessage(role="user", content="Weather in Paris?"),
    ChatMessage(role="assistant", tool_calls=(ToolCall(id="c1", name="get_weather",
                                                       arguments='{"city": "Paris"}'),)),
    ChatMessage(role="tool", tool_call_id="c1", content="sunny"),
)


async def reply(llm: OpenAICompatible, request: ChatRequest) -> tuple[list[str], Completion]:
    stream = llm.chat(request)
    chunks = [c async for c in stream]
    assert stream.completion is not None
    return chunks, stream.completion


@pytest.fixture(params=["openai", "llama-cpp-python"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[OpenAITestServer]:
    async with OpenAITestServer(kind=request.param) as s:
        yield s


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_come_back_whole_and_streamed(server: OpenAITestServer,
                                                       stream: bool) -> None:
    server.add(Answer(tool_calls=[{"id": "a", "name": "get_weather",
                                   "arguments": {"city": "Paris"}},
                                  {"id": "b", "name": "get_weather",
                                   "arguments": {"city": "Rome, Italy"}}]))
    async with OpenAICompatible(base_url=server.base_url, model="m") as llm:
        chunks, done = await reply(llm, ChatRequest(
            messages=(ChatMessage(role="user", content="Paris and Rome?"),), tools=(WEATHER,),
            tool_choice="auto", stream=stream))
    assert chunks == [] or "".join(chunks) == ""
    # streamed, each call's arguments came in pieces of seven characters, interleaved by index
    assert done.tool_calls == (ToolCall(id="a", name="get_weather", arguments='{"city": "Paris"}'),
                               ToolCall(id="b", name="get_weather",
                                        arguments='{"city": "Rome, Italy"}'))
    assert done.finish_reason == "tool_calls"
    body = server.requests[-1].body
    assert body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": dict(WEATHER.parameters)}}]
    assert body["tool_choice"] == "auto"


async def test_each_server_is_sent_a_conversation_with_calls_as_it_takes_it(
        server: OpenAITestServer) -> None:
    """pydantic-ai's request, content null on the call, is an HTTP 500 on llama-cpp-python."""
    server.add("It is sunny in Paris.")
    async with OpenAICompatible(base_url=server.base_url, model="m") as llm:
        _, done = await reply(llm, ChatRequest(messages=AFTER_A_CALL, tools=(WEATHER,)))
    assert done.text == "It is sunny in Paris."
    sent = server.requests[-1].body["messages"]
    assert sent[2]["tool_calls"] == [{"id": "c1", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    if server.kind == "llama-cpp-python":
        assert sent[2]["content"] == ""
        # its chatml-function-calling format renders no tool messages: a user message is read
        assert sent[3] == {"role": "user", "content": "sunny"}
    else:
        assert sent[2]["content"] is None
        assert sent[3] == {"role": "tool", "content": "sunny", "tool_call_id": "c1"}


async def test_a_response_schema_goes_in_the_form_the_server_takes(
        server: OpenAITestServer) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    server.add('{"city": "Paris"}')
    async with OpenAICompatible(base_url=server.base_url, model="m") as llm:
        _, done = await reply(llm, ChatRequest(
            messages=(ChatMessage(role="user", content="Where?"),), response_schema=schema))
    assert json.loads(done.text) == {"city": "Paris"}
    form = server.requests[-1].body["response_format"]
    if server.kind == "llama-cpp-python":
        assert form == {"type": "json_object", "schema": schema}
    else:
        assert form == {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}


async def test_the_server_kind_can_be_named_instead_of_recognised() -> None:
    async with OpenAITestServer(kind="llama-cpp-python") as server:
        server.add("ok")
        # told it is OpenAI, the provider sends OpenAI's form, and the server refuses it
        async with OpenAICompatible(base_url=server.base_url, model="m", server="openai") as llm:
            with pytest.raises(LLMRefused) as e:
                await reply(llm, ChatRequest(messages=(ChatMessage(role="user", content="x"),),
                                             response_schema={"type": "object"}))
    assert e.value.status == 500 and "json_object" in e.value.message


async def test_a_server_that_ignores_max_tokens_is_cut_off() -> None:
    async with OpenAITestServer() as server, \
            OpenAICompatible(base_url=server.base_url, model="m") as llm:
        server.add(" ".join(f"w{i}" for i in range(200)))
        chunks, done = await reply(llm, ChatRequest(
            messages=(ChatMessage(role="user", content="go on"),), max_tokens=20, stream=True))
    streamed = [r for r in server.requests if r.body.get("stream")]
    assert len(streamed) == 1 and streamed[0].body["max_tokens"] == 20
    assert 20 < len(chunks) < 60 and done.finish_reason == "length"


async def test_a_model_stuck_in_a_loop_is_cut_off() -> None:
    async with OpenAITestServer() as server, \
            OpenAICompatible(base_url=server.base_url, model="m") as llm:
        server.add("Here it is. " + "The answer is: " * 200)
        chunks, done = await reply(llm, ChatRequest(
            messages=(ChatMessage(role="user", content="q"),), stream=True))
    text = "".join(chunks)
    assert text.startswith("Here it is. The answer is:") and len(text) < 400
    assert done.finish_reason == "length"


async def test_a_server_that_html_escapes_messages_is_sent_look_alikes() -> None:
    async with OpenAITestServer(kind="llama-cpp-python", escaping=True) as server, \
            OpenAICompatible(base_url=server.base_url, model="m") as llm:
        server.add('It\'s "fine"')
        _, done = await reply(llm, ChatRequest(
            messages=(ChatMessage(role="user", content='Say "it\'s <ok> & fine"'),)))
    assert done.text == 'It\'s "fine"'  # what the model writes is not touched
    assert server.requests[-1].messages[0]["content"] == 'Say "it\'s <ok> & fine"'.translate(
        LOOKALIKES)
    assert '"' not in server.requests[-1].messages[0]["content"]


async def test_a_server_that_does_not_escape_gets_the_text_as_it_is() -> None:
    async with OpenAITestServer(kind="llama-cpp-python") as server, \
            OpenAICompatible(base_url=server.base_url, model="m") as llm:
        server.add("ok")
        await reply(llm, ChatRequest(messages=(ChatMessage(role="user", content='"q"'),)))
    assert server.requests[-1].messages[0]["content"] == '"q"'


async def test_a_server_down_is_an_llm_error_not_a_refusal() -> None:
    async with OpenAITestServer() as server:
        url = server.base_url
    async with OpenAICompatible(base_url=url, model="m", timeout=5) as llm:
        with pytest.raises(LLMError) as e:
            await reply(llm, ChatRequest(messages=(ChatMessage(role="user", content="q"),)))
    assert not isinstance(e.value, LLMRefused)


async def test_llama_cpp_python_is_not_asked_to_stream_tool_calls() -> None:
    """Its chatml-function-calling format closes the connection mid-stream when the model
    calls a tool: a request with tools goes unstreamed, and still reads as a stream."""
    async with OpenAITestServer(kind="llama-cpp-python") as server, \
            OpenAICompatible(base_url=server.base_url, model="m") as llm:
        server.add(Answer(tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]),
                   "plain text")
        _, done = await reply(llm, ChatRequest(messages=AFTER_A_CALL[:2], tools=(WEATHER,),
                                               stream=True))
        chunks, _ = await reply(llm, ChatRequest(messages=AFTER_A_CALL[:2], stream=True))
    assert done.tool_calls[0].name == "get_weather"
    assert server.requests[-2].body["stream"] is False  # with tools
    assert server.requests[-1].body["stream"] is True and chunks == ["plain ", "text"]
