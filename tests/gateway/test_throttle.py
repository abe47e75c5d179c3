"""Token guessing is throttled per client address, REST and WebSocket together (issue 34,
item 3), measured against a real gateway over real HTTP and WebSockets; and a weak ``--token``
is refused beyond loopback (``toolmesh serve`` itself).

Figures (``pytest -s``), shared 2-core machine: before the throttle, one address checked
~8,700 wrong REST tokens a second, and ~2,900 on the WebSocket with a new socket every 3; with
the defaults (a burst of 8, then 2 a second) it gets 6 checked in a 2 s flood of both, every
other attempt answered 429 ``auth-throttled`` (REST) or closed 1008 (WebSocket).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import WSMsgType

from tests.gateway.test_gateway import start_gateway
from tests.processes import run_toolmesh
from tests.servers import toolmesh_serve
from toolmesh.gateway import Gateway
from toolmesh.gateway.bounds import Bounds
from toolmesh.gateway.throttle import AuthThrottle, Throttled
from toolmesh.gateway.token_strength import weakness

ADMIN = "admin-throttle-tests-6b1d0e94c2"
LIST = {"operation": "list", "type": "tool"}
#: the issue's bar: wrong tokens checked per second per address
BAR = 10.0
FLOOD_SECONDS = 2.0
#: a second loopback address: "another client" (Linux routes all of 127/8 to lo)
OTHER_ADDRESS = "127.0.0.2"


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    """A gateway with the default throttle."""
    async for gateway in start_gateway(tmp_path, token=ADMIN):
        yield gateway


async def rest_guess(http: aiohttp.ClientSession, gw: Gateway, token: str) -> str:
    """One REST request with ``token``: ``checked`` (401: the token was looked at),
    ``throttled`` (429 with Retry-After) or ``ok``."""
    async with http.post(gw.url + "api/v1/config", json=LIST,
                         headers={"Authorization": f"Bearer {token}"}) as r:
        body = await r.json()
    if r.status == 429:
        assert body["error"]["type"] == "auth-throttled", body
        assert int(r.headers["Retry-After"]) >= 1
        return "throttled"
    assert r.status in (200, 401), (r.status, body)
    return "ok" if r.status == 200 else "checked"


async def socket_guess(http: aiohttp.ClientSession, gw: Gateway, token: str) -> str:
    """A new WebSocket (its own 3-guess limit fresh) with one auth frame."""
    async with http.ws_connect(gw.url + "api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": token})
        answer = await ws.receive_json()
        if answer["type"] == "auth-ok":
            return "ok"
        if answer.get("error-type") != "auth-throttled":
            assert answer == {"type": "auth-failed", "error": "invalid token"}, answer
            return "checked"
        message = await ws.receive()
        assert message.type == WSMsgType.CLOSE and message.data == 1008, message
        assert str(message.extra).startswith("auth-throttled: too many wrong tokens"), message
        return "throttled"


async def test_wrong_tokens_from_one_address_are_slowed_across_rest_and_websocket(
        gw: Gateway) -> None:
    outcomes: Counter[str] = Counter()
    by_route: Counter[tuple[str, str]] = Counter()

    async def guesser(route: str, guess: object) -> None:
        async with aiohttp.ClientSession() as http:
            n = 0
            while time.monotonic() < deadline:  # the attacker's pace: as fast as answered
                outcome = await guess(http, gw, f"guess-{route}-{n}")  # type: ignore[operator]
                outcomes[outcome] += 1
                by_route[route, outcome] += 1
                n += 1

    start = time.monotonic()
    deadline = start + FLOOD_SECONDS
    await asyncio.gather(*(guesser("rest", rest_guess) for _ in range(4)),
                         *(guesser("socket", socket_guess) for _ in range(4)))
    took = time.monotonic() - start
    rate = outcomes["checked"] / took
    print(f"\nwrong tokens from one address over {took:.1f} s: {outcomes['checked']} checked "
          f"({rate:.1f}/s, bar {BAR:g}/s), {outcomes['throttled']} throttled; {dict(by_route)}")
    assert rate <= BAR
    assert outcomes["ok"] == 0
    # one budget for both routes: each was refused, whichever spent it
    assert by_route["rest", "throttled"] > 0 and by_route["socket", "throttled"] > 0


async def test_while_throttled_the_right_token_is_refused_too_but_not_from_another_address(
        tmp_path: Path) -> None:
    # a throttle that let the right token through would tell the guesser when it found it. The
    # refill is slowed (one attempt in 100 s) so the right token is surely sent while throttled:
    # at the default 2 a second a loaded machine can take half a second between two requests
    async for gateway in start_gateway(tmp_path, token=ADMIN, bounds=Bounds(
            auth_failure_rate=0.01, auth_failure_burst=2)):
        async with aiohttp.ClientSession() as http:
            assert [await rest_guess(http, gateway, f"guess-{i}") for i in range(2)] == \
                ["checked"] * 2
            assert await rest_guess(http, gateway, ADMIN) == "throttled"
            assert await socket_guess(http, gateway, ADMIN) == "throttled"
        # a right token from another address is not slowed
        connector = aiohttp.TCPConnector(local_addr=(OTHER_ADDRESS, 0))
        async with aiohttp.ClientSession(connector=connector) as other:
            started = time.monotonic()
            assert await rest_guess(other, gateway, ADMIN) == "ok"
            assert await socket_guess(other, gateway, ADMIN) == "ok"
            assert time.monotonic() - started < 1.0


async def test_a_few_mistakes_are_not_throttled_and_the_throttle_can_be_turned_off(
        tmp_path: Path) -> None:
    async for gateway in start_gateway(tmp_path, token=ADMIN):
        async with aiohttp.ClientSession() as http:
            # a burst of 8: a person mistyping, a client retrying, are answered 401 as before
            assert [await rest_guess(http, gateway, f"typo-{i}") for i in range(8)] == \
                ["checked"] * 8
            assert await rest_guess(http, gateway, "typo-9") == "throttled"
    async for gateway in start_gateway(tmp_path, token=ADMIN,
                                       bounds=Bounds(auth_failure_rate=0)):
        async with aiohttp.ClientSession() as http:
            assert {await rest_guess(http, gateway, f"guess-{i}") for i in range(50)} == \
                {"checked"}


def test_weak_tokens() -> None:
    assert weakness("x") == "it is 1 character long (at least 16 are needed)"
    assert "repeat too much" in (weakness("passwordpassword") or "")
    assert "repeat too much" in (weakness("a" * 40) or "")
    assert weakness(ADMIN) is None
    assert weakness("Zq8vR2mK7pX4nT1w") is None  # 16 random letters and digits


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_serve_refuses_a_weak_token_beyond_loopback_unless_insecure(
        tmp_path: Path) -> None:
    code, _, err = await run_toolmesh("serve", "--host", "0.0.0.0", "--port", "0",
                                      "--token", "x", "--config-store",
                                      str(tmp_path / "config.db"), timeout=30)
    assert code != 0
    assert "refusing to listen on 0.0.0.0 with a weak token: it is 1 character long" in err
    assert "--insecure" in err and "secrets.token_urlsafe" in err
    assert "Traceback" not in err
    async with toolmesh_serve(tmp_path, "--host", "0.0.0.0", "--token", "x",
                              "--insecure") as served:
        assert any("INSECURE: listening on 0.0.0.0 with a weak token" in line
                   for line in served.log)
        port = served.url.rsplit(":", 1)[1].strip("/")
        async with aiohttp.ClientSession() as http, http.post(
                f"http://127.0.0.1:{port}/api/v1/config", json=LIST,
                headers={"Authorization": "Bearer x"}) as r:
            assert r.status == 200
    # on loopback a weak token is only warned about
    async with toolmesh_serve(tmp_path, "--token", "x") as served:
        assert any("WEAK TOKEN" in line for line in served.log)


async def test_the_throttle_remembers_a_bounded_number_of_addresses(tmp_path: Path) -> None:
    async for gateway in start_gateway(tmp_path, token=ADMIN,
                                       bounds=Bounds(auth_throttle_addresses=16)):
        throttle = gateway.auth.throttle
        assert throttle is not None
        for n in range(40):  # 40 client addresses, a wrong token each
            connector = aiohttp.TCPConnector(local_addr=(f"127.0.1.{n + 1}", 0))
            async with aiohttp.ClientSession(connector=connector) as http:
                assert await rest_guess(http, gateway, "wrong") == "checked"
            assert len(throttle) <= 16
        async with aiohttp.ClientSession() as http:  # right tokens leave nothing behind
            assert await rest_guess(http, gateway, ADMIN) == "ok"
        assert len(throttle) == 16


def test_a_throttled_address_may_try_again_once_its_bucket_refills() -> None:
    now = [0.0]
    throttle = AuthThrottle(rate=2, burst=3, max_addresses=8, clock=lambda: now[0])
    for _ in range(3):
        throttle.failed(throttle.check("10.0.0.1"))
    with pytest.raises(Throttled) as refused:
        throttle.check("10.0.0.1")
    assert refused.value.retry_after == pytest.approx(0.5)
    assert refused.value.retry_after_header == "1"
    throttle.check("10.0.0.2")  # another address: its own bucket
    now[0] = 0.5
    throttle.failed(throttle.check("10.0.0.1"))
    # IPv6 addresses count by their /64: a host cannot rotate its way out
    for suffix in ("1", "2", "3"):
        throttle.failed(throttle.check(f"2001:db8::{suffix}"))
    with pytest.raises(Throttled):
        throttle.check("2001:db8::ffff")


def test_only_wrong_tokens_are_charged_and_waiting_checks_of_unknown_ids_hold_one() -> None:
    now = [0.0]
    throttle = AuthThrottle(rate=2, burst=3, max_addresses=8, clock=lambda: now[0])
    # right tokens, however many and however concurrent, cost nothing and leave nothing
    keys = [throttle.check("10.0.0.1") for _ in range(100)]
    assert set(keys) == {"10.0.0.1"} and len(throttle) == 0
    # a check that waits for an unknown id holds an attempt: three at once are the burst
    with throttle.holding("10.0.0.1"), throttle.holding("10.0.0.1"), \
            throttle.holding("10.0.0.1"):
        with pytest.raises(Throttled):
            throttle.check("10.0.0.1")  # the right token too: refused unchecked
    key = throttle.check("10.0.0.1")  # given back: nothing was charged
    # checks that all waited for the token table, then are compared one at a time: the
    # address is looked at again before each, so at most the burst of them are compared
    compared = 0
    for _ in range(5):
        try:
            throttle.recheck(key)
        except Throttled:
            continue
        compared += 1
        throttle.failed(key)  # each was wrong
    assert compared == 3
    now[0] = 0.5
    throttle.check("10.0.0.1")
    # a wrong token found once its address's bucket refilled to full is charged still
    now[0] = 10.0
    for _ in range(3):
        throttle.failed("10.0.0.1")
    with pytest.raises(Throttled):
        throttle.check("10.0.0.1")
    now[0] = 20.0
    throttle.check("10.0.0.1")
    assert len(throttle) == 0  # full again: forgotten
