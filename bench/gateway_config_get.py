"""A config `get` through the gateway over HTTP, beside an HTTP round trip to a trivial
endpoint (/api/v1/health) of the same server, measured in the same run.

Starts `toolmesh serve` as its own process (embedded bus, SQLite store) on a free port, loads
the joke tool config and an `mcp` item with a token, then prints p50 latency (sequential
calls on a keep-alive connection) and calls/s (32 concurrent clients) for the floor, a get of
the tool and a get of the mcp item (whose token the gateway masks), and their ratios. The
three alternate in rounds (their order rotating), so the machine's drift falls on all three.

    python bench/gateway_config_get.py [--calls N] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
from processes import start_serve
from report import Figure, add_arguments, emit

GET = {"operation": "get", "keys": [{"type": "tool", "key": "tell-joke"}]}
GET_MCP = {"operation": "get", "keys": [{"type": "mcp", "key": "weather"}]}
MCP = json.dumps({"url": "http://127.0.0.1:9000/mcp?api_key=k3y", "remote-name": "weather",
                  "auth-token": "t0ken-t0ken"})
TOOL = json.dumps({"type": "tool-service", "name": "tell-joke", "description": "Tell a joke",
                   "service": "joke-service", "arguments": [
                       {"name": "topic", "type": "string", "description": "The topic"}]})


class Endpoint:
    """One request, sent again and again: its latency samples and its throughput runs."""

    def __init__(self, session: aiohttp.ClientSession, method: str, url: str,
                 body: dict | None) -> None:
        self.session, self.method, self.url, self.body = session, method, url, body
        self.samples: list[float] = []
        self.calls = 0
        self.seconds = 0.0

    async def once(self) -> None:
        async with self.session.request(self.method, self.url, json=self.body) as r:
            await r.read()
            assert r.status == 200, r.status

    async def sequential(self, n: int) -> None:
        for _ in range(n):
            t = time.perf_counter()
            await self.once()
            self.samples.append(time.perf_counter() - t)

    async def concurrent(self, n: int, width: int = 32) -> None:
        sem = asyncio.Semaphore(width)

        async def bounded() -> None:
            async with sem:
                await self.once()

        t = time.perf_counter()
        await asyncio.gather(*[bounded() for _ in range(n)])
        self.seconds += time.perf_counter() - t
        self.calls += n

    @property
    def p50(self) -> float:
        return statistics.median(self.samples)

    @property
    def rate(self) -> float:
        return self.calls / self.seconds


async def measure(endpoints: list[Endpoint], calls: int, rounds: int = 4) -> None:
    """``calls`` sequential calls and twice as many concurrent ones to each endpoint, in
    ``rounds`` rounds that alternate them (the order rotating each round)."""
    for e in endpoints:  # warm up
        await e.sequential(50)
        e.samples.clear()
    for r in range(rounds):
        for e in endpoints[r % len(endpoints):] + endpoints[:r % len(endpoints)]:
            await e.sequential(max(calls // rounds, 1))
    for r in range(rounds):
        for e in endpoints[r % len(endpoints):] + endpoints[:r % len(endpoints)]:
            await e.concurrent(max(2 * calls // rounds, 32))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=None,
                        help="sequential calls per endpoint (default 1000; --quick 300); "
                             "twice as many concurrent")
    add_arguments(parser)
    args = parser.parse_args()
    calls = args.calls or (300 if args.quick else 1000)
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = await start_serve(Path(tmp))
        try:
            async with aiohttp.ClientSession() as session:
                async with session.post(base + "api/v1/config", json={"operation": "put", "values": [
                        {"type": "tool", "key": "tell-joke", "value": TOOL},
                        {"type": "mcp", "key": "weather", "value": MCP}]}) as r:
                    assert "error" not in await r.json()
                floor = Endpoint(session, "GET", base + "api/v1/health", None)
                get = Endpoint(session, "POST", base + "api/v1/config", GET)
                mcp = Endpoint(session, "POST", base + "api/v1/config", GET_MCP)
                await measure([floor, get, mcp], calls)
        finally:
            proc.terminate()
            await proc.wait()
    floor_p50, floor_rate = floor.p50, floor.rate
    get_p50, get_rate = get.p50, get.rate
    mcp_p50, mcp_rate = mcp.p50, mcp.rate
    bench = "gateway_config_get"
    floor_what = "GET /api/v1/health, same server"
    emit([
        Figure(bench=bench, path="gateway config get of a tool item, p50 (sequential)",
               value=get_p50 * 1e3, unit="ms", floor=floor_p50 * 1e3, floor_what=floor_what),
        Figure(bench=bench, path="gateway config get of an mcp item (token masked), p50",
               value=mcp_p50 * 1e3, unit="ms", floor=floor_p50 * 1e3, floor_what=floor_what),
        Figure(bench=bench, path="gateway config gets of a tool item/s (32 concurrent)",
               value=get_rate, unit="calls/s", floor=floor_rate, floor_what=floor_what,
               better="higher"),
        Figure(bench=bench, path="gateway config gets of an mcp item/s (32 concurrent)",
               value=mcp_rate, unit="calls/s", floor=floor_rate, floor_what=floor_what,
               better="higher"),
    ], args)


if __name__ == "__main__":
    asyncio.run(main())
