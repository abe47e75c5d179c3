"""The text-completion service on every bus backend, with the scripted and the HTTP provider."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from tests.conftest import Backend
from tests.llm.openai_server import OpenAITestServer
from toolmesh import RequestClient, RequestError, connect
from toolmesh.bus.memory import new_memory_url
from toolmesh.llm import (
    Completion,
    LLMError,
    LLMProvider,
    OpenAICompatible,
    Rule,
    ScriptedLLM,
    TextCompletionClient,
    TextCompletionService,
)
from toolmesh.llm.coalesce import OFF, Coalescing

TIMEOUT = 10
MakeLLM = Callable[..., Awaitable[LLMProvider]]


@pytest.fixture(params=["scripted", "openai"])
async def make_llm(request: pytest.FixtureRequest) -> AsyncIterator[MakeLLM]:
    """``await make_llm(answers, rules=[(regex, text)])``: a provider that gives those answers
    (queued answers in order, rules by prompt) and fails on any other prompt."""
    servers: list[OpenAITestServer] = []
    providers: list[LLMProvider] = []

    async def make(answers: Sequence[str] = (),
                   rules: Sequence[tuple[str, str]] = ()) -> LLMProvider:
        llm: LLMProvider
        if request.param == "scripted":
            llm = ScriptedLLM(answers, rules=[Rule(p, r) for p, r in rules])
        else:
            server = OpenAITestServer(answers, rules=rules)
            await server.start()
            servers.append(server)
            llm = OpenAICompatible(base_url=server.base_url, model="test-model", timeout=TIMEOUT)
        providers.append(llm)
        return llm

    yield make
    for llm in providers:
        await llm.close()
    for server in servers:
        await server.close()


def queues(backend: Backend) -> dict[str, str]:
    topic = backend.topic("llm")
    return {"request_queue": f"request:tg:{topic}", "response_queue": f"response:tg:{topic}"}


async def serve(backend: Backend, llm: LLMProvider, coalescing: Coalescing = Coalescing()
                ) -> tuple[TextCompletionService, TextCompletionClient, RequestClient]:
    """The service, its client and a raw request client (to see the wire), all started."""
    q = queues(backend)
    service = TextCompletionService(await backend.connect(), llm, **q, coalescing=coalescing)
    await service.start()
    bus = await backend.connect()
    client = TextCompletionClient(bus, **q)
    raw = RequestClient(bus, **q)
    await client.start()
    await raw.start()
    return service, client, raw


async def started(backend: Backend, llm: LLMProvider, stop_later: list[Any],
                  coalescing: Coalescing = Coalescing()
                  ) -> tuple[TextCompletionClient, RequestClient]:
    service, client, raw = await serve(backend, llm, coalescing)
    stop_later.extend([service, client, raw])
    return client, raw


def model_of(llm: LLMProvider) -> str:
    return "scripted" if isinstance(llm, ScriptedLLM) else "test-model"


async def test_a_completion_is_one_response_with_token_counts(
        backend: Backend, make_llm: MakeLLM, stop_later: list[Any]) -> None:
    llm = await make_llm(["Paris is the capital.", "Rome."])
    client, raw = await started(backend, llm, stop_later)
    done = await client.complete("Be brief.", "Capital of France?", timeout=TIMEOUT)
    # both providers count words here: the scripted one itself, the test server as its usage
    assert done == Completion(text="Paris is the capital.", in_tokens=5, out_tokens=4,
                              model=model_of(llm))
    assert await raw.request({"prompt": "Capital of Italy?"}, timeout=TIMEOUT) == {
        "error": None, "response": "Rome.", "in_token": 3, "out_token": 1,
        "model": model_of(llm), "end_of_stream": True}


async def test_streaming_sends_a_response_per_chunk_then_a_final_one(
        backend: Backend, make_llm: MakeLLM, stop_later: list[Any]) -> None:
    text = "The capital of France is Paris."
    llm = await make_llm([text, text])
    client, raw = await started(backend, llm, stop_later, OFF)
    messages = [m async for m in raw.stream({"system": "", "prompt": "Capital of France?",
                                             "streaming": True}, timeout=TIMEOUT)]
    *chunks, final = messages
    assert [m["response"] for m in chunks] == ["The ", "capital ", "of ", "France ", "is ",
                                               "Paris."]
    assert all(m == {"error": None, "response": m["response"], "in_token": None,
                     "out_token": None, "model": None, "end_of_stream": False} for m in chunks)
    assert final == {"error": None, "response": "", "in_token": 3, "out_token": 6,
                     "model": model_of(llm), "end_of_stream": True}

    stream = client.stream("", "Capital of France?", timeout=TIMEOUT)
    assert "".join([c async for c in stream]) == text
    assert stream.completion == Completion(text=text, in_tokens=3, out_tokens=6,
                                           model=model_of(llm))


async def test_the_llm_gets_exactly_the_system_and_prompt_sent(
        backend: Backend, stop_later: list[Any]) -> None:
    llm = ScriptedLLM(default="ok")
    client, _ = await started(backend, llm, stop_later)
    await client.complete("You are a {tool} user.", 'Question: "why?"\n{"json": 1}',
                          timeout=TIMEOUT)
    [_ async for _ in client.stream("", "streamed", timeout=TIMEOUT)]
    assert llm.prompts == [("You are a {tool} user.", 'Question: "why?"\n{"json": 1}'),
                           ("", "streamed")]


async def test_an_llm_error_is_an_error_response_and_the_service_keeps_serving(
        backend: Backend, make_llm: MakeLLM, stop_later: list[Any]) -> None:
    llm = await make_llm(rules=[("fine", "all good")])
    client, _ = await started(backend, llm, stop_later)
    for streaming in (False, True):
        with pytest.raises(RequestError) as e:
            if streaming:
                [_ async for _ in client.stream("", "unscripted", timeout=TIMEOUT)]
            else:
                await client.complete("", "unscripted", timeout=TIMEOUT)
        assert e.value.type == "llm-error"
        assert ("no response for this prompt: 'unscripted'" in e.value.message
                or "answered HTTP 500: the OpenAI test server has no answer" in e.value.message)
    assert (await client.complete("", "is it fine?", timeout=TIMEOUT)).text == "all good"
    assert "".join([c async for c in client.stream("", "fine?", timeout=TIMEOUT)]) == "all good"


class Failing:
    """A provider whose stream breaks after one chunk, and whose complete raises a bug."""

    name = "failing"

    async def complete(self, *, system: str, prompt: str) -> Completion:
        raise RuntimeError("a bug in the provider")

    async def stream(self, *, system: str, prompt: str) -> AsyncIterator[str]:
        yield "partial "
        raise LLMError("the connection dropped mid-answer")

    async def close(self) -> None:
        pass


async def test_a_failure_during_a_stream_ends_it_with_an_error_response(
        backend: Backend, stop_later: list[Any]) -> None:
    _, raw = await started(backend, Failing(), stop_later)
    got: list[dict[str, Any]] = []
    with pytest.raises(RequestError) as e:
        async for message in raw.stream({"prompt": "p", "streaming": True}, timeout=TIMEOUT):
            got.append(message)
    assert [m["response"] for m in got] == ["partial "]
    assert (e.value.type, e.value.message) == ("llm-error", "the connection dropped mid-answer")
    # a bug (not an LLMError) is named by its type: a bare message would not say it is one
    with pytest.raises(RequestError) as e:
        await raw.request({"prompt": "p"}, timeout=TIMEOUT)
    assert (e.value.type, e.value.message) == ("llm-error", "RuntimeError: a bug in the provider")


class Gate:
    """A provider that answers only once ``n`` prompts are waiting at the same time."""

    name = "gate"

    def __init__(self, n: int) -> None:
        self.n = n
        self.waiting = 0
        self.all_in = asyncio.Event()

    async def complete(self, *, system: str, prompt: str) -> Completion:
        self.waiting += 1
        if self.waiting == self.n:
            self.all_in.set()
        await self.all_in.wait()
        return Completion(text=f"answer to {prompt}")

    def stream(self, *, system: str, prompt: str) -> AsyncIterator[str]:
        raise NotImplementedError

    async def close(self) -> None:
        pass


async def test_requests_are_answered_concurrently_each_with_its_own_answer(
        backend: Backend, stop_later: list[Any]) -> None:
    n = 40
    client, _ = await started(backend, Gate(n), stop_later)
    results = await asyncio.gather(*[client.complete("", str(i), timeout=TIMEOUT)
                                     for i in range(n)])
    assert [r.text for r in results] == [f"answer to {i}" for i in range(n)]


@pytest.mark.parametrize(("request_body", "message"), [
    ({"system": "s"}, "'prompt' is missing; it must be a string"),
    ({"prompt": None}, "'prompt' is missing; it must be a string"),
    ({"prompt": 42}, "'prompt' must be a string, not int"),
    ({"prompt": "p", "system": ["a"]}, "'system' must be a string, not list"),
    ({"prompt": "p", "streaming": "yes"}, "'streaming' must be true or false, not str"),
])
async def test_malformed_requests_get_error_responses(
        backend: Backend, stop_later: list[Any], request_body: dict[str, Any], message: str) -> None:
    llm = ScriptedLLM(default="ok")
    client, raw = await started(backend, llm, stop_later)
    answers: asyncio.Queue[Any] = asyncio.Queue()

    async def collect(m: Any) -> None:
        answers.put_nowait(m.json())

    bus = await backend.connect()
    await bus.subscribe(raw.response_queue, collect, subscription="spy")
    producer = await bus.producer(raw.request_queue)
    await producer.send(request_body, properties={"id": "bad-1"})
    async with asyncio.timeout(TIMEOUT):
        got = await answers.get()
    assert got == {"error": {"type": "malformed-request", "message": message}, "response": "",
                   "in_token": None, "out_token": None, "model": None, "end_of_stream": True}
    assert llm.prompts == []
    assert (await client.complete("", "still there?", timeout=TIMEOUT)).text == "ok"


async def test_a_body_that_is_not_a_json_object_gets_the_full_error_shape(
        backend: Backend, stop_later: list[Any]) -> None:
    _, raw = await started(backend, ScriptedLLM(default="ok"), stop_later)
    answers: asyncio.Queue[Any] = asyncio.Queue()

    async def collect(m: Any) -> None:
        answers.put_nowait(m.json())

    bus = await backend.connect()
    await bus.subscribe(raw.response_queue, collect, subscription="spy")
    await (await bus.producer(raw.request_queue)).send_bytes(b"{not json",
                                                             properties={"id": "x"})
    async with asyncio.timeout(TIMEOUT):
        got = await answers.get()
    assert got["error"]["type"] == "malformed-request" and got["end_of_stream"] is True
    assert {k: got[k] for k in ("response", "in_token", "out_token", "model")} == {
        "response": "", "in_token": None, "out_token": None, "model": None}


async def test_the_default_queues_are_trustgraphs() -> None:
    bus = await connect(new_memory_url())
    try:
        async with TextCompletionService(bus, ScriptedLLM(default="hi")) as service:
            assert str(service.request_queue) == "request:tg:text-completion:default"
            assert str(service.response_queue) == "response:tg:text-completion:default"
            assert service.subscription == "text-completion-request"
            async with TextCompletionClient(bus) as client:
                assert (await client.complete("", "hello", timeout=TIMEOUT)).text == "hi"
    finally:
        await bus.close()


async def test_chunks_that_come_together_share_a_response(
        memory: Backend, stop_later: list[Any]) -> None:
    text = "The capital of France is Paris, on the Seine, and has been for a thousand years."
    # a window no test outlasts: what is not sent at once goes out with the end
    _, raw = await started(memory, ScriptedLLM([text, text]), stop_later,
                           Coalescing(window=3600))
    messages = [m async for m in raw.stream({"prompt": "Capital?", "streaming": True},
                                            timeout=TIMEOUT)]
    # the first word at once, the rest as soon as the stream ended; the same last response
    assert [m["response"] for m in messages] == ["The ", text[4:], ""]
    assert [m["end_of_stream"] for m in messages] == [False, False, True]
    assert messages[-1]["out_token"] == len(text.split())

    # at most max_chars are held
    _, raw = await started(memory, ScriptedLLM([text]), stop_later,
                           Coalescing(window=3600, max_chars=20))
    messages = [m async for m in raw.stream({"prompt": "Capital?", "streaming": True},
                                            timeout=TIMEOUT)]
    chunks = [m["response"] for m in messages[:-1]]
    assert "".join(chunks) == text and chunks[0] == "The "
    assert all(len(c) >= 20 for c in chunks[1:-1]) and len(chunks) > 3
