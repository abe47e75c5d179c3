"""The prompt service and client on every bus backend, with a real config service (SQLite)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.prompt.harness import TIMEOUT, FakeTextCompletion, Stack, queues
from toolmesh import RequestError, ServiceError
from toolmesh.config.service import ConfigService
from toolmesh.config.store import open_store
from toolmesh.prompt import PromptClient, PromptService


async def test_the_default_template_is_rendered_and_answered_on_trustgraphs_wire(
        stack: Stack) -> None:
    r = await stack.raw.request({"id": "question", "terms": {"question": json.dumps("Why is the sky blue?")},
                                 "streaming": False}, timeout=TIMEOUT)
    assert r == {"error": None, "text": "Why is the sky blue?", "object": None,
                 "end_of_stream": True, "in_token": 20, "out_token": 20, "model": "echo-1"}
    assert stack.llm.requests == [{"system": "", "prompt": "Why is the sky blue?",
                                   "streaming": False}]
    # terms that are not JSON text are taken as they are
    r = await stack.raw.request({"id": "question", "terms": {"question": "plain words"}},
                                timeout=TIMEOUT)
    assert r["text"] == "plain words"


async def test_agent_react_terms_arrive_decoded(stack: Stack) -> None:
    tools = [{"name": "tell-joke", "description": "Tell a joke", "arguments": [
        {"name": "topic", "type": "string", "description": "The topic", "required": True}]}]
    history = [{"thought": "t", "action": "tell-joke", "arguments": {"topic": "ü"},
                "observation": "ha"}]
    prompt = await stack.ask("agent-react", question="Joke?", tools=tools, history=history,
                             context="")
    assert "Tool: tell-joke\nDescription: Tell a joke\nArguments:\n- topic (string): The topic\n" \
        in prompt
    assert 'Action: tell-joke\nArgs: {"topic": "ü"}\nObservation: ha\n' in prompt


async def test_a_config_item_overrides_a_default_live_and_its_deletion_reverts(
        stack: Stack) -> None:
    assert await stack.ask("question", question="Hi") == "Hi"
    await stack.put({"question": {"system": "Be brief.", "prompt": "Q: {{ question }}\nA:"}})
    assert await stack.ask("question", question="Hi") == "Q: Hi\nA:"
    assert stack.llm.requests[-1]["system"] == "Be brief."
    assert stack.service.templates["question"].system == "Be brief."
    await stack.put({"greet": {"prompt": "Hello {{ name }}"}})  # a new template, no restart
    assert await stack.ask("greet", name="Ana") == "Hello Ana"
    await stack.delete("question", "greet")
    assert await stack.ask("question", question="Hi") == "Hi"
    assert stack.llm.requests[-1]["system"] == ""
    assert set(stack.service.templates) == {"question", "agent-react", "agent-json", "agent-native"}


async def test_a_broken_config_value_keeps_its_previous_template_and_others_apply(
        stack: Stack) -> None:
    await stack.put({"greet": {"prompt": "Hello {{ name }}"}})
    await stack.put({"greet": {"prompt": "Hello {{ name"},  # syntax error
                     "question": "not json",
                     "shout": {"prompt": "{{ word | upper }}!"},
                     "nothing": {"system": "no prompt"}})
    assert await stack.ask("greet", name="Ana") == "Hello Ana"
    assert await stack.ask("question", question="Hi") == "Hi"
    assert await stack.ask("shout", word="hey") == "HEY!"
    with pytest.raises(RequestError, match="unknown prompt template 'nothing'"):
        await stack.ask("nothing")


async def test_items_python_cannot_parse_are_skipped_with_a_warning_and_others_apply(
        stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    # Before, one such item raised RecursionError/ValueError out of applying the config: no
    # version applied at all (stack.put would time out waiting for it), for every later put too.
    await stack.put({"greet": {"prompt": "Hello {{ name }}"}})
    unparsable = {
        "deep": "[" * 5000 + "]" * 5000,
        "huge": '{"prompt": "p", "n": 1' + "0" * 5000 + "}",
        "surrogate": '{"prompt": "\\ud800"}',
        "too-nested-to-compile": {"prompt": "{{ " + "(" * 200 + "1" + ")" * 200 + " }}"},
    }
    with caplog.at_level(logging.WARNING, "toolmesh.prompt"):
        await stack.put({**unparsable, "shout": {"prompt": "{{ word | upper }}!"},
                         "greet": "[" * 5000 + "]" * 5000})
    assert await stack.ask("shout", word="hey") == "HEY!"
    assert await stack.ask("greet", name="Ana") == "Hello Ana"  # kept what it had
    for key in unparsable:
        assert key not in stack.service.templates
        assert f"config prompt/{key} (version" in caplog.text
    assert "config prompt/greet (version" in caplog.text
    await stack.put({"later": {"prompt": "still {{ x }}"}})  # later versions apply too
    assert await stack.ask("later", x="applied") == "still applied"


async def test_terms_python_cannot_decode_are_a_prompt_error(stack: Stack) -> None:
    for term, message in [
            ("[" * 5000 + "]" * 5000, "term 'question' is nested more than 100 levels deep"),
            ("1" + "0" * 5000, "term 'question' holds an integer of more than 4300 digits")]:
        r = await stack.raw.request({"id": "question", "terms": {"question": term}},
                                    timeout=TIMEOUT)
        assert r["error"] == {"type": "prompt-error", "message": message}
    # text that is not JSON at all is still taken as it is
    assert await stack.raw.request({"id": "question", "terms": {"question": "plain [text"}},
                                   timeout=TIMEOUT) == {
        "error": None, "text": "plain [text", "object": None, "end_of_stream": True,
        "in_token": 11, "out_token": 11, "model": "echo-1"}


async def test_a_json_template_answers_with_the_json_object(stack: Stack) -> None:
    await stack.put({"extract": {"prompt": "Names in: {{ text }}", "response-type": "json"}})
    stack.llm.answers["Names in: Ana met Åsa"] = 'Sure!\n```json\n{"names": ["Ana", "Åsa"]}\n```'
    r = await stack.raw.request({"id": "extract", "terms": {"text": '"Ana met Åsa"'}},
                                timeout=TIMEOUT)
    assert r["error"] is None and r["text"] is None
    assert json.loads(r["object"]) == {"names": ["Ana", "Åsa"]}
    assert json.loads(await stack.ask("extract", text="Ana met Åsa")) == {"names": ["Ana", "Åsa"]}
    # streaming asked for: still one response, the whole object
    pieces = [p async for p in stack.client.stream("extract", {"text": "Ana met Åsa"},
                                                   timeout=TIMEOUT)]
    assert [json.loads(p) for p in pieces] == [{"names": ["Ana", "Åsa"]}]

    stack.llm.answers["Names in: nobody"] = "I could not find any names in that text."
    with pytest.raises(RequestError) as e:
        await stack.ask("extract", text="nobody")
    assert e.value.type == "prompt-error"
    assert "template 'extract' expects a JSON answer" in e.value.message
    assert "I could not find any names" in e.value.message


async def test_streaming_sends_a_response_per_chunk_then_the_end(stack: Stack) -> None:
    question = "one two three"
    responses = [r async for r in stack.raw.stream(
        {"id": "question", "terms": {"question": json.dumps(question)}, "streaming": True},
        timeout=TIMEOUT)]
    assert [(r["text"], r["end_of_stream"]) for r in responses] == [
        ("one ", False), ("two ", False), ("three", False), ("", True)]
    assert all(r["error"] is None for r in responses)
    assert (responses[-1]["in_token"], responses[-1]["model"]) == (13, "echo-1")
    assert stack.llm.requests[-1]["streaming"] is True
    pieces = [p async for p in stack.client.stream("question", {"question": question},
                                                   timeout=TIMEOUT)]
    assert pieces == ["one ", "two ", "three"]


async def test_bad_requests_are_prompt_errors_and_the_service_keeps_serving(stack: Stack) -> None:
    with pytest.raises(RequestError) as e:
        await stack.ask("no-such-template", question="x")
    assert e.value.type == "prompt-error"
    assert e.value.message == ("unknown prompt template 'no-such-template' in workspace "
                               "'default'; known templates: agent-json, agent-native, agent-react, question")
    with pytest.raises(RequestError) as e:
        await stack.ask("question")
    assert e.value.type == "prompt-error" and "'question' is undefined" in e.value.message
    r = await stack.raw.request({"id": "question", "terms": ["question"]}, timeout=TIMEOUT)
    assert r["error"]["type"] == "prompt-error" and "'terms' must be an object" in r["error"]["message"]
    assert set(r) == {"error", "text", "object", "end_of_stream", "in_token", "out_token", "model"}
    assert stack.llm.requests == []  # nothing reached the LLM
    assert await stack.ask("question", question="still here?") == "still here?"


async def test_an_upstream_error_is_passed_on(stack: Stack) -> None:
    stack.llm.answers["overload me"] = ServiceError("the model is overloaded", type="llm-error")
    for streaming in (False, True):
        r = [x async for x in stack.raw.stream(
            {"id": "question", "terms": {"question": '"overload me"'}, "streaming": streaming},
            timeout=TIMEOUT)]
        assert r == [{"error": {"type": "llm-error", "message": "the model is overloaded"},
                      "text": None, "object": None, "end_of_stream": True,
                      "in_token": None, "out_token": None, "model": None}]
    assert await stack.ask("question", question="fine") == "fine"


async def test_no_text_completion_is_a_timeout_error_and_serving_goes_on(backend: Backend) -> None:
    topic = backend.topic("prompt")
    llm_queues, prompt_queues = queues(topic, "llm"), queues(topic, "prompt")
    config_queues = {**queues(topic, "config"), "push_queue": f"notify:tg:{topic}-config"}
    # No config service either: start must still succeed, serving the defaults.
    service = PromptService(
        await backend.connect(), **prompt_queues, config_queues=config_queues,
        config_timeout=0.2, timeout=0.3,
        text_completion_request_queue=llm_queues["request_queue"],
        text_completion_response_queue=llm_queues["response_queue"])
    async with service, PromptClient(await backend.connect(), **prompt_queues) as client:
        assert service.config_version == -1
        with pytest.raises(RequestError) as e:
            await client.render_and_complete("question", {"question": "anyone?"}, timeout=TIMEOUT)
        assert e.value.type == "timeout"
        assert llm_queues["request_queue"] in e.value.message
        async with FakeTextCompletion(await backend.connect(), queues=llm_queues):
            assert await client.render_and_complete(
                "question", {"question": "now?"}, timeout=TIMEOUT) == "now?"


async def test_config_that_comes_up_after_the_service_is_applied(
        backend: Backend, tmp_path: Path) -> None:
    topic = backend.topic("prompt")
    llm_queues, prompt_queues = queues(topic, "llm"), queues(topic, "prompt")
    config_queues = {**queues(topic, "config"), "push_queue": f"notify:tg:{topic}-config"}
    store = await open_store(str(tmp_path / "config.db"))
    await store.put("default", [("prompt", "question", json.dumps({"prompt": "Q: {{question}}"}))])
    service = PromptService(
        await backend.connect(), **prompt_queues, config_queues=config_queues, config_timeout=0.2,
        text_completion_request_queue=llm_queues["request_queue"],
        text_completion_response_queue=llm_queues["response_queue"])
    async with FakeTextCompletion(await backend.connect(), queues=llm_queues), service, \
            PromptClient(await backend.connect(), **prompt_queues) as client:
        assert await client.render_and_complete("question", {"question": "x"}, timeout=TIMEOUT) == "x"
        async with ConfigService(await backend.connect(), store, **config_queues):
            async with asyncio.timeout(TIMEOUT):
                await service.wait_for_config(1)
            assert await client.render_and_complete(
                "question", {"question": "x"}, timeout=TIMEOUT) == "Q: x"
    await store.close()
