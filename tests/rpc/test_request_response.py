"""Request/response over every bus backend: correlation, streaming, deadlines, errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conftest import Backend
from toolmesh import RequestClient, RequestError, RequestTimeout, Service, ServiceError
from toolmesh.rpc.service import Reply


class Echo(Service):
    """Answers {"echo": request}; {"chunks": n} streams n pieces; {"fail": msg} raises."""

    error_type = "echo-error"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.silent = asyncio.Event()  # set: swallow requests without answering

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        if "silent" in request:
            return
        if "fail" in request:
            raise RuntimeError(request["fail"])
        if "refuse" in request:
            raise ServiceError(request["refuse"], type="refused")
        if "chunks" in request:
            for i in range(request["chunks"]):
                await reply({"error": None, "chunk": i, "end_of_stream": i == request["chunks"] - 1})
            return
        await reply({"error": None, "echo": request})


def queues(backend: Backend) -> dict[str, str]:
    topic = backend.topic("rpc")
    return {"request_queue": f"request:tg:{topic}", "response_queue": f"response:tg:{topic}"}


@pytest.fixture
async def echo(backend: Backend):  # type: ignore[no-untyped-def]
    q = queues(backend)
    service = Echo(await backend.connect(), subscription="echo", **q)
    async with service:
        async with RequestClient(await backend.connect(), **q) as client:
            yield service, client


async def test_a_request_gets_the_response_with_its_id(echo: tuple[Echo, RequestClient]) -> None:
    _, client = echo
    assert await client.request({"x": 1}, timeout=10) == {"error": None, "echo": {"x": 1}}
    assert client.in_flight == 0


async def test_streaming_yields_until_end_of_stream(echo: tuple[Echo, RequestClient]) -> None:
    _, client = echo
    chunks = [r["chunk"] async for r in client.stream({"chunks": 4}, timeout=10)]
    assert chunks == [0, 1, 2, 3]
    assert client.in_flight == 0


async def test_a_long_stream_arrives_in_order_and_collect_gathers_it(
        echo: tuple[Echo, RequestClient]) -> None:
    # responses are handled inline, as they come: none may overtake another
    _, client = echo
    chunks = [r["chunk"] async for r in client.stream({"chunks": 500}, timeout=30)]
    assert chunks == list(range(500))
    assert [r["chunk"] for r in await client.collect({"chunks": 300}, timeout=30)] == \
        list(range(300))
    assert client.in_flight == 0


async def test_a_response_after_the_caller_gave_up_is_dropped(backend: Backend) -> None:
    q = queues(backend)
    bus = await backend.connect()
    held: asyncio.Queue[Any] = asyncio.Queue()

    async def hold(message: Any) -> None:
        held.put_nowait(message)

    await bus.subscribe(q["request_queue"], hold, subscription="slow")
    async with RequestClient(bus, **q) as client:
        call = asyncio.ensure_future(client.request({"x": 1}, timeout=30))
        request = await asyncio.wait_for(held.get(), 10)
        call.cancel()  # the caller gives up (the agent moved on, the user hung up)
        with pytest.raises(asyncio.CancelledError):
            await call
        assert client.in_flight == 0
        # the answer comes anyway, then another call: it gets its own answer, not that one
        responses = await bus.producer(q["response_queue"])
        await responses.send({"error": None, "late": True}, properties={"id": request.id})
        second = asyncio.ensure_future(client.request({"x": 2}, timeout=30))
        again = await asyncio.wait_for(held.get(), 10)
        await responses.send({"error": None, "mine": True}, properties={"id": again.id})
        assert await asyncio.wait_for(second, 10) == {"error": None, "mine": True}
        assert again.id != request.id


async def test_an_error_response_raises_with_its_type_and_message(echo: tuple[Echo, RequestClient]) -> None:
    _, client = echo
    with pytest.raises(RequestError) as e:
        await client.request({"fail": "disk on fire"}, timeout=10)
    # an exception nobody meant to send names its type (str() alone can be as bare as 'x')
    assert (e.value.type, e.value.message) == ("echo-error", "RuntimeError: disk on fire")
    with pytest.raises(RequestError) as e:
        await client.request({"refuse": "not today"}, timeout=10)
    assert (e.value.type, e.value.message) == ("refused", "not today")


class PlainHandle(Service):
    """A handle() that is a plain function, not an async def: ``{"raise": msg}`` raises
    at once, anything else is answered through the awaitable it returns."""

    def handle(self, request: dict[str, Any], reply: Reply) -> Any:  # type: ignore[override]
        if "raise" in request:
            raise ValueError(request["raise"])
        return asyncio.ensure_future(reply({"error": None, "plain": request}))


async def test_a_handle_that_is_not_an_async_def_is_answered_or_fails_like_any(
        backend: Backend) -> None:
    q = queues(backend)
    async with PlainHandle(await backend.connect(), subscription="plain", **q), \
            RequestClient(await backend.connect(), **q) as client:
        assert await client.request({"x": 1}, timeout=10) == {"error": None, "plain": {"x": 1}}
        # raised by the call itself, before there is anything to await: an error response,
        # not a request dropped for its caller to wait out
        with pytest.raises(RequestError) as e:
            await client.request({"raise": "no"}, timeout=10)
    assert (e.value.type, e.value.message) == ("service-error", "ValueError: no")


async def test_a_missed_deadline_raises_and_a_late_response_is_dropped(backend: Backend) -> None:
    q = queues(backend)
    bus = await backend.connect()
    async with RequestClient(bus, **q) as client:
        requests: list[Any] = []
        got_request = asyncio.Event()

        async def hold(message: Any) -> None:
            requests.append(message)
            got_request.set()

        await bus.subscribe(q["request_queue"], hold, subscription="slow")
        with pytest.raises(RequestTimeout) as e:
            await client.request({"x": 1}, timeout=0.2)
        assert e.value.type == "timeout" and isinstance(e.value, TimeoutError)
        assert client.in_flight == 0
        await got_request.wait()
        # The service answers after the deadline: the client must drop it and stay healthy.
        late = await bus.producer(q["response_queue"])
        await late.send({"error": None, "late": True}, properties={"id": requests[0].id})
        await late.send_bytes(b"not json", properties={"id": "unknown"})
        await late.send({"stray": True}, properties={"id": "someone-elses"})
    async with Echo(bus, subscription="echo", **q), RequestClient(bus, **q) as client2:
        assert (await client2.request({"ok": 1}, timeout=10))["echo"] == {"ok": 1}


async def test_a_stream_deadline_bounds_the_whole_stream(echo: tuple[Echo, RequestClient]) -> None:
    _, client = echo
    with pytest.raises(RequestTimeout):
        async for _ in client.stream({"silent": True}, timeout=0.2):
            pass
    assert client.in_flight == 0


async def test_thousands_of_calls_in_flight_from_one_client(backend: Backend,
                                                            echo: tuple[Echo, RequestClient]) -> None:
    _, client = echo
    n = 5000 if backend.name == "memory" else 2000
    results = await asyncio.gather(*[client.request({"n": i}, timeout=60) for i in range(n)])
    assert [r["echo"]["n"] for r in results] == list(range(n))
    assert client.in_flight == 0


async def test_malformed_requests_get_error_responses_and_the_service_keeps_serving(
        backend: Backend, echo: tuple[Echo, RequestClient]) -> None:
    _, client = echo
    bus = client.bus
    answers: asyncio.Queue[Any] = asyncio.Queue()

    async def collect(message: Any) -> None:
        answers.put_nowait((message.id, message.json()))

    await bus.subscribe(client.response_queue, collect, subscription="spy")
    raw = await bus.producer(client.request_queue)
    await raw.send_bytes(b"{broken", properties={"id": "bad-1"})
    await raw.send([1, 2, 3], properties={"id": "bad-2"})
    await raw.send_bytes(b"{broken")  # no id: nobody to answer, logged and dropped
    await raw.send_bytes(b"[" * 100_000 + b"]" * 100_000, properties={"id": "deep"})
    await raw.send_bytes(b'{"s": "\\ud800"}', properties={"id": "surrogate"})
    got = {}
    async with asyncio.timeout(10):
        while len(got) < 4:
            rid, body = await answers.get()
            got[rid] = body
    assert got["bad-1"]["error"]["type"] == "malformed-request"
    assert "not JSON" in got["bad-1"]["error"]["message"]
    assert got["bad-2"]["error"] == {"type": "malformed-request",
                                     "message": "request must be a JSON object, not a JSON list"}
    assert got["deep"]["error"]["type"] == "malformed-request"
    assert "nested too deep" in got["deep"]["error"]["message"]
    assert got["surrogate"]["error"]["type"] == "malformed-request"
    assert "surrogate" in got["surrogate"]["error"]["message"]
    assert (await client.request({"still": "alive"}, timeout=10))["echo"] == {"still": "alive"}


async def test_stopping_the_client_releases_waiting_calls(backend: Backend) -> None:
    q = queues(backend)
    client = RequestClient(await backend.connect(), **q)
    await client.start()
    call = asyncio.ensure_future(client.request({"x": 1}, timeout=30))
    for _ in range(20):
        await asyncio.sleep(0)
    await client.stop()
    with pytest.raises(RequestError) as e:
        await call
    assert e.value.type == "client-closed"


async def test_a_client_that_was_not_started_says_so(backend: Backend) -> None:
    client = RequestClient(await backend.connect(), **queues(backend))
    with pytest.raises(RequestError, match="not started"):
        await client.request({}, timeout=1)
