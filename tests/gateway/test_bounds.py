"""The gateway's bounds, over real sockets: whatever a client sends or withholds, memory and
connections stay bounded and every refusal is a JSON error."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.gateway.test_gateway import start_gateway
from toolmesh import Service
from toolmesh.gateway import Gateway
from toolmesh.gateway.bounds import Bounds

JSON = {"Content-Type": "application/json"}
# no pool for unauthenticated connections: the connection cap alone counts the raw
# connections below (the pool is tests/gateway/test_strangers.py's)
BOUNDS = Bounds(max_body=64 * 1024, bodies_in_flight=100 * 1024, body_timeout=1.0,
                idle_timeout=1.0, max_connections=8, ws_in_flight=4, ws_auth_timeout=1.0,
                ws_auth_attempts=2, stranger_share=0)


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    async for gw in start_gateway(tmp_path, bounds=BOUNDS, token="t0ken-bounds"):
        yield gw


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    auth = {"Authorization": "Bearer t0ken-bounds"}
    async with aiohttp.ClientSession(headers=auth) as session:
        yield session


def address(gateway: Gateway) -> tuple[str, int]:
    host, port = gateway.url.split("//")[1].strip("/").split(":")
    return host, int(port)


async def post(http: aiohttp.ClientSession, gateway: Gateway, body: bytes | str,
               headers: dict | None = None) -> tuple[int, dict]:
    async with http.post(gateway.url + "api/v1/config", data=body,
                         headers={**JSON, **(headers or {})}) as r:
        return r.status, await r.json()


def nested(depth: int) -> str:
    return '{"operation": "config", "x": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize(("body", "status", "complaint"), [
    (nested(99), 200, None),
    (nested(100), 400, "nested more than 100 levels"),
    (nested(5000), 400, "nested more than 100 levels"),
    ('{"operation": "get", "keys": [{"type": "t", "key": "\\ud800"}]}', 400, "lone surrogate"),
    (b'{"operation": "\xff\xfe"}', 400, "not valid JSON"),
    ("[1, 2]", 400, "must be a JSON object"),
])
async def test_bodies_that_could_not_travel_on_are_refused_with_400(
        gateway: Gateway, http: aiohttp.ClientSession, body: str | bytes, status: int,
        complaint: str | None) -> None:
    got, answer = await post(http, gateway, body)
    assert got == status, answer
    if complaint:
        assert answer["error"]["type"] == "bad-request" and complaint in answer["error"]["message"]


async def test_a_header_that_is_not_utf8_is_just_a_wrong_token(gateway: Gateway) -> None:
    host, port = address(gateway)
    reader, writer = await asyncio.open_connection(host, port)
    body = b'{"operation": "config"}'
    writer.write(b"POST /api/v1/config HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                 b"application/json\r\nAuthorization: Bearer \xff\xfe\xc3\x28\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert status.startswith(b"HTTP/1.1 401")


async def test_bodies_read_at_once_share_a_budget(gateway: Gateway) -> None:
    host, port = address(gateway)
    # a client that announces 60 KiB and sends it slowly holds 60 KiB of the 100 KiB budget
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"POST /api/v1/config HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                 b"application/json\r\nAuthorization: Bearer t0ken-bounds\r\n"
                 b"Content-Length: 61440\r\n\r\n{")
    await writer.drain()
    await asyncio.sleep(0.2)  # let the gateway start reading it
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer t0ken-bounds"}) as http:
        status, answer = await post(http, gateway, json.dumps(
            {"operation": "config", "pad": "x" * 50_000}))
        assert status == 503 and answer["error"]["type"] == "server-busy"
        # the slow body runs out of time (408) and gives its share back
        assert (await asyncio.wait_for(reader.readline(), 5)).startswith(b"HTTP/1.1 408")
        writer.close()
        status, _ = await post(http, gateway, json.dumps({"operation": "config",
                                                          "pad": "x" * 50_000}))
        assert status == 200


async def test_silent_and_slow_header_connections_are_cut_off(gateway: Gateway) -> None:
    host, port = address(gateway)
    silent = await asyncio.open_connection(host, port)
    slow = await asyncio.open_connection(host, port)
    slow[1].write(b"GET /api/v1/health HTTP/1.1\r\nHost: local")  # never finishes the headers
    await slow[1].drain()
    for reader, writer in (silent, slow):
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the gateway
        writer.close()


async def test_connections_beyond_the_cap_get_503(gateway: Gateway) -> None:
    host, port = address(gateway)
    held = [await asyncio.open_connection(host, port) for _ in range(BOUNDS.max_connections)]
    reader, writer = await asyncio.open_connection(host, port)
    answer = await asyncio.wait_for(reader.read(), 5)
    assert answer.startswith(b"HTTP/1.1 503") and b"server-busy" in answer
    for _, w in held:
        w.close()
    writer.close()


class Silent(Service):
    """Consumes requests and never answers them."""

    async def handle(self, request: dict[str, Any], reply: Any) -> None:
        await asyncio.Event().wait()


async def test_a_websocket_caps_its_requests_in_flight(tmp_path: Path) -> None:
    # a config service that never answers: config requests stay in flight
    async for gw in start_gateway(tmp_path, bounds=BOUNDS, with_config=False):
        silent = Silent(gw.bus, request_queue="request:tg:config",
                        response_queue="response:tg:config", subscription="silent", drain_timeout=0.1)
        async with silent, aiohttp.ClientSession() as http, \
                http.ws_connect(gw.url + "api/v1/socket") as ws:
            await ws.send_json({"type": "auth", "token": ""})
            assert (await ws.receive_json(timeout=5))["type"] == "auth-ok"
            for i in range(BOUNDS.ws_in_flight + 3):
                await ws.send_json({"id": i, "service": "config",
                                    "request": {"operation": "config", "timeout": 30}})
            refused = [await ws.receive_json(timeout=5) for _ in range(3)]
            assert {f["id"] for f in refused} == {4, 5, 6}
            assert all(f["error"]["type"] == "too-many-requests" for f in refused)
            await ws.send_json({"id": "still-open", "service": "nope", "request": {}})
            assert (await ws.receive_json(timeout=5))["id"] == "still-open"


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_websocket_must_authenticate_soon_and_within_a_few_tries(
        gateway: Gateway) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(gateway.url + "api/v1/socket") as ws:
            message = await ws.receive(timeout=5)  # nothing sent: closed after the deadline
            assert message.type == aiohttp.WSMsgType.CLOSE and message.data == 1008
        async with http.ws_connect(gateway.url + "api/v1/socket") as ws:
            for _ in range(BOUNDS.ws_auth_attempts):
                await ws.send_json({"type": "auth", "token": "wrong"})
                assert (await ws.receive_json(timeout=5))["type"] == "auth-failed"
            message = await ws.receive(timeout=5)
            assert message.type == aiohttp.WSMsgType.CLOSE and message.data == 1008
        async with http.ws_connect(gateway.url + "api/v1/socket") as ws:
            await ws.send_json({"type": "auth", "token": "t0ken-bounds"})
            assert (await ws.receive_json(timeout=5))["type"] == "auth-ok"
            await asyncio.sleep(BOUNDS.ws_auth_timeout + 0.5)  # past the deadline: still open
            await ws.send_json({"id": 1, "service": "config", "request": {"operation": "config"}})
            assert (await ws.receive_json(timeout=5))["id"] == 1


async def test_websocket_frames_that_could_not_travel_on_get_error_frames(
        gateway: Gateway) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(
            gateway.url + "api/v1/socket", headers={"Authorization": "Bearer t0ken-bounds"}) as ws:
        await ws.send_str('{"id": "deep", "service": "config", "request": ' + "[" * 500
                          + "]" * 500 + "}")
        frame = await ws.receive_json(timeout=5)
        assert frame["error"]["type"] == "bad-request" and "nested" in frame["error"]["message"]
        await ws.send_str('{"id": "s", "service": "config", "request": {"operation": "\\udc00"}}')
        assert "lone surrogate" in (await ws.receive_json(timeout=5))["error"]["message"]
        await ws.send_bytes(b"\x00\x01")
        assert (await ws.receive_json(timeout=5))["error"]["type"] == "bad-request"
        await ws.send_json({"id": "ok", "service": "config", "request": {"operation": "config"}})
        assert (await ws.receive_json(timeout=5))["id"] == "ok"
