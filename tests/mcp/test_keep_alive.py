"""The HTTP client of pooled sessions (``toolmesh.mcp.transports``): calls reuse their TCP
connections (the server counts the connections it accepted) against every way an SDK server
answers a POST (an SSE stream, ``application/json``, stateless); the part that makes SSE
answers reusable (``_FinishOnClose``) gives up on a stream that does not end, or a call
cancelled; and sessions share one TLS context."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from tests.mcp.servers import start_server
from tests.mcp.test_sessions import Target
from toolmesh.mcp import SessionPool, transports
from toolmesh.mcp.addresses import DEFAULT_POLICY
from toolmesh.mcp.transports import _FinishOnClose

#: how the test server answers: (transport, its extra command-line arguments)
KINDS = {
    "sse-answers": ("streamable-http", ()),
    "json-answers": ("streamable-http", ("--json-response",)),
    "stateless": ("streamable-http", ("--stateless",)),
    "legacy-sse": ("sse", ()),
}


@pytest.fixture
async def pool() -> AsyncIterator[SessionPool]:
    pool = SessionPool(connect_timeout=20)
    yield pool
    await pool.close()


async def connections(pool: SessionPool, target: Target) -> int:
    result = await pool.call_tool(target.tool("stats"), {}, timeout=20)
    assert isinstance(result.object, dict), result
    return result.object["connections"]


@pytest.mark.parametrize("kind", KINDS)
async def test_sequential_calls_reuse_the_sessions_connections(
        pool: SessionPool, kind: str) -> None:
    transport, args = KINDS[kind]
    process = await start_server(transport, args=args)
    try:
        target = Target(transport, {"url": process.url, "transport": transport}, process)
        before = await connections(pool, target)
        for i in range(20):
            assert (await pool.call_tool(target.tool("echo"), {"text": f"t{i}"},
                                         timeout=20)).text == f"t{i}"
        # The SDK's own client opened one per call over SSE answers (21 here): it closes the
        # answer as soon as it has the response, before the server ends the stream. A POST
        # may still find the previous one being read to its end and take another.
        assert await connections(pool, target) - before <= 2
    finally:
        await pool.close()  # before the server goes: the session says goodbye
        await process.stop()


async def test_a_burst_of_concurrent_calls_keeps_its_connections_for_the_next(
        pool: SessionPool) -> None:
    process = await start_server("streamable-http")
    try:
        target = Target("streamable-http", {"url": process.url}, process)
        together = target.tool("together")

        async def burst(group: str) -> None:
            # 30 calls that the server answers only once all 30 are in flight, so they hold
            # 30 connections however slowly they start; httpx keeps only 20 idle by default
            arrived = await asyncio.gather(*(
                pool.call_tool(together, {"group": group, "n": 30}, timeout=20)
                for _ in range(30)))
            assert max(int(r.text) for r in arrived) == 30

        await burst("first")
        await asyncio.sleep(0.3)  # every answer read to its end
        before = await connections(pool, target)
        assert before >= 30
        await burst("second")
        assert await connections(pool, target) - before <= 2
    finally:
        await pool.close()
        await process.stop()


class Body:
    """A response body as httpx's transport gives it: ``chunks``, then the end, or (``hang``)
    nothing more, ever; remembers what was read and whether it was closed."""

    def __init__(self, *chunks: bytes, hang: bool = False) -> None:
        self.chunks = list(chunks)
        self.hang = hang
        self.read: list[bytes] = []
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.read.append(chunk)
            yield chunk
        if self.hang:
            await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


async def first(stream: _FinishOnClose) -> bytes:
    async for chunk in stream:
        return chunk  # the SDK stops at the response, leaving the rest unread
    raise AssertionError("no chunk")


async def test_an_answer_closed_early_is_read_to_its_end_first() -> None:
    body = Body(b"event: message\n", b"data: {}\n\n", b"")
    stream = _FinishOnClose(body)  # type: ignore[arg-type]
    assert await first(stream) == b"event: message\n"
    await stream.aclose()
    assert body.read == body.chunks and body.closed


async def test_a_never_read_answer_is_read_too() -> None:
    body = Body(b"Accepted")  # a 202 to a notification: the SDK reads none of it
    await _FinishOnClose(body).aclose()  # type: ignore[arg-type]
    assert body.read == [b"Accepted"] and body.closed


async def test_a_stream_that_does_not_end_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transports, "FINISH_SECONDS", 0.2)
    body = Body(b"data: {}\n\n", hang=True)
    stream = _FinishOnClose(body)  # type: ignore[arg-type]
    await first(stream)
    start = time.monotonic()
    await stream.aclose()
    assert 0.15 < time.monotonic() - start < 2 and body.closed


async def test_no_more_than_a_few_bytes_are_read_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transports, "FINISH_BYTES", 100)
    body = Body(*[b"x" * 60] * 10)
    stream = _FinishOnClose(body)  # type: ignore[arg-type]
    await first(stream)
    await stream.aclose()
    assert len(body.read) == 3 and body.closed  # 1 read by the caller, 2 more past 100 bytes


async def test_a_cancelled_call_closes_at_once() -> None:
    body = Body(b"data: {}\n\n", hang=True)
    stream = _FinishOnClose(body)  # type: ignore[arg-type]
    started = asyncio.Event()

    async def call() -> Any:
        await first(stream)
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            await stream.aclose()  # as the SDK closes a POST it aborts

    task = asyncio.create_task(call())
    await started.wait()
    start = time.monotonic()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert time.monotonic() - start < transports.FINISH_SECONDS / 2 and body.closed


@pytest.mark.parametrize(("method", "headers", "finished"), [
    ("POST", {"transfer-encoding": "chunked", "content-type": "text/event-stream"}, True),
    ("POST", {"content-length": "8"}, True),
    ("POST", {}, False),  # the answer ends with the connection: nothing to keep
    ("GET", {"transfer-encoding": "chunked"}, False),  # the session's long-lived SSE stream
])
async def test_which_answers_are_read_to_their_end(method: str, headers: dict[str, str],
                                                   finished: bool) -> None:
    response = httpx2.Response(200, headers=headers, stream=Body(),  # type: ignore[arg-type]
                               request=httpx2.Request(method, "http://127.0.0.1/mcp"))
    await transports._finish_on_close(response)
    assert isinstance(response.stream, _FinishOnClose) is finished


async def test_sessions_share_one_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    # making a TLS context loads the CA bundle (~30 ms): once per process, not per session
    made: list[dict[str, Any]] = []
    real = httpx2.AsyncClient

    def spy(**options: Any) -> httpx2.AsyncClient:
        made.append(options)
        return real(**options)

    monkeypatch.setattr(httpx2, "AsyncClient", spy)
    backend = transports.GuardedBackend(DEFAULT_POLICY, "any")
    make = transports._client_factory(transports.HttpWatch(), backend)
    for client in (make(), make(headers={"Authorization": "Bearer t"})):
        await client.aclose()
    contexts = [options["transport"]._pool._ssl_context for options in made]
    context = contexts[0]
    assert context is contexts[1] is transports.tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname  # still checked
