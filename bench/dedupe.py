"""What running each call once costs a tool service (issue 42, item 5): the joke service on
the memory bus called with a fresh idempotency key each time, its dedupe store off (the
floor), in memory (the default) and in PostgreSQL (replicas' shared store); and a repeat of a
key, answered from the memory store without running the tool.

Figures: µs per call one at a time, and calls/s with 256 in flight (memory only: a pool of
two connections bounds PostgreSQL's), each the median of ``--repeat`` rounds that alternate
the stores, so a burst of load on the shared machine falls on all of them.

    python bench/dedupe.py [--quick] [--postgres URL | --skip-postgres] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import asyncpg  # noqa: E402
from report import Figure, add_arguments, emit  # noqa: E402

from toolmesh import ToolServiceClient, connect  # noqa: E402
from toolmesh.bus.memory import new_memory_url  # noqa: E402
from toolmesh.tools.dedupe import DedupeStore, MemoryDedupe  # noqa: E402
from toolmesh.tools.dedupe.postgres import PostgresDedupe  # noqa: E402
from toolmesh.tools.queues import topic_queues  # noqa: E402
from toolmesh.tools.services.joke import JokeService  # noqa: E402

BENCH = "dedupe"
IN_FLIGHT = 256
Call = Callable[[], Awaitable[object]]


async def sequential(call: Call, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - start) / calls * 1e6


async def throughput(call: Call, calls: int) -> float:
    each = max(calls // IN_FLIGHT, 1)

    async def worker() -> None:
        for _ in range(each):
            await call()

    start = time.perf_counter()
    await asyncio.gather(*[worker() for _ in range(IN_FLIGHT)])
    return each * IN_FLIGHT / (time.perf_counter() - start)


async def measure(calls: int, repeat: int, postgres: str | None) -> dict[str, list[float]]:
    bus = await connect(new_memory_url())
    stores: dict[str, DedupeStore | bool] = {"off": False, "memory": MemoryDedupe()}
    if postgres is not None:
        stores["postgres"] = PostgresDedupe(postgres)
    keys = itertools.count()
    run = uuid.uuid4().hex[:8]
    services, clients = [], {}
    try:
        for name, store in stores.items():
            topic = f"bench-dedupe-{name}"
            service = JokeService(bus, topic=topic, id=topic, concurrency=IN_FLIGHT,
                                  announce=False, dedupe=store)
            await service.start()
            services.append(service)
            request_queue, response_queue = topic_queues(topic)
            clients[name] = ToolServiceClient(bus, request_queue=request_queue,
                                              response_queue=response_queue)
            await clients[name].start()

        def fresh(name: str) -> Call:
            client = clients[name]
            return lambda: client.call(user="bench", config={"style": "pun"},
                                       arguments={"topic": "food"},
                                       key=f"{run}/{next(keys)}", timeout=60)

        def repeated() -> Call:
            client = clients["memory"]
            return lambda: client.call(user="bench", config={"style": "pun"},
                                       arguments={"topic": "food"}, key=f"{run}/same",
                                       timeout=60)

        paths = {f"{name} sequential": fresh(name) for name in stores}
        paths["memory repeat sequential"] = repeated()
        for call in paths.values():  # warm up
            for _ in range(100):
                await call()
        rounds: dict[str, list[float]] = {}
        for _ in range(repeat):
            for name, call in paths.items():
                rounds.setdefault(name, []).append(await sequential(call, calls))
            for name in ("off", "memory"):
                rounds.setdefault(f"{name} in flight", []).append(
                    await throughput(fresh(name), calls * 4))
    finally:
        for client in clients.values():
            await client.stop()
        for service in services:
            await service.stop()
        for store in stores.values():
            if not isinstance(store, bool):
                await store.close()
        await bus.close()
    return rounds


async def drop_schema(url: str, schema: str) -> None:
    conn = await asyncpg.connect(url.split("?")[0])
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await conn.close()


async def run(args: argparse.Namespace) -> list[Figure]:
    calls = 500 if args.quick else args.calls
    repeat = 3 if args.quick else args.repeat
    schema = f"bench_dedupe_{uuid.uuid4().hex[:8]}"
    postgres = None if args.skip_postgres else f"{args.postgres}?schema={schema}"
    try:
        rounds = await measure(calls, repeat, postgres)
    finally:
        if postgres is not None:
            await drop_schema(args.postgres, schema)
    med = {name: statistics.median(values) for name, values in rounds.items()}
    note = f"memory bus, asyncio, median of {repeat} rounds"
    floor = "dedupe off"
    figures = [
        Figure(bench=BENCH, path="tool-service call, a new key, dedupe in memory, sequential",
               value=med["memory sequential"], unit="µs", floor=med["off sequential"],
               floor_what=floor, note=note),
        Figure(bench=BENCH, path=f"tool-service call, a new key, dedupe in memory, "
                                 f"{IN_FLIGHT} in flight",
               value=med["memory in flight"], unit="calls/s", floor=med["off in flight"],
               floor_what=floor, better="higher", note=note),
        Figure(bench=BENCH, path="tool-service call, a repeated key (answered from memory), "
                                 "sequential",
               value=med["memory repeat sequential"], unit="µs", floor=med["off sequential"],
               floor_what=floor, note=note),
    ]
    if postgres is not None:
        figures.append(Figure(
            bench=BENCH, path="tool-service call, a new key, dedupe in PostgreSQL, sequential",
            value=med["postgres sequential"], unit="µs", floor=med["off sequential"],
            floor_what=floor, note=note + "; PostgreSQL on loopback"))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default="postgresql://root@127.0.0.1:5432/test")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls per round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (the median is kept)")
    add_arguments(parser)
    args = parser.parse_args()
    emit(asyncio.run(run(args)), args)


if __name__ == "__main__":
    main()
