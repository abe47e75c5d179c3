"""Right tokens at once from one address, after the gateway sat idle: are any taken for guesses?

The reproduction of issue 42 (item 4): ``toolmesh serve`` as its own process (embedded bus,
SQLite store, an admin token), one scoped token, then ``--idle`` (10) seconds with no token
looked up, then from one address, all at once:

* ``--rest`` (30) REST calls with the right token, each on a connection of its own;
* ``--sockets`` (100) WebSockets that authenticate with it;
* 50 REST calls with wrong tokens (made-up ids): how many are compared (401) before the
  throttle refuses the rest (429) — the burst (8) is the bar.

Before the fix: 22 of 30 REST calls got 429 ``auth-throttled`` and 92 of 100 sockets were
refused (every token was charged before its check, and the table reloaded in the request
path after 10 s).

    python bench/gateway_right_tokens.py [--idle S] [--rest N] [--sockets N] [--quick]
        [--json PATH] [-- SERVE_FLAGS...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp
from processes import start_serve
from report import Figure, add_arguments, emit

ADMIN = "bench-admin-token-for-right-tokens-0123456789"
LIST = {"operation": "list", "type": "tool"}


async def rest_at_once(url: str, tokens: list[str]) -> tuple[Counter[str], float]:
    """One call per token, all at once, each on its own connection: statuses and seconds."""
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:
        async def one(token: str) -> str:
            async with http.post(url + "api/v1/config", json=LIST,
                                 headers={"Authorization": f"Bearer {token}"}) as r:
                await r.read()
                return str(r.status)

        start = time.perf_counter()
        statuses = Counter(await asyncio.gather(*(one(t) for t in tokens)))
        return statuses, time.perf_counter() - start


async def sockets_at_once(url: str, token: str, count: int) -> tuple[Counter[str], float]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        async def one() -> str:
            async with http.ws_connect(url + "api/v1/socket") as ws:
                await ws.send_json({"type": "auth", "token": token})
                answer = await ws.receive_json()
                return answer.get("error-type") or answer["type"]

        start = time.perf_counter()
        answers = Counter(await asyncio.gather(*(one() for _ in range(count))))
        return answers, time.perf_counter() - start


async def run(args: argparse.Namespace) -> list[Figure]:
    with tempfile.TemporaryDirectory() as folder:
        os.environ["TOOLMESH_GATEWAY_TOKEN"] = ADMIN
        proc, url = await start_serve(Path(folder), *args.serve_flags)
        try:
            async with aiohttp.ClientSession() as http, http.post(
                    url + "api/v1/token", headers={"Authorization": f"Bearer {ADMIN}"},
                    json={"operation": "create", "workspaces": ["default"],
                          "capabilities": ["config:read"]}) as r:
                token = (await r.json())["plaintext"]
            await rest_at_once(url, [token])  # the table is loaded
            await asyncio.sleep(args.idle)  # the idle gateway: nothing but time
            rest, rest_took = await rest_at_once(url, [token] * args.rest)
            await asyncio.sleep(args.idle)
            sockets, sockets_took = await sockets_at_once(url, token, args.sockets)
            made_up = [f"tmk_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}"
                       for _ in range(50)]
            wrong, _ = await rest_at_once(url, made_up)
        finally:
            proc.terminate()
            await proc.wait()
    print(f"after {args.idle:g} s idle, from one address at once: {args.rest} right REST "
          f"tokens {dict(rest)} in {rest_took * 1000:.0f} ms; {args.sockets} WebSocket auths "
          f"{dict(sockets)} in {sockets_took * 1000:.0f} ms; 50 wrong tokens {dict(wrong)}")
    return [
        Figure(bench="gateway_right_tokens", path=f"{args.rest} right REST tokens at once after "
               f"{args.idle:g} s idle, refused", value=args.rest - rest.get("200", 0),
               unit="calls", target="0", note=str(dict(rest))),
        Figure(bench="gateway_right_tokens", path=f"{args.sockets} right WebSocket auths at "
               f"once after {args.idle:g} s idle, refused",
               value=args.sockets - sockets.get("auth-ok", 0), unit="sockets", target="0",
               note=str(dict(sockets))),
        Figure(bench="gateway_right_tokens", path="50 wrong tokens at once, compared",
               value=wrong.get("401", 0), unit="tokens", target="≤ 8 (the burst)",
               note=str(dict(wrong))),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=float, default=10.0)
    parser.add_argument("--rest", type=int, default=30)
    parser.add_argument("--sockets", type=int, default=100)
    parser.add_argument("serve_flags", nargs="*", help="more flags for toolmesh serve")
    add_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.idle = min(args.idle, 6.0)  # past the background reload's 5 s
    emit(asyncio.run(run(args)), args)


if __name__ == "__main__":
    main()
