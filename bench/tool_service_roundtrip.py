"""Tool-service round trip through the bus, beside a direct await of the same invoke().

Prints one line per bus: µs per call (sequential), calls/s with 256 calls in flight, and the
overhead over the floor (a direct ``await service.invoke(...)`` measured in the same run).

    python bench/tool_service_roundtrip.py [--amqp URL] [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from toolmesh import ToolServiceClient, connect
from toolmesh.bus.memory import new_memory_url
from toolmesh.tools.queues import topic_queues
from toolmesh.tools.services.joke import JokeService

CALL = {"user": "bench", "config": {"style": "pun"}, "arguments": {"topic": "food"}}


async def floor(service: JokeService, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await service.invoke(CALL["user"], CALL["config"], CALL["arguments"])  # type: ignore[arg-type]
    return (time.perf_counter() - start) / calls


async def measure(url: str, calls: int) -> tuple[float, float, float]:
    bus = await connect(url)
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    request_queue, response_queue = topic_queues(topic)
    try:
        async with JokeService(bus, topic=topic, concurrency=256) as service, \
                ToolServiceClient(bus, request_queue=request_queue,
                                  response_queue=response_queue) as client:
            for _ in range(min(calls, 200)):  # warm up
                await client.call(**CALL, timeout=30)
            start = time.perf_counter()
            for _ in range(calls):
                await client.call(**CALL, timeout=30)
            sequential = (time.perf_counter() - start) / calls
            start = time.perf_counter()
            sem = asyncio.Semaphore(256)

            async def one() -> None:
                async with sem:
                    await client.call(**CALL, timeout=60)

            await asyncio.gather(*[one() for _ in range(calls * 4)])
            throughput = calls * 4 / (time.perf_counter() - start)
            direct = await floor(service, calls * 10)
    finally:
        await bus.close()
    return sequential, throughput, direct


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--skip-amqp", action="store_true")
    args = parser.parse_args()
    urls = [("memory", new_memory_url())] + ([] if args.skip_amqp else [("rabbitmq", args.amqp)])
    for name, url in urls:
        calls = args.calls if name == "memory" else max(args.calls // 4, 100)
        sequential, throughput, direct = await measure(url, calls)
        print(f"{name:8s} tool-service round trip: {sequential * 1e6:8.1f} µs/call sequential, "
              f"{throughput:8.0f} calls/s with 256 in flight; floor (direct await) "
              f"{direct * 1e6:.2f} µs; overhead {(sequential - direct) * 1e6:.1f} µs/call "
              f"({sequential / direct:.0f}x floor)")


if __name__ == "__main__":
    asyncio.run(main())
