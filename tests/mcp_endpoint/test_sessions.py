"""/mcp sessions are resources of their token (mcp_endpoint/session_table.py), seen from the
wire: raw JSON-RPC over HTTP against a real ``toolmesh serve`` with its limits scaled down by
flags. One token once filled the whole session table and locked everyone out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx2
import pytest

from tests.gateway.test_scoped_tokens import ADMIN, create
from tests.mcp_endpoint.test_endpoint import INITIALIZE, MCP_HEADERS
from tests.servers import Served, toolmesh_serve

PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
CALL = {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "tell-joke", "arguments": {"topic": "food"}}}


def auth(token: str) -> dict[str, str]:
    """The headers of a request with ``token`` (none: no token set, a local caller)."""
    return {**MCP_HEADERS, "Authorization": f"Bearer {token}"} if token else dict(MCP_HEADERS)


async def initialize(http: httpx2.AsyncClient, served: Served, token: str) -> httpx2.Response:
    return await http.post(served.url + "mcp", json=INITIALIZE, headers=auth(token))


async def open_session(http: httpx2.AsyncClient, served: Served, token: str) -> str:
    opened = await initialize(http, served, token)
    assert opened.status_code == 200, opened.text
    return opened.headers["mcp-session-id"]


def in_session(token: str, session: str) -> dict[str, str]:
    return {**auth(token), "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}


async def answers(http: httpx2.AsyncClient, served: Served, token: str, session: str) -> int:
    """The status of a ``ping`` in ``session``: 200 while it is open, 404 once it ended."""
    return (await http.post(served.url + "mcp", json=PING,
                            headers=in_session(token, session))).status_code


@asynccontextmanager
async def streaming(served: Served, token: str, session: str) -> AsyncIterator[None]:
    """The session's GET stream held open (a request in flight: the session is in use)."""
    async with httpx2.AsyncClient(timeout=30) as http, http.stream(
            "GET", served.url + "mcp", headers={**in_session(token, session),
                                                "Accept": "text/event-stream"}) as stream:
        assert stream.status_code == 200
        yield


async def test_one_tokens_flood_of_sessions_leaves_other_tenants_and_the_admin_in(
        tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, "--token-mcp-sessions", "3",
                              "--workspace-mcp-sessions", "5", "--mcp-sessions", "8",
                              extra_env={"TOOLMESH_GATEWAY_TOKEN": ADMIN}) as served:
        attacker = await create(served, "-w", "default", "-c", "tools:invoke")
        neighbour = await create(served, "-w", "default", "-c", "tools:invoke")
        elsewhere = await create(served, "-w", "ws2", "-c", "tools:invoke")
        async with httpx2.AsyncClient(timeout=30) as http:
            kept = await open_session(http, served, neighbour)
            admins = await open_session(http, served, ADMIN)

            async def flood(n: int) -> list[str]:
                async with httpx2.AsyncClient(timeout=30) as own:
                    return [await open_session(own, served, attacker) for _ in range(n)]

            # as many connections as its limit: an opening in flight is a session in use,
            # so one more at once would find none idle to end and be refused (429)
            opened = [s for batch in await asyncio.gather(*(flood(13) for _ in range(3)))
                      for s in batch]
            alive = [s for s in opened if await answers(http, served, attacker, s) == 200]
            evicted = next(s for s in opened if s not in alive)
            evicted_call = await http.post(served.url + "mcp", json=CALL,
                                           headers=in_session(attacker, evicted))
            others = [(await initialize(http, served, token)).status_code
                      for token in (neighbour, elsewhere, ADMIN)]
            survivors = [await answers(http, served, neighbour, kept),
                         await answers(http, served, ADMIN, admins)]
    assert len(opened) == 39  # every opening answered 200: the oldest idle made room
    assert len(alive) == 3  # ... and only the token's limit of them is still open
    assert evicted_call.status_code == 404  # an ended session answers nothing, calls included
    assert others == [200, 200, 200]
    assert survivors == [200, 200]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_sessions_in_use_are_kept_and_the_next_opening_is_refused_naming_the_limit(
        tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, "--token-mcp-sessions", "2",
                              extra_env={"TOOLMESH_GATEWAY_TOKEN": ADMIN}) as served:
        token = await create(served, "-w", "default", "-c", "tools:invoke")
        async with httpx2.AsyncClient(timeout=30) as http, AsyncExitStack() as first_stream, \
                AsyncExitStack() as second_stream:
            first = await open_session(http, served, token)
            second = await open_session(http, served, token)
            await first_stream.enter_async_context(streaming(served, token, first))
            await second_stream.enter_async_context(streaming(served, token, second))
            refused = await initialize(http, served, token)
            both = [await answers(http, served, token, s) for s in (first, second)]
            await second_stream.aclose()  # the second is idle again...
            async with asyncio.timeout(10):  # ... once the gateway hears the stream close
                while (third := await initialize(http, served, token)).status_code == 429:
                    await asyncio.sleep(0.05)
            after = [await answers(http, served, token, s) for s in (first, second)]
    assert refused.status_code == 429
    error = refused.json()
    assert error["id"] == 1 and error["error"]["code"] == -32000
    assert error["error"]["data"] == {"type": "too-many-sessions",
                                      "limit": "--token-mcp-sessions"}
    assert "2 MCP sessions" in error["error"]["message"]
    assert both == [200, 200]
    assert third.status_code == 200 and after == [200, 404]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_session_idle_past_the_limit_ends_and_one_in_use_does_not(
        tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, "--mcp-session-idle", "0.05") as served, \
            httpx2.AsyncClient(timeout=30) as http:
        idle = await open_session(http, served, "")
        used = await open_session(http, served, "")
        async with streaming(served, "", used):
            await asyncio.sleep(6)  # twice the idle limit of 3 s
            during = [await answers(http, served, "", s) for s in (idle, used)]
        fresh = await open_session(http, served, "")
        await asyncio.sleep(0.5)
        soon = await answers(http, served, "", fresh)
    assert during == [404, 200]
    assert soon == 200


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_tenants_filling_the_gateways_table_never_end_the_admins_sessions(
        tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, "--token-mcp-sessions", "0",
                              "--workspace-mcp-sessions", "0", "--mcp-sessions", "4",
                              extra_env={"TOOLMESH_GATEWAY_TOKEN": ADMIN}) as served:
        tenants = [await create(served, "-w", ws, "-c", "tools:invoke") for ws in ("a", "b")]
        async with httpx2.AsyncClient(timeout=30) as http:
            admins = [await open_session(http, served, ADMIN) for _ in range(2)]
            opened = [await open_session(http, served, tenants[n % 2]) for n in range(10)]
            kept = [await answers(http, served, ADMIN, s) for s in admins]
            tenant_alive = sum([await answers(http, served, tenants[n % 2], s) == 200
                                for n, s in enumerate(opened)])
            more = await initialize(http, served, ADMIN)
    assert kept == [200, 200]
    assert tenant_alive == 2
    assert more.status_code == 200  # the admin makes room among tenants' idle sessions
