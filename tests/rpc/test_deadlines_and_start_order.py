"""Missing consumers, deadlines that travel with requests, and draining on stop — on every bus
backend that can show each behaviour."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.conftest import Backend
from toolmesh import RequestClient, RequestError, RequestTimeout, Service
from toolmesh.rpc import deadline
from toolmesh.rpc.service import Reply


def queues(backend: Backend, name: str = "dl") -> dict[str, str]:
    topic = backend.topic(name)
    return {"request_queue": f"request:tg:{topic}", "response_queue": f"response:tg:{topic}"}


def needs_no_consumer_signal(backend: Backend) -> None:
    if backend.name == "pulsar":
        pytest.skip("a Pulsar producer cannot tell that nothing consumes a topic")


class Probe(Service):
    """Answers with the seconds left to answer; ``{"hang": true}`` never answers;
    ``{"sleep": s}`` answers after ``s`` seconds; ``{"ask": {...}}`` asks ``inner`` and answers
    with its answer; ``{"at_once": true}`` answers without ever waiting."""

    def __init__(self, *args: Any, inner: RequestClient | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inner = inner
        self.cancelled = asyncio.Event()
        self.started = asyncio.Event()

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        self.started.set()
        if "at_once" in request:  # never waits: answered within the handler's first step
            await reply({"remaining": deadline.remaining()})
            return
        if "ask" in request:
            assert self.inner is not None
            await reply(await self.inner.request(request["ask"], timeout=600))
            return
        if "raise_timeout" in request:
            raise TimeoutError(request["raise_timeout"])  # the handler's own, not the caller's
        try:
            if request.get("hang"):
                await asyncio.Event().wait()
            await asyncio.sleep(request.get("sleep", 0))
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        await reply({"remaining": deadline.remaining()})


async def test_nothing_consuming_fails_at_once_when_the_client_says_so(backend: Backend) -> None:
    needs_no_consumer_signal(backend)
    async with RequestClient(await backend.connect(), **queues(backend), when_no_consumer="fail",
                             hint="is `toolmesh run probe` running?") as client:
        started = time.monotonic()
        with pytest.raises(RequestError) as e:
            await client.request({"x": 1}, timeout=30)
        elapsed = time.monotonic() - started
    assert e.value.type == "service-unavailable"
    assert str(client.request_queue) in e.value.message
    assert "is `toolmesh run probe` running?" in e.value.message
    assert elapsed < 1.0, f"took {elapsed:.2f} s"
    assert client.in_flight == 0


async def test_a_request_sent_before_its_service_starts_is_served_once_it_does(
        backend: Backend) -> None:
    needs_no_consumer_signal(backend)
    q = queues(backend)
    async with RequestClient(await backend.connect(), **q) as client:
        call = asyncio.ensure_future(client.request({}, timeout=20))
        await asyncio.sleep(0.4)
        assert not call.done()
        started = time.monotonic()
        async with Probe(await backend.connect(), subscription="probe", **q):
            answer = await asyncio.wait_for(call, 10)
        latency = time.monotonic() - started
    assert "remaining" in answer
    # the retry pause is at most a second; usually it is far less
    assert latency < 2.5, f"served {latency:.2f} s after the service started"


async def test_waiting_for_a_consumer_ends_at_the_deadline_with_the_hint(backend: Backend) -> None:
    needs_no_consumer_signal(backend)
    async with RequestClient(await backend.connect(), **queues(backend),
                             hint="is the probe running?") as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as e:
            await client.request({}, timeout=0.6)
        elapsed = time.monotonic() - started
    assert "nothing consumed" in e.value.message and "is the probe running?" in e.value.message
    assert 0.5 < elapsed < 2.0


async def test_a_service_learns_its_callers_deadline_and_its_own_calls_end_sooner(
        backend: Backend) -> None:
    inner_q, outer_q = queues(backend, "inner"), queues(backend, "outer")
    async with Probe(await backend.connect(), subscription="inner", **inner_q), \
            RequestClient(await backend.connect(), **inner_q) as to_inner, \
            Probe(await backend.connect(), subscription="outer", inner=to_inner, **outer_q), \
            RequestClient(await backend.connect(), **outer_q) as client:
        direct = await client.request({}, timeout=5)
        nested = await client.request({"ask": {}}, timeout=5)
        unbounded = await to_inner.request({}, timeout=None)
    assert 4.0 < direct["remaining"] <= 5.0
    # the outer service asked with timeout=600, shortened to its own deadline less a margin
    assert 3.0 < nested["remaining"] <= 4.5
    assert unbounded["remaining"] is None


async def test_a_handler_that_never_waits_works_under_its_callers_deadline_too(
        backend: Backend) -> None:
    # the service runs such a handler's only step by hand, with no timer (see _on_request)
    q = queues(backend)
    async with Probe(await backend.connect(), subscription="probe", **q), \
            RequestClient(await backend.connect(), **q) as client:
        at_once = await client.request({"at_once": True}, timeout=5)
        unbounded = await client.request({"at_once": True}, timeout=None)
        # and the deadline ended with it: the next request is handled under its own
        after = await client.request({"at_once": True}, timeout=30)
    assert 4.0 < at_once["remaining"] <= 5.0
    assert unbounded["remaining"] is None
    assert 29.0 < after["remaining"] <= 30.0


async def test_a_handler_still_running_at_its_callers_deadline_is_cancelled(
        backend: Backend) -> None:
    q = queues(backend)
    probe = Probe(await backend.connect(), subscription="probe", **q)
    async with probe, RequestClient(await backend.connect(), **q) as client:
        with pytest.raises(RequestError) as e:
            await client.request({"hang": True}, timeout=0.8)
        await asyncio.wait_for(probe.cancelled.wait(), 5)
    assert e.value.type == "timeout"


async def test_the_service_answers_each_request_past_its_callers_deadline_with_timeout(
        backend: Backend) -> None:
    q = queues(backend)
    bus = await backend.connect()
    answers: asyncio.Queue[tuple[str | None, Any]] = asyncio.Queue()
    await bus.subscribe(q["response_queue"], lambda m: answers.put_nowait((m.id, m.json())),
                        subscription="spy", inline=True)
    async with Probe(bus, subscription="probe", **q):
        raw = await bus.producer(q["request_queue"])
        # the later deadline first: the earlier one, sent after it, still expires first
        await raw.send({"hang": True}, properties={"id": "later", "timeout": "1.5"})
        await raw.send({"hang": True}, properties={"id": "sooner", "timeout": "0.3"})
        await raw.send({"raise_timeout": "the disk is slow"},
                       properties={"id": "own", "timeout": "30"})
        async with asyncio.timeout(10):
            got = [await answers.get() for _ in range(3)]
    assert [rid for rid, _ in got] == ["own", "sooner", "later"]
    errors = {rid: body["error"] for rid, body in got}
    # a TimeoutError of the handler's own is a failure like any other
    assert errors["own"] == {"type": "service-error", "message": "TimeoutError: the disk is slow"}
    assert errors["sooner"] == {"type": "timeout", "message": "Probe did not finish within the "
                                                              "caller's deadline of 0.3 s"}
    assert errors["later"]["type"] == "timeout" and "1.5 s" in errors["later"]["message"]


async def test_stopping_drains_then_cancels_what_is_left_with_an_error_reply(
        backend: Backend) -> None:
    q = queues(backend)
    probe = Probe(await backend.connect(), subscription="probe", drain_timeout=0.5, **q)
    await probe.start()
    async with RequestClient(await backend.connect(), **q) as client:
        quick = asyncio.ensure_future(client.request({"sleep": 0.2}, timeout=30))
        hung = asyncio.ensure_future(client.request({"hang": True}, timeout=30))
        await asyncio.wait_for(probe.started.wait(), 10)
        await asyncio.sleep(0.05)
        started = time.monotonic()
        await probe.stop()
        stopped_in = time.monotonic() - started
        assert "remaining" in await asyncio.wait_for(quick, 5)
        with pytest.raises(RequestError) as e:
            await asyncio.wait_for(hung, 5)
    assert e.value.type == "service-stopping"
    assert probe.cancelled.is_set()
    assert stopped_in < 2.0, f"stop took {stopped_in:.2f} s with a 0.5 s drain"
