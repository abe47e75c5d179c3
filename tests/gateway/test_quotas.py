"""One tenant cannot lock the others out (issue 34, item 2), against a real gateway over real
HTTP and WebSockets: a scoped token holds at most its quota of connections and the admin keeps
a reserve; an authenticated WebSocket left idle is closed with a reason."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import pytest
from aiohttp import WSMsgType

from tests.gateway.test_gateway import start_gateway
from toolmesh.gateway import Gateway
from toolmesh.gateway.bounds import Bounds

ADMIN = "admin-quota-tests-9f3c1a7e52d4"
AUTH = {"Authorization": f"Bearer {ADMIN}"}
LIST = {"operation": "list", "type": "tool"}
#: room for a loaded shared machine on every wait
SLACK = 4.0


async def make_token(gw: Gateway, *, workspace: str = "default",
                     capabilities: tuple[str, ...] = ("config:read",)) -> str:
    async with aiohttp.ClientSession() as http, http.post(
            gw.url + "api/v1/token", headers=AUTH,
            json={"operation": "create", "workspaces": [workspace],
                  "capabilities": list(capabilities)}) as r:
        body = await r.json()
    assert r.status == 200 and "plaintext" in body, body
    return body["plaintext"]


async def rest(gw: Gateway, token: str, workspace: str = "default") -> tuple[int, str]:
    """A config list on a connection of its own: ``(status, error type or "ok")``."""
    async with aiohttp.ClientSession() as http, http.post(
            gw.url + "api/v1/config", json=LIST,
            headers={"Authorization": f"Bearer {token}", "X-Workspace": workspace}) as r:
        body = await r.json()
    return r.status, (body.get("error") or {}).get("type", "ok")


async def open_socket(stack: AsyncExitStack, gw: Gateway,
                      token: str) -> tuple[aiohttp.ClientWebSocketResponse, dict]:
    """A WebSocket on a connection of its own that authenticates with a frame; the socket and
    the answer to its auth frame."""
    http = await stack.enter_async_context(aiohttp.ClientSession())
    ws = await stack.enter_async_context(http.ws_connect(gw.url + "api/v1/socket"))
    await ws.send_json({"type": "auth", "token": token})
    async with asyncio.timeout(SLACK):
        answer = await ws.receive_json()
    return ws, answer


async def closed_with(ws: aiohttp.ClientWebSocketResponse) -> tuple[int | None, str]:
    """Wait for the server's close: its code and reason."""
    async with asyncio.timeout(SLACK):
        message = await ws.receive()
    assert message.type == WSMsgType.CLOSE, message
    return message.data, str(message.extra or "")


QUOTA = 4


@pytest.fixture
async def quota_gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    async for gw in start_gateway(tmp_path, token=ADMIN, bounds=Bounds(
            token_connections=QUOTA, workspace_connections=QUOTA + 1)):
        yield gw


async def test_a_read_only_token_holding_its_quota_leaves_room_for_the_admin_and_others(
        quota_gateway: Gateway) -> None:
    gw = quota_gateway
    reader, other, neighbour = (await make_token(gw), await make_token(gw),
                                await make_token(gw, workspace="ws2"))
    async with AsyncExitStack() as stack:
        held = [await open_socket(stack, gw, reader) for _ in range(QUOTA)]
        assert [answer["type"] for _, answer in held] == ["auth-ok"] * QUOTA
        # one more, by frame or by REST on a new connection: refused, and said why
        ws, answer = await open_socket(stack, gw, reader)
        assert answer["type"] == "auth-failed"
        assert answer["error-type"] == "too-many-connections"
        assert f"{QUOTA} connections, its quota" in answer["error"]
        code, reason = await closed_with(ws)
        assert code == 1008 and reason.startswith("too-many-connections"), (code, reason)
        assert await rest(gw, reader) == (429, "too-many-connections")
        # the admin gets in, and so does another token, of this workspace and of another
        assert await rest(gw, ADMIN) == (200, "ok")
        assert (await open_socket(stack, gw, ADMIN))[1]["type"] == "auth-ok"
        assert (await open_socket(stack, gw, other))[1]["type"] == "auth-ok"
        assert await rest(gw, neighbour, "ws2") == (200, "ok")
        # the workspace's quota (QUOTA + 1) counts every token of it
        refused = (await open_socket(stack, gw, other))[1]
        assert refused["error-type"] == "too-many-connections"
        assert "workspace 'default'" in refused["error"]


async def test_the_admin_gets_in_while_tokens_hold_every_other_connection(
        tmp_path: Path) -> None:
    # 12 connections, 3 of them the admin's; no per-token quota: the reserve alone holds
    async for gw in start_gateway(tmp_path, token=ADMIN, bounds=Bounds(
            max_connections=12, admin_share=0.25, token_connections=0,
            workspace_connections=0)):
        reader = await make_token(gw)
        async with AsyncExitStack() as stack:
            held = [await open_socket(stack, gw, reader) for _ in range(9)]
            assert [answer["type"] for _, answer in held] == ["auth-ok"] * 9
            ws, answer = await open_socket(stack, gw, reader)
            assert answer["error-type"] == "server-busy", answer
            assert (await closed_with(ws))[0] == 1008
            assert await rest(gw, reader) == (503, "server-busy")
            assert await rest(gw, ADMIN) == (200, "ok")
            admins = [await open_socket(stack, gw, ADMIN) for _ in range(3)]
            assert [answer["type"] for _, answer in admins] == ["auth-ok"] * 3


async def test_a_token_has_at_most_its_quota_of_requests_in_flight(tmp_path: Path) -> None:
    # startup_grace: a request for the agent (none runs here) waits in flight for its deadline
    async for gw in start_gateway(tmp_path, token=ADMIN, bounds=Bounds(token_requests=2),
                                  startup_grace=30):
        asker = await make_token(gw, capabilities=("agent",))
        async with AsyncExitStack() as stack:
            ws, answer = await open_socket(stack, gw, asker)
            assert answer["type"] == "auth-ok"
            for i in range(3):
                await ws.send_json({"id": i, "service": "agent", "flow": "default",
                                    "timeout": 3, "request": {"question": "hi"}})
            async with asyncio.timeout(SLACK):
                refused = await ws.receive_json()
            assert refused["id"] == 2 and refused["error"]["type"] == "too-many-requests"
            assert "2 requests in flight, its quota" in refused["error"]["message"]
            async with aiohttp.ClientSession() as http, http.post(
                    gw.url + "api/v1/flow/default/service/agent", json={"question": "hi"},
                    headers={"Authorization": f"Bearer {asker}"}) as r:
                assert r.status == 429 and (await r.json())["error"]["type"] == \
                    "too-many-requests"


IDLE = 0.6


async def test_an_idle_authenticated_socket_is_closed_with_a_reason(tmp_path: Path) -> None:
    async for gw in start_gateway(tmp_path, token=ADMIN, bounds=Bounds(ws_idle_timeout=IDLE)):
        reader = await make_token(gw)
        async with AsyncExitStack() as stack:
            # a socket that keeps asking stays open past the timeout
            busy, answer = await open_socket(stack, gw, reader)
            assert answer["type"] == "auth-ok"
            idle, answer = await open_socket(stack, gw, reader)
            assert answer["type"] == "auth-ok"
            start = time.monotonic()
            for i in range(4):  # 4 requests IDLE / 2 apart: 2 × IDLE of activity
                await busy.send_json({"id": i, "service": "config", "request": LIST})
                async with asyncio.timeout(SLACK):
                    assert (await busy.receive_json())["complete"] is True
                await asyncio.sleep(IDLE / 2)  # the client's pace, not a poll
            code, reason = await closed_with(idle)
            closed_after = time.monotonic() - start
            assert code == 1001 and reason.startswith("idle-timeout: no request for 0.6 s"), \
                (code, reason)
            assert IDLE * 0.9 <= closed_after < IDLE + SLACK
            assert not busy.closed
            await busy.send_json({"id": "last", "service": "config", "request": LIST})
            async with asyncio.timeout(SLACK):
                assert (await busy.receive_json())["id"] == "last"
