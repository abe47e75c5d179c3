"""An MCP tool call through the mcp-tool service (memory bus), beside raw SDK calls.

Same streamable-HTTP MCP server (its own process), same run; one line per way of calling:

* ``sdk reused``   — ``ClientSession.call_tool`` on one long-lived session (the floor);
* ``sdk fresh``    — a new transport + session + ``initialize`` for every call (what the
  reference implementation does);
* ``mcp-tool svc`` — ``McpToolClient.invoke`` → memory bus → ``McpToolService`` → its pooled
  session → the server, and back.

    python bench/mcp_call.py [--calls N]

Rounds alternate between the three ways and each line is the median round, since the
server's pace drifts during a run.
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
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.mcp.servers import start_server  # noqa: E402
from toolmesh import connect  # noqa: E402
from toolmesh.bus.memory import new_memory_url  # noqa: E402
from toolmesh.config.service import ConfigService  # noqa: E402
from toolmesh.config.store import open_store  # noqa: E402
from toolmesh.mcp import McpToolClient, McpToolService  # noqa: E402

ARGS = {"text": "hello"}
ROUNDS = 7


async def timed(calls: int, call: Callable[[], Awaitable[object]]) -> float:
    """Seconds per call over ``calls`` sequential calls."""
    start = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - start) / calls


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200, help="calls per round and way")
    args = parser.parse_args()
    server = await start_server("streamable-http")
    url = server.url
    bus = await connect(new_memory_url())
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    config_queues = {"request_queue": f"request:tg:{topic}-config",
                     "response_queue": f"response:tg:{topic}-config",
                     "push_queue": f"notify:tg:{topic}-config"}
    queues = {"request_queue": f"request:tg:{topic}-mcp",
              "response_queue": f"response:tg:{topic}-mcp"}
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(os.path.join(tmp, "config.db"))
        await store.put("default", [("mcp", "echo", json.dumps({"url": url}))])
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(streamable_http_client(url))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                await stack.enter_async_context(ConfigService(bus, store, **config_queues))
                service = await stack.enter_async_context(
                    McpToolService(bus, **queues, config_queues=config_queues))
                client = await stack.enter_async_context(McpToolClient(bus, **queues))
                await service.wait_for_config(1)

                async def fresh() -> object:
                    async with streamable_http_client(url) as (r, w), ClientSession(r, w) as s:
                        await s.initialize()
                        return await s.call_tool("echo", ARGS)

                ways: dict[str, tuple[int, Callable[[], Awaitable[object]]]] = {
                    "reused": (args.calls, lambda: session.call_tool("echo", ARGS)),
                    "service": (args.calls, lambda: client.invoke("echo", ARGS, timeout=30)),
                    "fresh": (max(args.calls // 10, 10), fresh),
                }
                for calls, call in ways.values():  # warm up every path
                    await timed(min(calls, 20), call)
                # Interleaved rounds, median per way: the server's pace drifts during a run.
                samples: dict[str, list[float]] = {name: [] for name in ways}
                for _ in range(ROUNDS):
                    for name, (calls, call) in ways.items():
                        samples[name].append(await timed(calls, call))
        finally:
            await bus.close()
            await store.close()
            await server.stop()
    reused, service, fresh_ = (statistics.median(samples[n]) for n in ("reused", "service", "fresh"))
    print(f"sdk reused session   {reused * 1e3:8.3f} ms/call ({reused * 1e6:7.0f} µs)  1.00x")
    print(f"sdk fresh session    {fresh_ * 1e3:8.3f} ms/call ({fresh_ * 1e6:7.0f} µs)  "
          f"{fresh_ / reused:5.2f}x reused")
    print(f"mcp-tool service     {service * 1e3:8.3f} ms/call ({service * 1e6:7.0f} µs)  "
          f"{service / reused:5.2f}x reused (target <= 1.3x); "
          f"{fresh_ / service:.1f}x faster than a fresh session per call")


if __name__ == "__main__":
    asyncio.run(main())
