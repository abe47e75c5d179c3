"""A tool-service call over RabbitMQ, beside a plain aio-pika RPC on the same broker.

The floor is the RPC of aio-pika's own tutorial, as a programmer would write it by hand: one
connection; a server channel (prefetch = in-flight) consuming a request queue and answering
each request on the default exchange to its ``reply_to`` with its ``correlation_id``, then
acknowledging it; a client channel publishing requests (aio-pika's defaults: publisher
confirms on, mandatory) and consuming an exclusive reply queue without acknowledgements;
futures by correlation id.

toolmesh: a :class:`~toolmesh.tools.services.joke.JokeService` and a
:class:`toolmesh.ToolServiceClient` on one ``amqp://`` bus (one connection, as the floor).

Figures, each the median of ``--repeat`` rounds that alternate floor and toolmesh (the
machine is shared; a ratio from the same round says more than a figure alone):

* p50 latency of sequential calls;
* calls/s with ``--inflight`` (64) calls in flight;
* process CPU per call during the throughput run (both ends run in this process), and the
  broker's, when it runs on this machine — steadier than calls/s when other work shares the
  cores, and what calls/s comes down to once the cores are busy.

    python bench/rabbitmq_rpc.py [--amqp URL] [--quick] [--loop asyncio|uvloop] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import aio_pika
from aio_pika.abc import AbstractIncomingMessage

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import Figure, add_arguments, emit

from toolmesh import ToolServiceClient, connect
from toolmesh.tools.queues import topic_queues
from toolmesh.tools.services.joke import JokeService

BENCH = "rabbitmq_rpc"
CALL = {"user": "bench", "config": {"style": "pun"}, "arguments": {"topic": "food"}}
FLOOR_WHAT = "plain aio-pika RPC, same broker"

Call = Callable[[], Awaitable[object]]


@dataclass
class Round:
    p50: float  # seconds
    throughput: float  # calls/s
    cpu: float  # process CPU seconds per call in the throughput run
    broker_cpu: float  # the broker's CPU seconds per call in it (nan if not on this machine)


def broker_pid() -> int | None:
    """The local RabbitMQ's Erlang VM, if it runs on this machine and we may read it."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if (entry / "comm").read_text().strip().startswith("beam"):
                return int(entry.name)
        except OSError:
            continue
    return None


BROKER = broker_pid()


def broker_cpu() -> float:
    if BROKER is None:
        return float("nan")
    try:
        fields = Path(f"/proc/{BROKER}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def sequential_p50(call: Call, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def in_flight(call: Call, calls: int, width: int) -> tuple[float, float, float]:
    """calls/s, and this process's and the broker's CPU seconds per call, with ``width``
    workers calling back to back."""
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await call()

    broker, cpu, start = broker_cpu(), time.process_time(), time.perf_counter()
    await asyncio.gather(*[worker() for _ in range(width)])
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return calls / elapsed, cpu / calls, (broker_cpu() - broker) / calls


async def measure(call: Call, *, sequential: int, burst: int, width: int) -> Round:
    for _ in range(min(sequential, 200)):  # warm up
        await call()
    await in_flight(call, width * 4, width)
    p50 = await sequential_p50(call, sequential)
    throughput, cpu, broker = await in_flight(call, burst, width)
    return Round(p50, throughput, cpu, broker)


class AioPikaRpc:
    """The floor (see the module docstring)."""

    def __init__(self, url: str, width: int) -> None:
        self.url = url
        self.width = width
        self.futures: dict[str, asyncio.Future[bytes]] = {}

    async def __aenter__(self) -> Self:
        self.connection = await aio_pika.connect(self.url)
        server = await self.connection.channel()
        await server.set_qos(prefetch_count=self.width)
        requests = await server.declare_queue(f"bench-rpc-{uuid.uuid4().hex[:8]}",
                                              exclusive=True, auto_delete=True)
        self.client = await self.connection.channel()
        self.replies = await self.client.declare_queue(exclusive=True, auto_delete=True)
        self.request_queue = requests.name

        async def serve(message: AbstractIncomingMessage) -> None:
            async with message.process(requeue=False):
                await server.default_exchange.publish(
                    aio_pika.Message(b'{"response":"I am on a seafood diet","end_of_stream":true}',
                                     correlation_id=message.correlation_id),
                    routing_key=message.reply_to or "")

        async def answer(message: AbstractIncomingMessage) -> None:
            future = self.futures.pop(message.correlation_id or "", None)
            if future is not None and not future.done():
                future.set_result(message.body)

        await requests.consume(serve)
        await self.replies.consume(answer, no_ack=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.connection.close()

    async def call(self) -> bytes:
        correlation_id = str(uuid.uuid4())
        future = asyncio.get_running_loop().create_future()
        self.futures[correlation_id] = future
        await self.client.default_exchange.publish(
            aio_pika.Message(b'{"user":"bench","config":{"style":"pun"},'
                             b'"arguments":{"topic":"food"}}',
                             content_type="application/json",
                             correlation_id=correlation_id, reply_to=self.replies.name),
            routing_key=self.request_queue)
        return await future


async def floor_round(url: str, **kw: int) -> Round:
    async with AioPikaRpc(url, kw["width"]) as rpc:
        return await measure(rpc.call, **kw)


async def toolmesh_round(url: str, **kw: int) -> Round:
    bus = await connect(url)
    topic = f"bench-rpc-{uuid.uuid4().hex[:8]}"
    request_queue, response_queue = topic_queues(topic)
    try:
        async with JokeService(bus, topic=topic, concurrency=kw["width"]), \
                ToolServiceClient(bus, request_queue=request_queue,
                                  response_queue=response_queue) as client:
            async def call() -> str:
                return await client.call(**CALL, timeout=60)  # type: ignore[arg-type]
            return await measure(call, **kw)
    finally:
        await bus.close()


def med(values: list[float]) -> float:
    return statistics.median(values)


async def run(args: argparse.Namespace) -> list[Figure]:
    kw = {"sequential": args.sequential, "burst": args.burst, "width": args.inflight}
    floors: list[Round] = []
    ours: list[Round] = []
    for i in range(args.repeat):
        floors.append(await floor_round(args.amqp, **kw))
        ours.append(await toolmesh_round(args.amqp, **kw))
        if args.verbose:
            f, t = floors[-1], ours[-1]
            print(f"round {i + 1}: floor p50 {f.p50 * 1e6:.0f} µs, {f.throughput:.0f} calls/s, "
                  f"{f.cpu * 1e6:.0f}+{f.broker_cpu * 1e6:.0f} µs CPU/call | toolmesh p50 "
                  f"{t.p50 * 1e6:.0f} µs, {t.throughput:.0f} calls/s, "
                  f"{t.cpu * 1e6:.0f}+{t.broker_cpu * 1e6:.0f} µs CPU/call (process+broker)",
                  flush=True)
    note = f"{args.loop} loop, median of {args.repeat} rounds"
    width = args.inflight
    figures = [
        Figure(bench=BENCH, path="tool-service call, RabbitMQ, sequential p50",
               value=med([r.p50 for r in ours]) * 1e6, unit="µs",
               floor=med([r.p50 for r in floors]) * 1e6, floor_what=FLOOR_WHAT,
               target="≤ 1.2× floor", note=note),
        Figure(bench=BENCH, path=f"tool-service calls, RabbitMQ, {width} in flight",
               value=med([r.throughput for r in ours]), unit="calls/s",
               floor=med([r.throughput for r in floors]), floor_what=FLOOR_WHAT,
               better="higher", note=note,
               # issue 18: twice the calls/s of the bus before it, which made 0.63× floor
               target="≥ 1.26× floor"),
        Figure(bench=BENCH, path=f"tool-service call, RabbitMQ, process CPU per call "
                                 f"({width} in flight, both ends)",
               value=med([r.cpu for r in ours]) * 1e6, unit="µs",
               floor=med([r.cpu for r in floors]) * 1e6, floor_what=FLOOR_WHAT, note=note),
    ]
    if BROKER is not None:
        figures.append(Figure(
            bench=BENCH, path=f"tool-service call, RabbitMQ, broker CPU per call ({width} in flight)",
            value=med([r.broker_cpu for r in ours]) * 1e6, unit="µs",
            floor=med([r.broker_cpu for r in floors]) * 1e6, floor_what=FLOOR_WHAT, note=note))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--inflight", type=int, default=64, help="calls in flight (64)")
    parser.add_argument("--sequential", type=int, help="sequential calls per round")
    parser.add_argument("--burst", type=int, help="calls per throughput run")
    parser.add_argument("--repeat", type=int, help="rounds (floor, then toolmesh, each)")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every round")
    args = parser.parse_args()
    args.sequential = args.sequential or (300 if args.quick else 1000)
    args.burst = args.burst or (3000 if args.quick else 10000)
    args.repeat = args.repeat or (3 if args.quick else 5)
    if args.loop == "uvloop":
        import uvloop  # an optional extra: pip install uvloop

        figures = uvloop.run(run(args))
    else:
        figures = asyncio.run(run(args))
    emit(figures, args)


if __name__ == "__main__":
    main()
