"""A tool service written with the SDK runs each call once per idempotency key (the request's
id when it carries none): a repeat gets the first run's answer, a repeat that comes while the
first still runs waits for it, and a service may opt out (docs/tool-services.md)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import asyncpg
import pytest

from tests.conftest import Backend
from toolmesh import DynamicToolService, RequestClient, RequestError, ServiceError
from toolmesh.tools import ToolServiceClient, call_key
from toolmesh.tools.dedupe import Limits, MemoryDedupe
from toolmesh.tools.dedupe.postgres import PostgresDedupe
from toolmesh.tools.queues import topic_queues

POSTGRES_URL = os.environ.get("TOOLMESH_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test")


class Sender(DynamicToolService):
    """Counts its runs; ``gate``: runs wait until it opens; ``fail``: runs raise this many
    times first; ``pieces``: streams that many pieces."""

    def __init__(self, *args: Any, pieces: int = 0, fail: int = 0, size: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runs: list[str | None] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.entered = asyncio.Event()
        self.pieces, self.fail, self.size = pieces, fail, size

    def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> Any:
        if self.pieces:
            return self._stream(arguments)
        return self._once(arguments)

    async def _once(self, arguments: dict[str, Any]) -> str:
        await self._run()
        return f"sent to {arguments['to']} (run {len(self.runs)})" + "x" * self.size

    async def _stream(self, arguments: dict[str, Any]) -> AsyncIterator[str]:
        await self._run()
        for n in range(self.pieces):
            yield f"piece {n} of run {len(self.runs)};"

    async def _run(self) -> None:
        self.runs.append(call_key())
        self.entered.set()
        await self.gate.wait()
        if self.fail:
            self.fail -= 1
            raise ServiceError("the mail server said no", type="tool-service-error")


class Quiet(Sender):
    dedupe_calls = False


def _client(bus: Any, topic: str) -> ToolServiceClient:
    request_queue, response_queue = topic_queues(topic)
    return ToolServiceClient(bus, request_queue=request_queue, response_queue=response_queue)


async def _call(client: ToolServiceClient, key: str | None = "d1/1/c1", to: str = "bob",
                user: str = "alice") -> str:
    return await client.call(user=user, arguments={"to": to}, key=key, timeout=10)


async def test_a_repeated_key_runs_once_and_gets_the_first_answer(memory: Backend) -> None:
    bus = await memory.connect()
    topic = memory.topic("send")
    async with Sender(bus, topic=topic) as service, _client(bus, topic) as client:
        first = await _call(client)
        again = await _call(client)
        other = await _call(client, key="d1/1/c2")
    assert first == again == "sent to bob (run 1)"
    assert other == "sent to bob (run 2)"
    assert service.runs == ["d1/1/c1", "d1/1/c2"]


async def test_a_repeat_during_the_run_waits_for_it(memory: Backend) -> None:
    bus = await memory.connect()
    topic = memory.topic("send")
    async with Sender(bus, topic=topic) as service, _client(bus, topic) as client:
        service.gate.clear()
        first = asyncio.ensure_future(_call(client))
        await service.entered.wait()
        repeats = [asyncio.ensure_future(_call(client)) for _ in range(3)]
        await asyncio.sleep(0.1)
        assert not any(r.done() for r in repeats)
        service.gate.set()
        answers = await asyncio.gather(first, *repeats)
    assert answers == ["sent to bob (run 1)"] * 4
    assert service.runs == ["d1/1/c1"]


async def test_a_request_delivered_again_without_a_key_runs_once(memory: Backend) -> None:
    """No key (TrustGraph's agent sends none): the request's id stands in for one."""
    bus = await memory.connect()
    topic = memory.topic("send")
    request_queue, response_queue = topic_queues(topic)
    body = {"user": "alice", "config": "{}", "arguments": '{"to": "bob"}'}
    async with Sender(bus, topic=topic) as service, \
            RequestClient(bus, request_queue=request_queue, response_queue=response_queue) as raw:
        id = f"req-{uuid.uuid4().hex}"
        answers = [await raw.request(body, timeout=10, request_id=id) for _ in range(2)]
        fresh = await raw.request(body, timeout=10)
    assert [a["response"] for a in answers] == ["sent to bob (run 1)"] * 2
    assert fresh["response"] == "sent to bob (run 2)"
    assert service.runs == [None, None]  # call_key() is the caller's key alone


async def test_a_streamed_answer_is_sent_again_piece_by_piece(memory: Backend) -> None:
    bus = await memory.connect()
    topic = memory.topic("send")
    async with Sender(bus, topic=topic, pieces=3) as service, _client(bus, topic) as client:
        first = [p async for p, _ in client.responses(user="u", arguments={"to": "b"},
                                                      key="k", timeout=10)]
        again = [p async for p, _ in client.responses(user="u", arguments={"to": "b"},
                                                      key="k", timeout=10)]
    assert first == again == ["piece 0 of run 1;", "piece 1 of run 1;", "piece 2 of run 1;", ""]
    assert len(service.runs) == 1


async def test_a_failed_run_keeps_nothing_and_its_repeat_runs(memory: Backend) -> None:
    bus = await memory.connect()
    topic = memory.topic("send")
    async with Sender(bus, topic=topic, fail=1) as service, _client(bus, topic) as client:
        with pytest.raises(RequestError, match="the mail server said no"):
            await _call(client)
        assert await _call(client) == "sent to bob (run 2)"
        assert await _call(client) == "sent to bob (run 2)"
    assert len(service.runs) == 2


async def test_a_key_sent_again_with_another_call_is_refused(memory: Backend) -> None:
    bus = await memory.connect()
    topic = memory.topic("send")
    async with Sender(bus, topic=topic) as service, _client(bus, topic) as client:
        await _call(client)
        with pytest.raises(RequestError) as e:
            await _call(client, to="mallory")
        with pytest.raises(RequestError) as other_user:
            await _call(client, user="mallory")
    assert e.value.type == other_user.value.type == "idempotency-key-reused"
    assert "'d1/1/c1' was used for another call" in e.value.message
    assert len(service.runs) == 1


async def test_a_result_too_big_to_keep_is_not_run_again(memory: Backend) -> None:
    bus = await memory.connect()
    topic = memory.topic("send")
    store = MemoryDedupe(limits=Limits(max_result=1000))
    async with Sender(bus, topic=topic, size=2000, dedupe=store) as service, \
            _client(bus, topic) as client:
        assert len(await _call(client)) > 2000
        with pytest.raises(RequestError) as e:
            await _call(client)
    assert e.value.type == "already-ran"
    assert "bigger than tool service" in e.value.message and "(1000 bytes)" in e.value.message
    assert len(service.runs) == 1


async def test_a_service_may_opt_out(memory: Backend) -> None:
    bus = await memory.connect()
    for make in (lambda topic: Sender(bus, topic=topic, dedupe=False),
                 lambda topic: Quiet(bus, topic=topic)):
        topic = memory.topic("send")
        async with make(topic) as service, _client(bus, topic) as client:
            assert [await _call(client) for _ in range(2)] == [
                "sent to bob (run 1)", "sent to bob (run 2)"]
            assert service.dedupe is None


def test_dedupe_takes_a_store_or_a_yes_or_no(memory: Backend) -> None:
    with pytest.raises(TypeError, match="dedupe must be True, False or a DedupeStore"):
        Sender(object(), topic="t", dedupe="memory")  # type: ignore[arg-type]


@pytest.fixture
async def shared_url() -> AsyncIterator[str]:
    schema = f"tm_dedupe_{uuid.uuid4().hex[:10]}"
    yield f"{POSTGRES_URL}?schema={quote(schema)}"
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await conn.close()


@pytest.mark.postgres
async def test_replicas_sharing_postgres_run_a_key_once(memory: Backend,
                                                        shared_url: str) -> None:
    """Two replicas (one id, competing for the requests), one store in PostgreSQL: the same
    key sent to both at once runs on one, and the other answers what it answered."""
    bus = await memory.connect()
    topic = memory.topic("send")
    stores = [PostgresDedupe(shared_url), PostgresDedupe(shared_url)]
    replicas = [Sender(bus, topic=topic, id="sender", dedupe=store) for store in stores]
    try:
        for replica in replicas:
            replica.gate.clear()
            await replica.start()
        async with _client(bus, topic) as client:
            calls = [asyncio.ensure_future(_call(client)) for _ in range(4)]
            async with asyncio.timeout(10):
                await asyncio.wait([asyncio.ensure_future(r.entered.wait()) for r in replicas],
                                   return_when=asyncio.FIRST_COMPLETED)
            await asyncio.sleep(0.3)  # the other replica's deliveries reach the store
            for replica in replicas:
                replica.gate.set()
            answers = await asyncio.gather(*calls)
    finally:
        for replica in replicas:
            await replica.stop()
        for store in stores:
            await store.close()
    assert len(set(answers)) == 1
    assert sum(len(r.runs) for r in replicas) == 1
