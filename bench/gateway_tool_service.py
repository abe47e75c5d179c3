"""A tool-service call through the gateway over REST, beside ``GET /api/v1/health`` of the same
server (the floor: HTTP parsing and the access checks, no bus), measured in the same run.

Starts ``toolmesh serve`` as its own process (embedded bus, SQLite store, the joke service it
runs), stores the joke service's descriptor, then measures latency with 4 calls in flight on
keep-alive connections (p50, p90) and calls/s with 32 in flight, for the floor and for
``POST /api/v1/flow/default/service/tool-service``.

    python bench/gateway_tool_service.py [--calls N] [--quick] [--json PATH]
    python bench/gateway_tool_service.py --profile PATH   # the server under cProfile
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
from processes import start_serve
from report import Figure, add_arguments, emit

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "joke"
CALL = {"id": "joke-service", "config": {"style": "pun"}, "arguments": {"topic": "food"},
        "streaming": False}


async def latencies(session: aiohttp.ClientSession, method: str, url: str,
                    body: dict | None, calls: int, in_flight: int) -> list[float]:
    """Seconds per call with ``in_flight`` callers, each sequential."""
    samples: list[float] = []

    async def caller(n: int) -> None:
        for _ in range(n):
            t = time.perf_counter()
            async with session.request(method, url, json=body) as r:
                await r.read()
                if r.status != 200:
                    raise RuntimeError(f"{url}: HTTP {r.status}: {await r.text()}")
            samples.append(time.perf_counter() - t)

    await asyncio.gather(*[caller(calls // in_flight) for _ in range(in_flight)])
    return samples


async def rate(session: aiohttp.ClientSession, method: str, url: str, body: dict | None,
               calls: int) -> float:
    start = time.perf_counter()
    await latencies(session, method, url, body, calls, 32)
    return calls / (time.perf_counter() - start)


def p(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1] if len(samples) > 2 else samples[0]


async def measure(calls: int, profile: Path | None) -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = await start_serve(Path(tmp), profile=profile)
        try:
            connector = aiohttp.TCPConnector(limit=64)
            async with aiohttp.ClientSession(connector=connector) as session:
                async with session.post(base + "api/v1/config", json={
                        "operation": "put", "values": [
                            {"type": "tool-service", "key": "joke-service",
                             "value": (EXAMPLES / "joke-service.json").read_text()}]}) as r:
                    assert "error" not in await r.json()
                health = ("GET", base + "api/v1/health", None)
                tool = ("POST", base + "api/v1/flow/default/service/tool-service", CALL)
                for what in (health, tool):  # warm up
                    await latencies(session, *what, 200, 4)
                floor_s, call_s = [], []
                # alternate rounds: the machine's pace drifts during a run
                for _ in range(4):
                    floor_s += await latencies(session, *health, calls // 4, 4)
                    call_s += await latencies(session, *tool, calls // 4, 4)
                floor_rate = await rate(session, *health, calls)
                call_rate = await rate(session, *tool, calls)
        finally:
            proc.send_signal(2)  # SIGINT: a clean exit writes the profile
            await proc.wait()
    name = "gateway_tool_service"
    floor_what = "GET /api/v1/health, same server"
    return [
        Figure(bench=name, path="gateway REST tool-service call, p50 (4 in flight)",
               value=p(call_s, 50) * 1e3, unit="ms", floor=p(floor_s, 50) * 1e3,
               floor_what=floor_what, target="≤ 3× floor"),
        Figure(bench=name, path="gateway REST tool-service call, p90 (4 in flight)",
               value=p(call_s, 90) * 1e3, unit="ms", floor=p(floor_s, 90) * 1e3,
               floor_what=floor_what),
        Figure(bench=name, path="gateway REST tool-service calls/s (32 in flight)",
               value=call_rate, unit="calls/s", floor=floor_rate, floor_what=floor_what,
               better="higher"),
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--profile", type=Path, help="run the server under cProfile, "
                        "writing its stats to PATH")
    add_arguments(parser)
    args = parser.parse_args()
    calls = 1000 if args.quick else args.calls
    emit(await measure(calls, args.profile), args)


if __name__ == "__main__":
    asyncio.run(main())
