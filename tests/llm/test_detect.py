"""Which tool-calling strategy works with an LLM, found by trying: against servers that do
tools, only schemas, or neither — and the text-completion service that asks once and keeps
the answer."""

from __future__ import annotations

import json

import pytest

from tests.llm.openai_server import Answer, OpenAITestServer, ReceivedRequest
from toolmesh import RequestClient, connect
from toolmesh.bus.memory import new_memory_url
from toolmesh.llm import LLMError, OpenAICompatible, ScriptedLLM, TextCompletionService
from toolmesh.llm.detect import detect


def capable(*, tools: bool, schema: bool, always_call: bool = False, refuse_tools: bool = False):
    """A model behind a server that does ``tools`` and/or ``schema``d replies as asked."""
    def respond(request: ReceivedRequest) -> Answer:
        body = request.body
        if body.get("tools") and refuse_tools:
            return Answer(status=400, error="registry.ollama.ai/library/x does not support tools")
        if body.get("tools") and tools and ("weather" in request.prompt or always_call):
            return Answer(tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}])
        if body.get("response_format") and schema:
            return Answer(text=json.dumps({"city": "Paris", "country": "France"}))
        return Answer(text="Hello! The Eiffel Tower is in Paris.")
    return respond


@pytest.mark.parametrize(("server", "strategy", "why"), [
    (capable(tools=True, schema=True), "native", "native: works"),
    (capable(tools=False, schema=True), "json", "native: the model answered in text"),
    (capable(tools=False, schema=False), "react", "json: the reply did not match the schema"),
    # llama-cpp-python's chatml-function-calling: calls come back, a text answer never does
    (capable(tools=True, schema=True, always_call=True), "json", "called a tool where none"),
    # Ollama with a model without tool support
    (capable(tools=False, schema=True, refuse_tools=True), "json", "does not support tools"),
])
async def test_the_first_strategy_that_works_is_chosen(server, strategy: str, why: str) -> None:
    async with OpenAITestServer(respond=server) as s, \
            OpenAICompatible(base_url=s.base_url, model="m") as llm:
        detection = await detect(llm)
    assert (detection.strategy, detection.source) == (strategy, "detected")
    assert why in detection.detail, detection.detail
    # every probe is asked at temperature 0, briefly
    assert all(r.body["temperature"] == 0 and r.body["max_tokens"] <= 96 for r in s.requests)


async def test_a_provider_that_knows_its_protocol_is_not_probed() -> None:
    llm = ScriptedLLM(["never used"])
    detection = await detect(llm)
    assert (detection.strategy, detection.source) == ("react", "provider")
    assert llm.remaining == ("never used",) and llm.requests == []


async def test_an_llm_that_cannot_be_reached_teaches_nothing() -> None:
    async with OpenAITestServer() as s:
        url = s.base_url
    async with OpenAICompatible(base_url=url, model="m", timeout=5) as llm:
        with pytest.raises(LLMError, match="cannot reach"):
            await detect(llm)


async def test_the_service_detects_once_and_answers_every_capabilities_request() -> None:
    url = new_memory_url()
    bus = await connect(url)
    async with OpenAITestServer(respond=capable(tools=False, schema=True)) as s, \
            OpenAICompatible(base_url=s.base_url, model="m") as llm, \
            TextCompletionService(bus, llm), \
            RequestClient(bus, request_queue="request:tg:text-completion:default",
                          response_queue="response:tg:text-completion:default") as client:
        answers = [await client.request({"operation": "capabilities"}, timeout=10)
                   for _ in range(3)]
        probes = len(s.requests)
        again = await client.request({"operation": "capabilities", "refresh": True}, timeout=10)
        assert len(s.requests) == 2 * probes  # refresh: detected anew
    await bus.close()
    assert answers[0] == answers[1] == answers[2] == again
    assert answers[0]["tool_calling"] == "json" and answers[0]["source"] == "detected"
    assert answers[0]["llm"] == llm.name and answers[0]["error"] is None


async def test_a_configured_strategy_is_not_detected() -> None:
    bus = await connect(new_memory_url())
    async with OpenAITestServer() as s, OpenAICompatible(base_url=s.base_url, model="m") as llm, \
            TextCompletionService(bus, llm, tool_calling="native"), \
            RequestClient(bus, request_queue="request:tg:text-completion:default",
                          response_queue="response:tg:text-completion:default") as client:
        answer = await client.request({"operation": "capabilities"}, timeout=10)
        assert s.requests == []
    await bus.close()
    assert (answer["tool_calling"], answer["source"]) == ("native", "configured")


def test_an_unknown_strategy_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="auto, native, json, react"):
        TextCompletionService(None, ScriptedLLM(), tool_calling="xml")  # type: ignore[arg-type]
