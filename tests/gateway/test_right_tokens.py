"""Right tokens are never taken for guesses (issue 42, item 4), against a real gateway over real
HTTP and WebSockets: many clients of one address (a connection pool, a reverse proxy, clients
reconnecting together) that present a right token at once are all let in, even while the token
table is being loaded; guesses sent at once are still compared at most a burst of them.

Before: each token was charged to its address before the check and refunded after, and the
table was reloaded in the request path, so 30 right REST requests at once after the table went
stale got 22 × 429 ``auth-throttled`` (the burst is 8), and 100 WebSockets 92 refused.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.gateway.test_gateway import start_gateway
from toolmesh.gateway import Gateway

ADMIN = "admin-right-tokens-3c9e71d0a8"
LIST = {"operation": "list", "type": "tool"}
BURST = 8  # the default --auth-failure-burst
SLACK = 10.0


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    async for gateway in start_gateway(tmp_path, token=ADMIN):
        yield gateway


async def make_token(gw: Gateway) -> str:
    async with aiohttp.ClientSession() as http, http.post(
            gw.url + "api/v1/token", headers={"Authorization": f"Bearer {ADMIN}"},
            json={"operation": "create", "workspaces": ["default"],
                  "capabilities": ["config:read"]}) as r:
        body = await r.json()
    assert r.status == 200, body
    return body["plaintext"]


async def rest_at_once(gw: Gateway, tokens: list[str]) -> Counter[int]:
    """One request per token, all at once, each on a connection of its own: the statuses."""
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:
        async def one(token: str) -> int:
            async with http.post(gw.url + "api/v1/config", json=LIST,
                                 headers={"Authorization": f"Bearer {token}"}) as r:
                await r.read()
                return r.status

        async with asyncio.timeout(SLACK):
            return Counter(await asyncio.gather(*(one(t) for t in tokens)))


async def test_right_rest_tokens_at_once_while_the_table_loads_are_all_let_in(
        gw: Gateway) -> None:
    token = await make_token(gw)
    # the table dropped (a push said tokens changed): every lookup waits for one load
    gw.tokens.invalidate()
    assert await rest_at_once(gw, [token] * 30) == {200: 30}
    # the table past its age (the bound for a lost push): the same
    gw.tokens.max_age, gw.tokens.refresh_after = 0.2, 60.0
    await asyncio.sleep(0.3)  # the table ages; nothing to wait for but time
    assert await rest_at_once(gw, [token] * 30) == {200: 30}


async def test_right_websocket_auths_at_once_are_all_let_in(gw: Gateway) -> None:
    token = await make_token(gw)
    gw.tokens.invalidate()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        async def one() -> str:
            async with http.ws_connect(gw.url + "api/v1/socket") as ws:
                await ws.send_json({"type": "auth", "token": token})
                answer = await ws.receive_json()
                return answer.get("error-type") or answer["type"]

        async with asyncio.timeout(SLACK):
            answers = Counter(await asyncio.gather(*(one() for _ in range(100))))
    assert answers == {"auth-ok": 100}


def made_up() -> str:
    """A token of the scoped form whose id no token has."""
    return f"tmk_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}"


async def test_guesses_at_once_are_compared_at_most_a_burst_of_them(gw: Gateway) -> None:
    token = await make_token(gw)
    wrong_secret = token.rsplit("_", 1)[0] + "_" + secrets.token_urlsafe(32)
    # made-up ids: the first waits for a reload and holds an attempt while it does
    assert await rest_at_once(gw, [made_up() for _ in range(50)]) == \
        {401: BURST, 429: 50 - BURST}
    # the throttle is per address: from another, the same against a table being loaded,
    # with a right id and a wrong secret (each waits for the load, then is compared only if
    # its address still has attempts)
    gw.tokens.invalidate()
    connector = aiohttp.TCPConnector(limit=0, force_close=True, local_addr=("127.0.0.2", 0))
    async with aiohttp.ClientSession(connector=connector) as http:
        async def one(token: str) -> int:
            async with http.post(gw.url + "api/v1/config", json=LIST,
                                 headers={"Authorization": f"Bearer {token}"}) as r:
                return r.status

        statuses = Counter(await asyncio.gather(*(one(wrong_secret) for _ in range(50))))
        assert statuses == {401: BURST, 429: 50 - BURST}
        # throttled: the right token too is refused unchecked
        assert await one(token) == 429
