"""OpenAICompatible against a real local OpenAI-compatible HTTP server."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tests.llm.openai_server import Answer, OpenAITestServer, ReceivedRequest
from tests.processes import env
from toolmesh.llm import counting
from toolmesh.llm import (
    Completion,
    CompletionStream,
    LLMError,
    LLMProvider,
    OpenAICompatible,
    ScriptedLLM,
    open_provider,
)

KEY = "sk-test-0123456789abcdef"


def both_ways(llm: OpenAICompatible) -> list[Callable[[], Awaitable[object]]]:
    """A whole completion, and the first chunk of a stream: the two ways to ask."""
    return [lambda: llm.complete(system="", prompt="p"),
            lambda: anext(llm.stream(system="", prompt="p"))]


@pytest.fixture
async def server() -> AsyncIterator[OpenAITestServer]:
    async with OpenAITestServer() as s:
        yield s


@pytest.fixture
async def llm(server: OpenAITestServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible(base_url=server.base_url, model="test-model", timeout=10) as p:
        yield p


async def test_complete_sends_system_and_user_messages_and_returns_text_and_usage(
        server: OpenAITestServer, llm: OpenAICompatible) -> None:
    server.add(Answer(text="Paris.", prompt_tokens=12, completion_tokens=2))
    done = await llm.complete(system="Answer briefly.", prompt="Capital of France?")
    assert done == Completion(text="Paris.", in_tokens=12, out_tokens=2, model="test-model",
                              token_source="reported",
                               finish_reason="stop")
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body == {"model": "test-model", "stream": False, "messages": [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Capital of France?"}]}
    assert request.authorization is None


async def test_an_empty_system_sends_no_system_message(server: OpenAITestServer,
                                                       llm: OpenAICompatible) -> None:
    server.add("hi")
    await llm.complete(system="", prompt="hello")
    assert server.requests[0].messages == [{"role": "user", "content": "hello"}]


async def test_the_api_key_is_sent_as_a_bearer_token_and_kept_out_of_the_name() -> None:
    async with OpenAITestServer(["ok"], api_key=KEY) as server:
        async with OpenAICompatible(base_url=server.base_url + "/", model="m",
                                    api_key=KEY) as llm:
            assert (await llm.complete(system="", prompt="p")).text == "ok"
            assert KEY not in llm.name and KEY not in repr(llm)
            assert llm.name == f"openai-compatible m @ {server.base_url}"
        assert server.requests[0].authorization == f"Bearer {KEY}"
        assert server.requests[0].path == "/v1/chat/completions"  # trailing slash accepted


async def test_options_are_sent_only_when_set(server: OpenAITestServer) -> None:
    server.add("a")
    async with OpenAICompatible(base_url=server.base_url, model="m", temperature=0.0,
                                max_tokens=64) as llm:
        await llm.complete(system="", prompt="p")
    assert server.requests[0].body["temperature"] == 0.0
    assert server.requests[0].body["max_tokens"] == 64


async def test_stream_yields_chunks_that_join_to_the_answer_and_reports_usage(
        server: OpenAITestServer, llm: OpenAICompatible) -> None:
    text = "The capital of France is Paris."
    server.add(Answer(text=text, completion_tokens=7), text)
    stream = llm.stream(system="s", prompt="Capital of France?")
    assert isinstance(stream, CompletionStream)
    chunks = [c async for c in stream]
    assert chunks == ["The ", "capital ", "of ", "France ", "is ", "Paris."]
    assert stream.completion == Completion(text=text, in_tokens=4, out_tokens=7,
                                           model="test-model", finish_reason="stop",
                                           token_source="reported")
    assert "".join(chunks) == (await llm.complete(system="s", prompt="Capital of France?")).text
    body = server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert server.requests[0].headers["Accept"] == "text/event-stream"


async def test_a_stream_without_usage_is_counted(server: OpenAITestServer) -> None:
    """llama-cpp-python reports no usage in streams (issue 41): the prompt tokens come from the
    same request asked whole for one token, the completion tokens are the stream's pieces."""
    server.add(Answer(text="a b", chunks=["a", " b"]), Answer(text="c d e", chunks=["c", " d e"]))
    async with OpenAICompatible(base_url=server.base_url, model="m", stream_usage=False) as llm:
        stream = llm.stream(system="", prompt="three word prompt")
        assert [c async for c in stream] == ["a", " b"]
        assert llm.stream_reports_usage is False
        second = llm.stream(system="", prompt="p")
        assert [c async for c in second] == ["c", " d e"]
    assert stream.completion == Completion(text="a b", model="m", finish_reason="stop",
                                           in_tokens=3, out_tokens=2, token_source="counted")
    assert second.completion is not None and second.completion.in_tokens == 1
    assert "stream_options" not in server.requests[0].body
    # the first stream was counted after it, the second before it (its prompt then cached)
    assert [(r.body["stream"], r.body["max_tokens"] if not r.body["stream"] else None)
            for r in server.requests] == [(True, None), (False, 1), (False, 1), (True, None)]
    assert all("response_format" not in r.body for r in server.requests if not r.body["stream"])


async def test_counts_a_server_will_not_give_are_estimated() -> None:
    async def refused(body: dict[str, object]) -> Completion:
        raise LLMError("the server refused it")

    async def silent(body: dict[str, object]) -> Completion:
        return Completion(text="x")

    body = {"messages": [{"role": "user", "content": "x" * 40}], "stream": True}
    for ask in (refused, silent):
        tokens, source = await counting.prompt_tokens(body, ask)
        assert (tokens, source) == (12, "estimated")  # (40 + 8) characters, four a token
    done = counting.completed(Completion(text="abcdefgh"), in_tokens=12, source="estimated",
                              pieces=0, text="abcdefgh")
    assert (done.in_tokens, done.out_tokens, done.token_source) == (12, 2, "estimated")


async def test_a_server_that_ignores_stream_true_is_read_as_one_chunk(
        server: OpenAITestServer, llm: OpenAICompatible) -> None:
    whole = {"model": "other", "usage": {"prompt_tokens": 1, "completion_tokens": 2},
             "choices": [{"message": {"role": "assistant", "content": "all at once"}}]}
    server.add(Answer(body=json.dumps(whole), content_type="application/json"))
    stream = llm.stream(system="", prompt="p")
    assert [c async for c in stream] == ["all at once"]
    assert stream.completion == Completion(text="all at once", in_tokens=1, out_tokens=2,
                                           model="other", token_source="reported")


async def test_an_error_event_mid_stream_raises_after_the_chunks_before_it(
        server: OpenAITestServer, llm: OpenAICompatible) -> None:
    server.add(Answer(text="half an", stream_error="CUDA out of memory"))
    got: list[str] = []
    with pytest.raises(LLMError) as e:
        async for chunk in llm.stream(system="", prompt="p"):
            got.append(chunk)
    assert got == ["half ", "an"]
    assert e.value.message.endswith("reported an error mid-stream: CUDA out of memory")


async def test_stopping_a_stream_early_releases_the_connection(server: OpenAITestServer,
                                                               llm: OpenAICompatible) -> None:
    server.add("one two three four", "after")
    stream = llm.stream(system="", prompt="p")
    assert await anext(stream) == "one "
    await stream.aclose()
    assert (await llm.complete(system="", prompt="p")).text == "after"


async def test_one_session_is_reused_and_many_calls_run_at_once() -> None:
    def echo(request: ReceivedRequest) -> str:
        return f"answer to {request.prompt}"

    async with OpenAITestServer(respond=echo) as server:
        async with OpenAICompatible(base_url=server.base_url, model="m") as llm:
            await llm.complete(system="", prompt="a")
            await llm.complete(system="", prompt="b")
            assert server.requests[0].peer == server.requests[1].peer  # one kept-alive connection
            results = await asyncio.gather(*[llm.complete(system="", prompt=str(i))
                                             for i in range(30)])
    assert [r.text for r in results] == [f"answer to {i}" for i in range(30)]


async def test_close_then_use_again_opens_a_new_session(server: OpenAITestServer,
                                                        llm: OpenAICompatible) -> None:
    server.add("1", "2")
    await llm.complete(system="", prompt="p")
    await llm.close()
    await llm.close()
    assert (await llm.complete(system="", prompt="p")).text == "2"


async def test_a_401_surfaces_the_servers_message_without_the_api_key(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with OpenAITestServer(api_key="the-right-key") as server:
        async with OpenAICompatible(base_url=server.base_url, model="m", api_key=KEY) as llm:
            for call in both_ways(llm):
                with pytest.raises(LLMError) as e:
                    await call()
                assert e.value.type == "llm-error"
                assert e.value.message == (
                    f"the LLM at {server.base_url}/chat/completions answered HTTP 401: "
                    "Incorrect API key provided: ***.; check the API key "
                    "(TOOLMESH_LLM_API_KEY or OPENAI_API_KEY)")
                assert KEY not in str(e.value) and KEY not in repr(e.value.args)
    assert server.requests[0].authorization == f"Bearer {KEY}"  # the server did quote it
    assert KEY not in caplog.text


@pytest.mark.parametrize(("answer", "expected"), [
    (Answer(status=500, error="the GPU caught fire"), "answered HTTP 500: the GPU caught fire"),
    (Answer(status=502, body="<html>Bad Gateway</html>"), "answered HTTP 502: <html>Bad Gateway"),
    (Answer(status=400, body='{"error": "model \\"x\\" not found"}'),
     'answered HTTP 400: model "x" not found'),
    (Answer(status=422, body='{"detail": "prompt too long"}'), "answered HTTP 422: prompt too long"),
    (Answer(body="this is not json"), "sent a response that is not JSON: 'this is not json'"),
    (Answer(body='{"choices": []}'), "sent no choices"),
    (Answer(body='{"error": {"message": "overloaded"}}'), "reported an error: overloaded"),
])
async def test_http_errors_and_bad_responses_say_what_the_server_said(
        server: OpenAITestServer, llm: OpenAICompatible, answer: Answer, expected: str) -> None:
    server.add(answer, answer)
    with pytest.raises(LLMError) as e:
        await llm.complete(system="", prompt="p")
    assert expected in e.value.message
    if answer.status >= 400:
        with pytest.raises(LLMError) as e:
            [c async for c in llm.stream(system="", prompt="p")]
        assert expected in e.value.message


async def test_a_base_url_without_v1_is_not_guessed_and_the_404_says_what_to_check(
        server: OpenAITestServer) -> None:
    root = server.base_url.removesuffix("/v1")
    async with OpenAICompatible(base_url=root, model="m") as llm:
        with pytest.raises(LLMError) as e:
            await llm.complete(system="", prompt="p")
    assert e.value.message.startswith(f"the LLM at {root}/chat/completions answered HTTP 404")
    assert "including its version, e.g. http://host:8000/v1" in e.value.message
    assert server.requests == []


async def test_a_closed_port_means_cannot_reach() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    async with OpenAICompatible(base_url=url, model="m", api_key=KEY) as llm:
        for call in both_ways(llm):
            with pytest.raises(LLMError) as e:
                await call()
            assert e.value.message.startswith(f"cannot reach the LLM at {url}/chat/completions: ")
            assert "is the server running" in e.value.message and KEY not in e.value.message


async def test_a_server_that_does_not_answer_times_out(server: OpenAITestServer) -> None:
    server.add(Answer(hang=True), Answer(hang=True))
    async with OpenAICompatible(base_url=server.base_url, model="m", timeout=0.2) as llm:
        for call in both_ways(llm):
            with pytest.raises(LLMError) as e:
                await call()
            assert e.value.message.startswith(
                f"the LLM at {server.base_url}/chat/completions did not answer within 0.2 s")


async def test_a_missing_model_is_an_llm_error() -> None:
    with pytest.raises(LLMError, match="no model given"):
        OpenAICompatible(base_url="http://127.0.0.1:1/v1", model="")


async def test_open_provider_builds_an_openai_provider_from_url_and_environment(
        server: OpenAITestServer) -> None:
    server.add("from env")
    llm = open_provider(server.base_url, environ={"TOOLMESH_LLM_MODEL": "env-model",
                                                  "OPENAI_API_KEY": KEY})
    assert isinstance(llm, OpenAICompatible) and isinstance(llm, LLMProvider)
    try:
        assert (await llm.complete(system="", prompt="p")).text == "from env"
    finally:
        await llm.close()
    assert server.requests[0].body["model"] == "env-model"
    assert server.requests[0].authorization == f"Bearer {KEY}"
    explicit = open_provider(server.base_url, model="m", api_key="k2", timeout=5,
                             environ={"TOOLMESH_LLM_API_KEY": "k1", "OPENAI_API_KEY": "k0"})
    assert isinstance(explicit, OpenAICompatible)
    assert (explicit.model, explicit._api_key, explicit.timeout) == ("m", "k2", 5)
    preferred = open_provider(server.base_url, environ={
        "TOOLMESH_LLM_MODEL": "m", "TOOLMESH_LLM_API_KEY": "k1", "OPENAI_API_KEY": "k0"})
    assert isinstance(preferred, OpenAICompatible) and preferred._api_key == "k1"


def test_open_provider_errors_name_the_accepted_forms(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match="no model given for the LLM at http://h/v1; set "
                                       "TOOLMESH_LLM_MODEL"):
        open_provider("http://h/v1", environ={})
    with pytest.raises(LLMError) as e:
        open_provider("ollama:llama3", environ={})
    assert e.value.message.startswith("unsupported LLM 'ollama:llama3'; accepted forms: ")
    assert "'scripted:/path/to/script.json'" in e.value.message and "/v1" in e.value.message
    with pytest.raises(LLMError, match="'scripted:' needs a file path"):
        open_provider("scripted:", environ={})
    script = tmp_path / "s.json"
    script.write_text('{"default": "hi"}')
    assert isinstance(open_provider(f"scripted:{script}"), ScriptedLLM)


async def test_the_server_runs_as_a_process(tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"answers": ["queued"], "default": "default answer",
                                   "rules": [{"match": "weather", "response": {"text": "sunny"}}]}))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.llm.openai_server", "--port", "0",
        "--answers-file", str(answers), env=env(), stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("listening on http://127.0.0.1:"), line
        async with OpenAICompatible(base_url=line.split()[-1], model="m") as llm:
            got = [(await llm.complete(system="", prompt=p)).text
                   for p in ("the weather?", "a", "b")]
        assert got == ["sunny", "queued", "default answer"]
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 20) == 0
