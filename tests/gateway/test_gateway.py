"""The gateway over real HTTP and WebSocket, with the config service behind it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.config.test_config_service import JOKE_SERVICE, TELL_JOKE
from toolmesh import Service, connect
from toolmesh.bus.memory import new_memory_url
from toolmesh.config.service import ConfigService
from toolmesh.config.store import open_store
from toolmesh.gateway import Gateway, GatewayOptions
from toolmesh.gateway.deadlines import DEFAULT_DEADLINES, Deadlines


async def start_gateway(tmp_path: Path, *, with_config: bool = True,
                        **options: Any) -> AsyncIterator[Gateway]:
    bus = await connect(new_memory_url())
    store = await open_store(str(tmp_path / "config.db"))
    async with contextlib.AsyncExitStack() as stack:
        if with_config:
            await stack.enter_async_context(ConfigService(bus, store))
        gw = await stack.enter_async_context(Gateway(bus, GatewayOptions(port=0, **options)))
        yield gw
    await store.close()
    await bus.close()


PUT = {"operation": "put", "values": [
    {"type": "tool-service", "key": "joke-service", "value": JOKE_SERVICE},
    {"type": "tool", "key": "tell-joke", "value": TELL_JOKE}]}


async def test_rest_config_round_trip(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    url = gateway.url + "api/v1/config"
    async with http.post(url, json=PUT) as r:
        assert r.status == 200 and await r.json() == {"version": 1}
    async with http.post(url, json={"operation": "list", "type": "tool"}) as r:
        assert (await r.json())["directory"] == ["tell-joke"]
    async with http.post(url, json={"operation": "getvalues", "type": "tool", "workspace": "other"}) as r:
        assert (await r.json())["values"] == []


async def test_rest_config_errors_are_http_200_with_a_config_error(
        gateway: Gateway, http: aiohttp.ClientSession) -> None:
    bad = {"operation": "put", "values": [{"type": "tool", "key": "t", "value": "{}"}]}
    async with http.post(gateway.url + "api/v1/config", json=bad) as r:
        assert r.status == 200
        body = await r.json()
    assert body["error"]["type"] == "config-error"
    assert "field 'type' of tool/t: is required" in body["error"]["message"]


@pytest.mark.parametrize(("path", "data", "status", "type"), [
    ("api/v1/config", b"{not json", 400, "bad-request"),
    ("api/v1/config", b"[1]", 400, "bad-request"),
    ("api/v1/nonsense", b"{}", 404, "unknown-service"),
    ("api/v1/flow/default/service/nonsense", b"{}", 404, "unknown-service"),
])
async def test_rest_bad_requests(gateway: Gateway, http: aiohttp.ClientSession, path: str,
                                 data: bytes, status: int, type: str) -> None:
    async with http.post(gateway.url + path, data=data,
                         headers={"Content-Type": "application/json"}) as r:
        assert r.status == status
        assert (await r.json())["error"]["type"] == type


async def test_a_token_guards_rest(guarded: Gateway, http: aiohttp.ClientSession) -> None:
    url = guarded.url + "api/v1/config"
    async with http.post(url, json={"operation": "config"}) as r:
        assert r.status == 401 and (await r.json())["error"]["type"] == "auth-failed"
    async with http.post(url, json={"operation": "config"},
                         headers={"Authorization": "Bearer wrong"}) as r:
        assert r.status == 401
    async with http.post(url, json={"operation": "config"},
                         headers={"Authorization": "Bearer s3cret"}) as r:
        assert r.status == 200 and (await r.json())["config"] == {}


async def test_bodies_over_the_limit_are_refused(guarded: Gateway, http: aiohttp.ClientSession) -> None:
    big = {"operation": "put", "values": [{"type": "x", "key": "k", "value": "v" * 5000}]}
    async with http.post(guarded.url + "api/v1/config", json=big,
                         headers={"Authorization": "Bearer s3cret"}) as r:
        assert r.status == 413
        body = await r.json()
    assert body["error"]["type"] == "request-too-large" and "4096 bytes" in body["error"]["message"]


async def recv(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.receive_str(), 10))


async def test_websocket_auth_and_multiplexed_config_requests(
        gateway: Gateway, http: aiohttp.ClientSession) -> None:
    async with http.ws_connect(gateway.url + "api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": ""})
        assert await recv(ws) == {"type": "auth-ok", "default_workspace": "default"}
        await ws.send_json({"id": "req-1", "workspace": "default", "service": "config",
                            "request": PUT})
        # null fields are left out: TrustGraph's clients take any "error" key as a failure
        assert await recv(ws) == {"id": "req-1", "complete": True, "response": {"version": 1}}
        for i in range(20):
            await ws.send_json({"id": f"get-{i}", "service": "config",
                                "request": {"operation": "get",
                                            "keys": [{"type": "tool", "key": "tell-joke"}]}})
        got = {}
        for _ in range(20):
            frame = await recv(ws)
            got[frame["id"]] = frame
        assert set(got) == {f"get-{i}" for i in range(20)}
        assert all(f["complete"] and f["response"]["values"][0]["value"] == TELL_JOKE
                   for f in got.values())


async def test_websocket_error_shapes(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    async with http.ws_connect(gateway.url + "api/v1/socket") as ws:
        await ws.send_json({"id": "r1", "service": "nope", "request": {}})
        frame = await recv(ws)
        assert frame["id"] == "r1" and frame["complete"] is True
        assert frame["error"]["type"] == "unknown-service" and "'nope'" in frame["error"]["message"]
        await ws.send_json({"id": "r2", "service": "config", "request": {"operation": "zap"}})
        frame = await recv(ws)
        assert frame["complete"] is True and frame["error"]["type"] == "config-error"
        assert frame["response"]["error"] == frame["error"]
        await ws.send_str("{broken")
        assert (await recv(ws))["error"]["type"] == "bad-request"
        await ws.send_json({"service": "config", "request": {}})
        assert (await recv(ws))["error"]["message"].startswith("a request frame needs an 'id'")
        # the connection still serves
        await ws.send_json({"id": "r3", "service": "config", "request": {"operation": "config"}})
        assert (await recv(ws))["response"]["config"] == {}


async def test_websocket_with_a_token(guarded: Gateway, http: aiohttp.ClientSession) -> None:
    async with http.ws_connect(guarded.url + "api/v1/socket") as ws:
        await ws.send_json({"id": "early", "service": "config", "request": {"operation": "config"}})
        assert (await recv(ws))["error"]["type"] == "auth-required"
        await ws.send_json({"type": "auth", "token": "wrong"})
        assert (await recv(ws))["type"] == "auth-failed"
        await ws.send_json({"type": "auth", "token": "s3cret"})
        assert (await recv(ws))["type"] == "auth-ok"
        await ws.send_json({"id": "ok", "service": "config", "request": {"operation": "config"}})
        assert (await recv(ws))["response"]["config"] == {}
    async with http.ws_connect(guarded.url + "api/v1/socket?token=s3cret") as ws:
        await ws.send_json({"id": "q", "service": "config", "request": {"operation": "config"}})
        assert (await recv(ws))["complete"] is True


async def test_a_missing_config_service_is_a_503_at_once_with_the_hint(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    bus = await connect(new_memory_url())
    async with Gateway(bus, GatewayOptions(port=0)) as gw:
        started = time.monotonic()
        async with http.post(gw.url + "api/v1/config", json={"operation": "config"}) as r:
            body = await r.json()
            assert r.status == 503, body
        assert time.monotonic() - started < 1.0
    assert body["error"]["type"] == "service-unavailable"
    assert "request:tg:config" in body["error"]["message"]
    assert "toolmesh run config" in body["error"]["message"]
    await bus.close()


async def test_within_the_startup_grace_a_request_waits_for_its_service_to_appear(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    bus = await connect(new_memory_url())
    store = await open_store(str(tmp_path / "config.db"))
    async with Gateway(bus, GatewayOptions(port=0, startup_grace=30)) as gw:
        call = asyncio.ensure_future(http.post(gw.url + "api/v1/config",
                                               json={"operation": "config"}))
        await asyncio.sleep(0.5)
        assert not call.done()  # waiting, not refused
        started = time.monotonic()
        async with ConfigService(bus, store):
            async with await call as r:
                assert r.status == 200, await r.text()
            served_after = time.monotonic() - started
    assert served_after < 1.5
    await store.close()
    await bus.close()


class Silent(Service):
    """Consumes requests and never answers them."""

    async def handle(self, request: dict[str, Any], reply: Any) -> None:
        await asyncio.Event().wait()


async def test_a_silent_service_is_a_504_at_the_routes_deadline_or_the_requests(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    bus = await connect(new_memory_url())
    deadlines = Deadlines(seconds={**DEFAULT_DEADLINES, "config": 0.6})
    silent = Silent(bus, request_queue="request:tg:config", response_queue="response:tg:config",
                    subscription="silent", drain_timeout=0.1)
    async with silent, Gateway(bus, GatewayOptions(port=0, deadlines=deadlines)) as gw:
        timings = {}
        for name, headers in (("route", {}), ("asked", {"X-Timeout": "0.3"}),
                              ("more than allowed", {"X-Timeout": "99"})):
            started = time.monotonic()
            async with http.post(gw.url + "api/v1/config", json={"operation": "config"},
                                 headers=headers) as r:
                body = await r.json()
                assert r.status == 504, body
            timings[name] = time.monotonic() - started
            assert body["error"]["type"] == "timeout"
            assert "toolmesh run config" in body["error"]["message"]
        async with http.post(gw.url + "api/v1/config", json={"operation": "config"},
                             headers={"X-Timeout": "soon"}) as r:
            assert r.status == 400
            assert "number of seconds" in (await r.json())["error"]["message"]
    assert 0.5 < timings["route"] < 1.5
    assert 0.2 < timings["asked"] < 0.55
    assert timings["more than allowed"] < 1.5  # capped at the route's 0.6 s
    await bus.close()


async def test_a_client_that_disconnects_cancels_its_request(tmp_path: Path) -> None:
    bus = await connect(new_memory_url())
    silent = Silent(bus, request_queue="request:tg:config", response_queue="response:tg:config",
                    subscription="silent", drain_timeout=0.1)
    async with silent, Gateway(bus, GatewayOptions(port=0)) as gw:
        config = gw.endpoints["config"]
        async with aiohttp.ClientSession() as http:
            with pytest.raises(TimeoutError):
                await http.post(gw.url + "api/v1/config", json={"operation": "config"},
                                timeout=aiohttp.ClientTimeout(total=0.3))
        # the gateway stops waiting for the answer nobody will read (not after 10 s)
        async with asyncio.timeout(2):
            while config._rpc.in_flight:  # type: ignore[attr-defined]
                await asyncio.sleep(0.02)
    await bus.close()
