"""One token floods ``/mcp`` with sessions: does anyone else still get in, and what does it cost?

Starts ``toolmesh serve`` as its own process (embedded bus, SQLite store, an admin token),
makes three scoped tokens (``tools:invoke``: the attacker and another tenant in workspace
``default``, a third tenant in ``ws2``), then has the attacker send ``--attempts`` (10,000)
``initialize`` requests over ``--connections`` (8) keep-alive connections, never deleting a
session. It prints:

* the sessions the attacker opened (``200``) and how its other attempts were answered, and
  how many of them are still open afterwards (each asked with a ``ping``);
* the gateway's RSS before and after (``/proc``);
* the status of an ``initialize`` by the other tenant of ``default``, the ``ws2`` tenant and
  the admin afterwards (the bar: 200 each);
* how long SIGTERM takes to end the process once the admin has opened ``--admin-sessions``
  (2,000; ``--quick`` 500) more sessions, all idle.

The gateway's flags (scaled-down limits, say) follow ``--``:
``python bench/mcp_sessions.py -- --token-mcp-sessions 8``.

    python bench/mcp_sessions.py [--attempts N] [--connections N] [--quick] [--json PATH]
        [-- SERVE_FLAGS...]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from processes import start_serve
from report import Figure, add_arguments, emit

ADMIN = "bench-admin-token-for-mcp-sessions-0123456789"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "flood", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def rss_mib(pid: int) -> float:
    """The resident set of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def make_token(http: aiohttp.ClientSession, url: str, workspace: str) -> str:
    async with http.post(url + "api/v1/token", json={
            "operation": "create", "workspaces": [workspace],
            "capabilities": ["tools:invoke"]},
            headers={"Authorization": f"Bearer {ADMIN}"}) as r:
        body = await r.json()
    return str(body["plaintext"])


async def initialize(http: aiohttp.ClientSession, url: str, token: str,
                     ) -> tuple[int, str, str | None]:
    """One ``initialize``: its status, body and the session it opened."""
    async with http.post(url + "mcp", json=INITIALIZE, headers={
            **MCP_HEADERS, "Authorization": f"Bearer {token}"}) as r:
        text = await r.text()
        return r.status, text, r.headers.get("mcp-session-id")


async def alive(http: aiohttp.ClientSession, url: str, token: str, session: str) -> bool:
    """Whether ``session`` still answers (a ``ping`` in it)."""
    async with http.post(url + "mcp", json={"jsonrpc": "2.0", "id": 9, "method": "ping"},
                         headers={**MCP_HEADERS, "Authorization": f"Bearer {token}",
                                  "mcp-session-id": session,
                                  "mcp-protocol-version": "2025-06-18"}) as r:
        await r.read()
        return r.status == 200


async def flood(url: str, token: str, attempts: int, connections: int,
                ) -> tuple[collections.Counter[str], list[str], float]:
    """``attempts`` initializes over ``connections`` connections: how they were answered,
    the sessions opened, and the seconds it took."""
    answers: collections.Counter[str] = collections.Counter()
    sessions: list[str] = []
    left = iter(range(attempts))

    async def worker() -> None:
        connector = aiohttp.TCPConnector(limit=1)
        async with aiohttp.ClientSession(connector=connector) as http:
            for _ in left:
                status, text, session = await initialize(http, url, token)
                answers[str(status) if status == 200 else f"{status} {text[:90]}"] += 1
                if session is not None and status == 200:
                    sessions.append(session)

    t = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return answers, sessions, time.perf_counter() - t


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=None,
                        help="initialize requests of the attacking token (default 10000; "
                             "--quick 2000)")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--admin-sessions", type=int, default=None,
                        help="sessions the admin opens before SIGTERM (default 2000; --quick "
                             "500)")
    add_arguments(parser)
    args, serve_flags = parser.parse_known_args()
    serve_flags = [f for f in serve_flags if f != "--"]
    attempts = args.attempts or (2000 if args.quick else 10_000)
    admin_sessions = args.admin_sessions if args.admin_sessions is not None else (
        500 if args.quick else 2000)
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TOOLMESH_GATEWAY_TOKEN"] = ADMIN
        proc, url = await start_serve(Path(tmp), *serve_flags)
        try:
            async with aiohttp.ClientSession() as http:
                attacker = await make_token(http, url, "default")
                neighbour = await make_token(http, url, "default")
                elsewhere = await make_token(http, url, "ws2")
                # the MCP endpoint starts with its first request: load it before measuring
                await initialize(http, url, ADMIN)
                before = rss_mib(proc.pid)
                answers, opened_ids, took = await flood(url, attacker, attempts,
                                                        args.connections)
                after = rss_mib(proc.pid)
                others: dict[str, Any] = {}
                for who, token in (("tenant of the same workspace", neighbour),
                                   ("tenant of another workspace", elsewhere),
                                   ("admin", ADMIN)):
                    status, text, _ = await initialize(http, url, token)
                    others[who] = status if status == 200 else f"{status} {text[:120]}"
                held = sum([await alive(http, url, attacker, s) for s in opened_ids])
                admin_answers, _, _ = await flood(url, ADMIN, admin_sessions,
                                                  args.connections)
        finally:
            t = time.perf_counter()
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 120)
            stopped = time.perf_counter() - t
    opened = answers.get("200", 0)
    print(f"attacker: {attempts} initialize attempts over {args.connections} connections in "
          f"{took:.1f} s: " + ", ".join(f"{n} × {what}" for what, n in answers.most_common()))
    print(f"attacker's sessions still open afterwards: {held}")
    print(f"admin, before SIGTERM: {admin_sessions} initialize attempts: "
          + ", ".join(f"{n} × {what}" for what, n in admin_answers.most_common()))
    for who, status in others.items():
        print(f"afterwards, {who}: initialize {status}")
    figures += [
        Figure(bench="mcp_sessions", path="sessions one token opened (accepted initializes)",
               value=opened, unit="sessions", note=f"{attempts} attempts"),
        Figure(bench="mcp_sessions", path="sessions of that token still open afterwards",
               value=held, unit="sessions"),
        Figure(bench="mcp_sessions", path="gateway RSS after the flood", value=after,
               unit="MiB", floor=before, floor_what="RSS before it"),
        Figure(bench="mcp_sessions", path="SIGTERM to exit with the sessions open",
               value=stopped, unit="s",
               note=f"after the admin's {admin_answers.get('200', 0)} more"),
        Figure(bench="mcp_sessions", path="others' initialize answered 200 afterwards",
               value=sum(1 for s in others.values() if s == 200), unit=f"of {len(others)}",
               better="higher", target=f"{len(others)} of {len(others)}"),
    ]
    emit(figures, args)


if __name__ == "__main__":
    asyncio.run(main())
