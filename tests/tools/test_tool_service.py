"""DynamicToolService and ToolServiceClient on every bus backend (SPEC §2)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.conftest import Backend
from tests.tools.sample_services import Broken, Counter, CountingJoke, Gathering, Inventory
from toolmesh import DynamicToolService, RequestClient, RequestError, ToolServiceClient
from toolmesh.tools.queues import topic_queues
from toolmesh.tools.services.joke import JokeService, StreamingJokeService, pick_joke


def client_for(bus: Any, topic: str) -> ToolServiceClient:
    request_queue, response_queue = topic_queues(topic)
    return ToolServiceClient(bus, request_queue=request_queue, response_queue=response_queue)


async def test_the_joke_service_answers_as_the_spec_says(backend: Backend) -> None:
    topic = backend.topic("joke")
    async with JokeService(await backend.connect(), topic=topic), \
            client_for(await backend.connect(), topic) as client:
        text = await client.call(user="alice", config={"style": "pun"},
                                 arguments={"topic": "programming"}, timeout=10)
        assert text == f"Hey alice! Here's a pun for you:\n\n{pick_joke('programming', 'pun')}"
        # the default style is pun, and `user` reaches the service
        text = await client.call(user="bob", arguments={"topic": "food"}, timeout=10)
        assert text.startswith("Hey bob! Here's a pun for you:\n\n")
        with pytest.raises(RequestError) as e:
            await client.call(user="bob", config={"style": "limerick"}, timeout=10)
        assert e.value.type == "tool-service-error" and "limerick" in e.value.message


async def test_the_wire_format_is_exactly_the_spec(backend: Backend) -> None:
    topic = backend.topic("inv")
    request_queue, response_queue = topic_queues(topic)
    async with Inventory(await backend.connect(), topic=topic), \
            RequestClient(await backend.connect(), request_queue=request_queue,
                          response_queue=response_queue) as raw:
        response = await raw.request(
            {"user": "alice", "config": json.dumps({"collection": "customers"}),
             "arguments": json.dumps({"question": "top complaints?"})}, timeout=10)
    assert set(response) == {"error", "response", "end_of_stream"}
    assert response["error"] is None and response["end_of_stream"] is True
    assert json.loads(response["response"]) == {
        "user": "alice", "config": {"collection": "customers"},
        "arguments": {"question": "top complaints?"}}


async def test_a_streaming_service_sends_pieces_and_ends_the_stream(backend: Backend) -> None:
    topic = backend.topic("count")
    request_queue, response_queue = topic_queues(topic)
    bus = await backend.connect()
    async with Counter(bus, topic=topic), client_for(bus, topic) as client, \
            RequestClient(bus, request_queue=request_queue, response_queue=response_queue) as raw:
        assert [p async for p in client.stream(user="u", arguments={"n": 3}, timeout=10)] == \
            ["1;", "2;", "3;"]
        assert await client.call(user="u", arguments={"n": 4}, timeout=10) == "1;2;3;4;"
        assert await client.call(user="u", arguments={"n": 0}, timeout=10) == ""
        responses = [r async for r in raw.stream(
            {"user": "u", "config": "{}", "arguments": '{"n": 2}'}, timeout=10)]
        assert [r["end_of_stream"] for r in responses] == [False, False, True]
        assert all(r["error"] is None for r in responses)
        # a failure after some pieces ends the stream with the error
        with pytest.raises(RequestError, match="counted too far"):
            await client.call(user="u", arguments={"n": 2, "fail_at_end": True}, timeout=10)


async def test_an_exception_in_invoke_is_an_error_response(backend: Backend) -> None:
    topic = backend.topic("broken")
    async with Broken(await backend.connect(), topic=topic), \
            client_for(await backend.connect(), topic) as client:
        with pytest.raises(RequestError) as e:
            await client.call(user="u", timeout=10)
    assert e.value.type == "tool-service-error"
    assert "the database is missing" in e.value.message


@pytest.mark.parametrize(("field", "value", "complaint"), [
    ("config", "{nope", "'config' is not valid JSON"),
    ("arguments", "[1, 2]", "'arguments' must be a JSON object, not list"),
    ("arguments", "42", "'arguments' must be a JSON object, not int"),
    ("user", 7, "'user' must be a string"),
])
async def test_malformed_requests_get_an_error_and_the_service_keeps_serving(
        backend: Backend, field: str, value: Any, complaint: str) -> None:
    topic = backend.topic("inv")
    request_queue, response_queue = topic_queues(topic)
    bus = await backend.connect()
    async with Inventory(bus, topic=topic), client_for(bus, topic) as client, \
            RequestClient(bus, request_queue=request_queue, response_queue=response_queue) as raw:
        body = {"user": "u", "config": "{}", "arguments": "{}", field: value}
        with pytest.raises(RequestError) as e:
            await raw.request(body, timeout=10)
        assert e.value.type == "malformed-request" and complaint in e.value.message
        assert json.loads(await client.call(user="u", arguments={"a": 1}, timeout=10))["arguments"] == {"a": 1}


async def test_explicit_queues_and_missing_fields(backend: Backend) -> None:
    topic = backend.topic("inv")
    request_queue, response_queue = f"request:tg:{topic}", f"response:tg:{topic}"
    bus = await backend.connect()
    service = Inventory(bus, request_queue=request_queue, response_queue=response_queue)
    async with service, ToolServiceClient(bus, request_queue=request_queue,
                                          response_queue=response_queue) as client, \
            RequestClient(bus, request_queue=request_queue, response_queue=response_queue) as raw:
        assert json.loads(await client.call(user="carol", timeout=10)) == {
            "user": "carol", "config": {}, "arguments": {}}
        # a request with no fields at all runs as TrustGraph's default user with empty dicts
        response = await raw.request({}, timeout=10)
        assert json.loads(response["response"])["user"] == "trustgraph"


def test_the_constructor_wants_a_topic_or_both_queues() -> None:
    from toolmesh.bus.memory import MemoryBus

    bus = MemoryBus()
    with pytest.raises(ValueError, match="not both"):
        Inventory(bus, topic="x", request_queue="request:tg:x")
    with pytest.raises(ValueError, match="both request_queue"):
        Inventory(bus, request_queue="request:tg:x")
    with pytest.raises(NotImplementedError):
        asyncio.run(DynamicToolService(bus, topic="x").invoke("u", {}, {}))


async def test_one_service_handles_many_calls_at_once(backend: Backend) -> None:
    topic = backend.topic("gather")
    async with Gathering(await backend.connect(), topic=topic), \
            client_for(await backend.connect(), topic) as client:
        results = await asyncio.gather(*[client.call(user="u", timeout=10)
                                         for _ in range(Gathering.size)])
    assert results == ["together"] * Gathering.size


async def test_replicas_with_the_same_id_share_the_work(backend: Backend) -> None:
    topic = backend.topic("joke")
    replicas = [CountingJoke(await backend.connect(), topic=topic) for _ in range(2)]
    for replica in replicas:
        await replica.start()
    async with client_for(await backend.connect(), topic) as client:
        await asyncio.gather(*[client.call(user="u", arguments={"topic": "food"}, timeout=10)
                               for _ in range(100)])
    assert sum(r.served for r in replicas) == 100 and all(r.served for r in replicas)
    for replica in replicas:
        await replica.stop()


async def test_the_streaming_joke_joins_to_the_plain_joke(backend: Backend) -> None:
    bus = await backend.connect()
    plain, streaming = backend.topic("joke"), backend.topic("joke-s")
    async with JokeService(bus, topic=plain), StreamingJokeService(bus, topic=streaming), \
            client_for(bus, plain) as a, client_for(bus, streaming) as b:
        call = {"user": "dee", "config": {"style": "dad-joke"}, "arguments": {"topic": "animals"}}
        pieces = [p async for p in b.stream(**call, timeout=10)]
        assert len(pieces) > 3
        assert "".join(pieces) == await a.call(**call, timeout=10)
