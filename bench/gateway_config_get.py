"""A config `get` through the gateway over HTTP, beside an HTTP round trip to a trivial
endpoint (/api/v1/health) of the same server, measured in the same run.

Starts `toolmesh serve` as its own process (embedded bus, SQLite store) on a free port, loads
the joke tool config and an `mcp` item with a token, then prints p50 latency (sequential
calls on a keep-alive connection) and calls/s (32 concurrent clients) for the floor, a get of
the tool and a get of the mcp item (whose token the gateway masks), and their ratios.

    python bench/gateway_config_get.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

GET = {"operation": "get", "keys": [{"type": "tool", "key": "tell-joke"}]}
GET_MCP = {"operation": "get", "keys": [{"type": "mcp", "key": "weather"}]}
MCP = json.dumps({"url": "http://127.0.0.1:9000/mcp?api_key=k3y", "remote-name": "weather",
                  "auth-token": "t0ken-t0ken"})
TOOL = json.dumps({"type": "tool-service", "name": "tell-joke", "description": "Tell a joke",
                   "service": "joke-service", "arguments": [
                       {"name": "topic", "type": "string", "description": "The topic"}]})


async def start_server(data: Path) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toolmesh.cli.main", "serve", "--port", "0",
        "--config-store", str(data / "config.db"), stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    while True:
        line = (await proc.stderr.readline()).decode()
        if not line:
            raise RuntimeError("toolmesh serve exited")
        if m := re.search(r"gateway listening on (\S+)", line):
            # keep reading its log so a full pipe can never stall the server
            asyncio.get_running_loop().create_task(drain(proc.stderr))
            return proc, m.group(1)


async def drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


async def measure(session: aiohttp.ClientSession, method: str, url: str, body: dict | None,
                  calls: int) -> tuple[float, float]:
    async def once() -> None:
        async with session.request(method, url, json=body) as r:
            await r.read()
            assert r.status == 200, r.status

    for _ in range(50):
        await once()
    samples = []
    for _ in range(calls):
        t = time.perf_counter()
        await once()
        samples.append(time.perf_counter() - t)
    sem = asyncio.Semaphore(32)

    async def bounded() -> None:
        async with sem:
            await once()

    t = time.perf_counter()
    await asyncio.gather(*[bounded() for _ in range(calls * 2)])
    return statistics.median(samples), calls * 2 / (time.perf_counter() - t)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = await start_server(Path(tmp))
        try:
            async with aiohttp.ClientSession() as session:
                async with session.post(base + "api/v1/config", json={"operation": "put", "values": [
                        {"type": "tool", "key": "tell-joke", "value": TOOL},
                        {"type": "mcp", "key": "weather", "value": MCP}]}) as r:
                    assert "error" not in await r.json()
                floor_p50, floor_rate = await measure(session, "GET", base + "api/v1/health",
                                                      None, args.calls)
                get_p50, get_rate = await measure(session, "POST", base + "api/v1/config", GET,
                                                  args.calls)
                mcp_p50, mcp_rate = await measure(session, "POST", base + "api/v1/config",
                                                  GET_MCP, args.calls)
        finally:
            proc.terminate()
            await proc.wait()
    print(f"floor  GET /api/v1/health       p50 {floor_p50 * 1e3:6.2f} ms  {floor_rate:7.0f} calls/s")
    print(f"config POST /api/v1/config get  p50 {get_p50 * 1e3:6.2f} ms  {get_rate:7.0f} calls/s")
    print(f"mcp    get (token masked)       p50 {mcp_p50 * 1e3:6.2f} ms  {mcp_rate:7.0f} calls/s")
    print(f"ratio  config get / floor        p50 {get_p50 / floor_p50:5.2f}x   "
          f"throughput {floor_rate / get_rate:5.2f}x")
    print(f"ratio  mcp get / floor           p50 {mcp_p50 / floor_p50:5.2f}x   "
          f"throughput {floor_rate / mcp_rate:5.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
