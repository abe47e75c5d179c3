"""How fast the gateway says no: time to the first byte of each refusal, beside an HTTP round
trip to a trivial endpoint (/api/v1/health) of the same server, measured in the same run.

Starts `toolmesh serve` as its own process (embedded bus, SQLite store), configures a
tool-service item whose queue nobody consumes, then prints p50 and p99 time to the response
headers (sequential calls on a keep-alive connection, the cases alternating in rounds whose
order rotates) for:

* an unknown flow (``404 unknown-flow``, decided from the gateway's flow cache);
* a tool service nobody consumes (``503 service-unavailable``: the bus refuses the publish);
* a body nested too deep and one that is not JSON (``400``);
* for scale, a config ``get`` that succeeds.

    python bench/gateway_refusals.py [--calls N] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from processes import start_serve
from report import Figure, add_arguments, emit

NOBODY = json.dumps({"id": "nobody", "request-queue": "request:tg:nobody", "response-queue": "response:tg:nobody"})


Once = Callable[[], Awaitable[float]]


def ttfb(session: aiohttp.ClientSession, method: str, url: str, data: bytes | None,
         status: int) -> Once:
    """One call: seconds to its status line and headers."""
    headers = {"Content-Type": "application/json"}

    async def once() -> float:
        t = time.perf_counter()
        async with session.request(method, url, data=data, headers=headers) as r:
            first = time.perf_counter() - t  # the status line and headers are in
            await r.read()
            assert r.status == status, (url, r.status, await r.text())
        return first

    return once


async def measure(cases: list[Once], calls: int, rounds: int = 4) -> list[tuple[float, float]]:
    """p50 and p99 of ``calls`` calls of each case, in ``rounds`` alternating rounds."""
    for once in cases:  # warm up
        for _ in range(30):
            await once()
    samples: list[list[float]] = [[] for _ in cases]
    order = list(range(len(cases)))
    for r in range(rounds):
        for i in order[r % len(order):] + order[:r % len(order)]:
            samples[i] += [await cases[i]() for _ in range(max(calls // rounds, 1))]
    out = []
    for values in samples:
        values.sort()
        out.append((statistics.median(values), values[max(int(len(values) * 0.99) - 1, 0)]))
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=None,
                        help="sequential calls per case (default 1000; --quick 300)")
    add_arguments(parser)
    args = parser.parse_args()
    calls = args.calls or (300 if args.quick else 1000)
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = await start_serve(Path(tmp))
        try:
            async with aiohttp.ClientSession() as s:
                put = {"operation": "put", "values": [
                    {"type": "tool-service", "key": "nobody", "value": NOBODY}]}
                async with s.post(url + "api/v1/config", json=put) as r:
                    assert r.status == 200 and "error" not in await r.json(), await r.text()
                cases: list[tuple[str, str, str, Any, int]] = [
                    ("GET /api/v1/health", "GET", "api/v1/health", None, 200),
                    ("unknown flow → 404 unknown-flow", "POST",
                     "api/v1/flow/nosuch/service/agent", {"question": "q"}, 404),
                    ("nobody consumes → 503 service-unavailable", "POST",
                     "api/v1/flow/default/service/tool-service", {"id": "nobody"}, 503),
                    ("JSON nested 5,000 deep → 400", "POST", "api/v1/config",
                     "[" * 5000 + "]" * 5000, 400),
                    ("not JSON → 400", "POST", "api/v1/config", "{nope", 400),
                    ("a config get → 200 (for scale)", "POST", "api/v1/config",
                     {"operation": "get", "keys": [{"type": "tool-service", "key": "nobody"}]},
                     200),
                ]
                calls_of = []
                for _, method, path, body, status in cases:
                    data = None if body is None else (
                        body.encode() if isinstance(body, str) else json.dumps(body).encode())
                    calls_of.append(ttfb(s, method, url + path, data, status))
                rows = [(name, p50, p99) for (name, *_), (p50, p99)
                        in zip(cases, await measure(calls_of, calls))]
        finally:
            proc.terminate()
            await proc.wait()
    floor_p50, floor_p99 = rows[0][1], rows[0][2]
    bench = "gateway_refusals"
    floor_what = "GET /api/v1/health, same server"
    figures = []
    for name, p50, p99 in rows[1:]:
        figures.append(Figure(bench=bench, path=f"gateway, {name}: time to first byte, p50",
                              value=p50 * 1e3, unit="ms", floor=floor_p50 * 1e3,
                              floor_what=floor_what, note=f"p99 {p99 * 1e3:.2f} ms "
                              f"(floor's {floor_p99 * 1e3:.2f} ms)"))
    emit(figures, args)


if __name__ == "__main__":
    asyncio.run(main())
