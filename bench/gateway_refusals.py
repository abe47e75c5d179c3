"""How fast the gateway says no: time to the first byte of each refusal, beside an HTTP round
trip to a trivial endpoint (/api/v1/health) of the same server, measured in the same run.

Starts `toolmesh serve` as its own process (embedded bus, SQLite store), configures a
tool-service item whose queue nobody consumes, then prints p50 and p99 time to the response
headers (sequential calls on a keep-alive connection) for:

* an unknown flow (``404 unknown-flow``, decided from the gateway's flow cache);
* a tool service nobody consumes (``503 service-unavailable``: the bus refuses the publish);
* a body nested too deep and one that is not JSON (``400``);
* for scale, a config ``get`` that succeeds.

    python bench/gateway_refusals.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from gateway_config_get import start_server

NOBODY = json.dumps({"id": "nobody", "request-queue": "request:tg:nobody", "response-queue": "response:tg:nobody"})


async def ttfb(session: aiohttp.ClientSession, method: str, url: str, data: bytes | None,
               status: int, calls: int) -> tuple[float, float]:
    headers = {"Content-Type": "application/json"}

    async def once() -> float:
        t = time.perf_counter()
        async with session.request(method, url, data=data, headers=headers) as r:
            first = time.perf_counter() - t  # the status line and headers are in
            await r.read()
            assert r.status == status, (url, r.status, await r.text())
        return first

    for _ in range(30):
        await once()
    samples = sorted([await once() for _ in range(calls)])
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = await start_server(Path(tmp))
        try:
            async with aiohttp.ClientSession() as s:
                put = {"operation": "put", "values": [
                    {"type": "tool-service", "key": "nobody", "value": NOBODY}]}
                async with s.post(url + "api/v1/config", json=put) as r:
                    assert r.status == 200 and "error" not in await r.json(), await r.text()
                cases: list[tuple[str, str, str, Any, int]] = [
                    ("floor: GET /api/v1/health", "GET", "api/v1/health", None, 200),
                    ("unknown flow -> 404 unknown-flow", "POST",
                     "api/v1/flow/nosuch/service/agent", {"question": "q"}, 404),
                    ("nobody consumes -> 503 service-unavailable", "POST",
                     "api/v1/flow/default/service/tool-service", {"id": "nobody"}, 503),
                    ("JSON nested 5,000 deep -> 400", "POST", "api/v1/config",
                     "[" * 5000 + "]" * 5000, 400),
                    ("not JSON -> 400", "POST", "api/v1/config", "{nope", 400),
                    ("for scale: config get -> 200", "POST", "api/v1/config",
                     {"operation": "get", "keys": [{"type": "tool-service", "key": "nobody"}]},
                     200),
                ]
                rows = []
                for name, method, path, body, status in cases:
                    data = None if body is None else (
                        body.encode() if isinstance(body, str) else json.dumps(body).encode())
                    rows.append((name, *await ttfb(s, method, url + path, data, status, calls)))
        finally:
            proc.terminate()
            await proc.wait()
    floor = rows[0][1]
    print(f"{'time to first byte':48} {'p50':>9} {'p99':>9} {'p50/floor':>10}")
    for name, p50, p99 in rows:
        print(f"{name:48} {p50 * 1e3:7.2f}ms {p99 * 1e3:7.2f}ms {p50 / floor:9.1f}x")


if __name__ == "__main__":
    asyncio.run(main())
