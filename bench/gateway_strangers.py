"""Anonymous sockets held open: does the admin still get in, and another tenant?

The lock-out of issue 42 (item 2) at full scale: ``toolmesh serve`` as its own process
(embedded bus, SQLite store, an admin token, its default bounds unless flags are given after
``--``), one scoped tenant token, then an attacker that keeps ``--sockets`` (1,100) WebSockets
open from one address, never authenticating, each opened again at once when the gateway
closes or refuses it. While it runs, from addresses of their own (Linux routes all of 127/8
to lo: three machines' worth of addresses), it measures:

* the admin's and the tenant's REST calls (a config ``list``, each on a new connection):
  how many of ``--calls`` (10) got 200, and their p50 / max time;
* a WebSocket ``auth`` of each (the same count);
* the same calls with no attack, in the same run: the floor;
* how the attacker's sockets ended (pushed out for a newcomer, out of time, refused).

``--pool-off`` runs it with ``--stranger-share 0`` (no pool for unauthenticated connections:
they and the authenticated ones share ``--max-connections``, as before issue 42) to show the
lock-out; ``--same-address`` sends the admin's and the tenant's calls from the attacker's own
address (one NAT, one reverse proxy).

    python bench/gateway_strangers.py [--sockets N] [--calls N] [--pool-off] [--same-address]
        [--quick] [--json PATH] [-- SERVE_FLAGS...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp
from processes import start_serve
from report import Figure, add_arguments, emit

ADMIN = "bench-admin-token-for-strangers-0123456789abc"
LIST = {"operation": "list", "type": "tool"}
ATTACKER, ADMIN_ADDRESS, TENANT_ADDRESS = "127.0.0.2", "127.0.0.1", "127.0.0.3"
UPGRADE = (b"GET /api/v1/socket HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
           b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           b"Sec-WebSocket-Version: 13\r\n\r\n")
#: the longest one call may take before it counts as failed
CALL_TIMEOUT = 10.0


class Attack:
    """Raw sockets (cheaper than a WebSocket library: the attacker shares the machine) that
    upgrade to a WebSocket and then wait, never sending a token, reopened at once."""

    def __init__(self, host: str, port: int, sockets: int) -> None:
        self.host, self.port, self.sockets = host, port, sockets
        self.ends: Counter[str] = Counter()
        self.upgraded = 0
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._hold()) for _ in range(self.sockets)]

    async def stop(self) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _hold(self) -> None:
        while not self._stop.is_set():
            writer = None
            try:
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, local_addr=(ATTACKER, 0))
                writer.write(UPGRADE)
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"HTTP/1.1 101"):
                    self.upgraded += 1
                    rest = await reader.read()  # the gateway's last words, until it closes
                    self.ends[_why(rest)] += 1
                else:
                    self.ends[f"refused {head.split(b' ', 2)[1].decode()}"] += 1
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                self.ends["cut before the upgrade"] += 1
            finally:
                if writer is not None:
                    writer.close()


def _why(frames: bytes) -> str:
    """The error type the gateway named before closing an upgraded socket."""
    for kind in (b"server-busy", b"auth-timeout", b"no authentication"):
        if kind in frames:
            return "closed: " + kind.decode()
    return "closed"


def client(address: str) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(
        limit=0, force_close=True, local_addr=(address, 0)))


async def rest_calls(url: str, token: str, address: str, calls: int
                     ) -> tuple[Counter[str], list[float]]:
    """``calls`` REST calls, each on a new connection: outcomes and seconds each."""
    outcomes: Counter[str] = Counter()
    took: list[float] = []
    async with client(address) as http:
        for _ in range(calls):
            start = time.perf_counter()
            try:
                async with asyncio.timeout(CALL_TIMEOUT), http.post(
                        url + "api/v1/config", json=LIST,
                        headers={"Authorization": f"Bearer {token}"}) as r:
                    body = await r.json(content_type=None)
                    outcomes["200" if r.status == 200 else
                             f"{r.status} {body['error']['type']}"] += 1
            except (aiohttp.ClientError, OSError, TimeoutError) as e:
                outcomes[type(e).__name__] += 1
            took.append(time.perf_counter() - start)
    return outcomes, took


async def socket_auths(url: str, token: str, address: str, calls: int
                       ) -> tuple[Counter[str], list[float]]:
    """``calls`` WebSockets that authenticate with a frame: outcomes and seconds each."""
    outcomes: Counter[str] = Counter()
    took: list[float] = []
    async with client(address) as http:
        for _ in range(calls):
            start = time.perf_counter()
            try:
                async with asyncio.timeout(CALL_TIMEOUT), http.ws_connect(
                        url + "api/v1/socket") as ws:
                    await ws.send_json({"type": "auth", "token": token})
                    answer = await ws.receive_json()
                    outcomes[answer.get("error-type") or answer["type"]] += 1
            except (aiohttp.ClientError, OSError, TimeoutError, TypeError) as e:
                outcomes[type(e).__name__] += 1
            took.append(time.perf_counter() - start)
    return outcomes, took


async def run(args: argparse.Namespace) -> list[Figure]:
    serve_flags = ["--stranger-share", "0"] if args.pool_off else []
    with tempfile.TemporaryDirectory() as folder:
        os.environ["TOOLMESH_GATEWAY_TOKEN"] = ADMIN
        proc, url = await start_serve(Path(folder), *serve_flags, *args.serve_flags)
        try:
            async with aiohttp.ClientSession() as http, http.post(
                    url + "api/v1/token", headers={"Authorization": f"Bearer {ADMIN}"},
                    json={"operation": "create", "workspaces": ["default"],
                          "capabilities": ["config:read"]}) as r:
                tenant = (await r.json())["plaintext"]
            admin_at = ATTACKER if args.same_address else ADMIN_ADDRESS
            tenant_at = ATTACKER if args.same_address else TENANT_ADDRESS
            calls = args.calls

            async def measure() -> dict[str, tuple[Counter[str], list[float]]]:
                return {"admin REST": await rest_calls(url, ADMIN, admin_at, calls),
                        "tenant REST": await rest_calls(url, tenant, tenant_at, calls),
                        "admin WebSocket": await socket_auths(url, ADMIN, admin_at, calls),
                        "tenant WebSocket": await socket_auths(url, tenant, tenant_at, calls)}

            quiet = await measure()
            # the attacker in a process of its own: its reconnect storm must not slow the
            # measuring client's event loop (it would be the client's latency, not the
            # gateway's)
            attacker = await asyncio.create_subprocess_exec(
                sys.executable, os.path.abspath(__file__), "--attack", url,
                "--sockets", str(args.sockets),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
            assert attacker.stdin is not None and attacker.stdout is not None
            try:
                await attacker.stdout.readline()  # "started"
                await asyncio.sleep(args.settle)  # let the attacker fill what it can
                attacked = await measure()
            finally:
                attacker.stdin.close()  # the attacker stops and reports
                report = json.loads(await attacker.stdout.read() or b"{}")
                await attacker.wait()
        finally:
            proc.terminate()
            await proc.wait()
    mode = ("pool off" if args.pool_off else "default bounds") + (
        ", calls from the attacker's address" if args.same_address else "")
    print(f"{args.sockets} anonymous sockets from one address ({mode}); the attacker's "
          f"sockets: {report.get('upgraded')} upgraded, ends {report.get('ends')}")
    figures = []
    for what, (outcomes, took) in attacked.items():
        floor = statistics.median(quiet[what][1])
        ok = outcomes.get("200", 0) + outcomes.get("auth-ok", 0)
        print(f"  {what}: {ok}/{calls} in, {dict(outcomes)}; p50 "
              f"{statistics.median(took) * 1000:.0f} ms, max {max(took) * 1000:.0f} ms "
              f"(no attack: p50 {floor * 1000:.0f} ms, {dict(quiet[what][0])})")
        figures.append(Figure(
            bench="gateway_strangers", path=f"{what} under {args.sockets} anonymous sockets "
            f"({mode}), p50", value=statistics.median(took) * 1000, unit="ms",
            floor=floor * 1000, floor_what="the same call with no attack",
            target="admin 10/10, tenant ≥ 9/10 in", note=f"{ok}/{calls} in"))
    return figures


async def attack(url: str, sockets: int) -> None:
    """The attacker's process: attack until stdin closes, then print what happened as JSON."""
    host, port = url.split("//")[1].strip("/").rsplit(":", 1)
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    attack = Attack(host, int(port), sockets)
    attack.start()
    print("started", flush=True)
    await stdin.read()
    await attack.stop()
    print(json.dumps({"upgraded": attack.upgraded, "ends": dict(attack.ends)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attack", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--sockets", type=int, default=1100)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds the attack runs before the calls")
    parser.add_argument("--pool-off", action="store_true")
    parser.add_argument("--same-address", action="store_true")
    parser.add_argument("serve_flags", nargs="*", help="more flags for toolmesh serve")
    add_arguments(parser)
    args = parser.parse_args()
    if args.attack:
        asyncio.run(attack(args.attack, args.sockets))
        return
    if args.quick:
        args.sockets, args.settle = min(args.sockets, 300), min(args.settle, 2.0)
    emit(asyncio.run(run(args)), args)


if __name__ == "__main__":
    main()
