"""A tool-service call through the bus, beside an in-process queue RPC doing the same work.

The floor is the least an in-process RPC can cost, written as a programmer would by hand: a
client puts ``(id, encoded request)`` on an :class:`asyncio.Queue` and awaits a future from a
dict keyed by id; a server loop gets, decodes, answers, encodes and puts ``(id, encoded
response)`` on a response queue; a response loop gets, decodes and resolves the future. Its
request and response are the tool service's own wire bodies (``config`` and ``arguments`` as
JSON text inside the JSON body, as TrustGraph sends them) and the answer is the joke
service's own :func:`~toolmesh.tools.services.joke.tell_joke`, so the floor does every
encode, decode and computation a toolmesh call does — and nothing else. It is measured with
orjson (the floor the targets are set against) and with the standard library's json.

toolmesh: a :class:`~toolmesh.tools.services.joke.JokeService` and a
:class:`toolmesh.ToolServiceClient` on one ``memory://`` bus (and, unless ``--skip-amqp``,
on RabbitMQ, whose floor stays the direct ``await`` of the service's ``invoke()``: the raw
aio-pika RPC is ``bench/rabbitmq_rpc.py``'s).

Figures, per event loop (``--loop``): µs per call with one call at a time, and calls/s with
256 in flight (256 workers, each calling in a loop: the same driver for floor and toolmesh).
Each is the median of ``--repeat`` rounds that alternate floor and toolmesh, so a burst of
load on the shared machine falls on both.

    python bench/tool_service_roundtrip.py [--loop asyncio|uvloop|both] [--quick]
        [--skip-amqp] [--amqp URL] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import Figure, add_arguments, emit  # noqa: E402

from toolmesh import ToolServiceClient, connect  # noqa: E402
from toolmesh.bus.memory import new_memory_url  # noqa: E402
from toolmesh.tools.queues import topic_queues  # noqa: E402
from toolmesh.tools.services.joke import JokeService, tell_joke  # noqa: E402

BENCH = "tool_service_roundtrip"
CALL: dict[str, Any] = {"user": "bench", "config": {"style": "pun"},
                        "arguments": {"topic": "food"}}
IN_FLIGHT = 256

Call = Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class Codec:
    """The serializer a floor uses, as ``dumps -> bytes`` and ``loads``."""

    name: str
    dumps: Callable[[Any], bytes]
    loads: Callable[[bytes | str], Any]


ORJSON = Codec("orjson", orjson.dumps, orjson.loads)
JSON = Codec("json", lambda v: json.dumps(v, separators=(",", ":"),
                                           ensure_ascii=False).encode(), json.loads)


class QueueRpc:
    """The floor: an in-process RPC over two asyncio queues and a future map (see above)."""

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self.requests: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        self.responses: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.ids = itertools.count()
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> QueueRpc:
        self.tasks = [asyncio.create_task(self._serve()), asyncio.create_task(self._resolve())]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def call(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        dumps = self.codec.dumps
        request_id = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future
        body = {"user": user, "config": dumps(config).decode(),
                "arguments": dumps(arguments).decode()}
        self.requests.put_nowait((request_id, dumps(body)))
        try:
            response = await future
        finally:
            del self.waiting[request_id]
        return response["response"]

    async def _serve(self) -> None:
        dumps, loads = self.codec.dumps, self.codec.loads
        while True:
            request_id, raw = await self.requests.get()
            request = loads(raw)
            text = tell_joke(request["user"], loads(request["config"]),
                             loads(request["arguments"]))
            self.responses.put_nowait((request_id, dumps(
                {"error": None, "response": text, "end_of_stream": True})))

    async def _resolve(self) -> None:
        loads = self.codec.loads
        while True:
            request_id, raw = await self.responses.get()
            future = self.waiting.get(request_id)
            if future is not None and not future.done():
                future.set_result(loads(raw))


async def sequential(call: Call, calls: int) -> float:
    """µs per call, one call at a time."""
    start = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - start) / calls * 1e6


async def throughput(call: Call, calls: int, in_flight: int = IN_FLIGHT) -> float:
    """calls/s with ``in_flight`` workers each calling in a loop."""
    each = max(calls // in_flight, 1)

    async def worker() -> None:
        for _ in range(each):
            await call()

    start = time.perf_counter()
    await asyncio.gather(*[worker() for _ in range(in_flight)])
    return each * in_flight / (time.perf_counter() - start)


@dataclass
class Rounds:
    """The figures of each round, by name; their medians are reported."""

    values: dict[str, list[float]]

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)

    def median(self, name: str) -> float:
        return statistics.median(self.values[name])


async def memory_rounds(calls: int, repeat: int) -> Rounds:
    """Floors (orjson, json) and the memory bus, alternating, ``repeat`` rounds."""
    rounds = Rounds({})
    bus = await connect(new_memory_url())
    request_queue, response_queue = topic_queues("bench")
    try:
        async with QueueRpc(ORJSON) as fast, QueueRpc(JSON) as slow, \
                JokeService(bus, topic="bench", concurrency=IN_FLIGHT, announce=False), \
                ToolServiceClient(bus, request_queue=request_queue,
                                  response_queue=response_queue) as client:
            paths: dict[str, Call] = {
                "orjson": lambda: fast.call(CALL["user"], CALL["config"], CALL["arguments"]),
                "json": lambda: slow.call(CALL["user"], CALL["config"], CALL["arguments"]),
                "memory": lambda: client.call(**CALL, timeout=60),
            }
            for call in paths.values():  # warm up (and check every path answers alike)
                for _ in range(200):
                    answer = await call()
                assert answer == tell_joke(CALL["user"], CALL["config"], CALL["arguments"])
            for _ in range(repeat):
                for name, call in paths.items():
                    rounds.add(f"{name} sequential", await sequential(call, calls))
                    rounds.add(f"{name} in flight", await throughput(call, calls * 4))
    finally:
        await bus.close()
    return rounds


async def amqp_round(url: str, calls: int) -> tuple[float, float, float]:
    """RabbitMQ: µs/call sequential, calls/s with 256 in flight, and the direct-await floor."""
    bus = await connect(url)
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    request_queue, response_queue = topic_queues(topic)
    try:
        async with JokeService(bus, topic=topic, concurrency=IN_FLIGHT,
                               announce=False) as service, \
                ToolServiceClient(bus, request_queue=request_queue,
                                  response_queue=response_queue) as client:

            async def call() -> object:
                return await client.call(**CALL, timeout=60)

            async def direct() -> object:
                return await service.invoke(CALL["user"], CALL["config"], CALL["arguments"])

            for _ in range(min(calls, 200)):  # warm up
                await call()
            seq = await sequential(call, calls)
            tput = await throughput(call, calls * 4)
            floor = await sequential(direct, calls * 10)
    finally:
        await bus.close()
    return seq, tput, floor


def memory_figures(rounds: Rounds, loop: str, repeat: int) -> list[Figure]:
    note = f"{loop} loop, median of {repeat} rounds"
    floor_what = "in-process queue RPC, orjson"
    seq, tput = "µs", "calls/s"
    return [
        Figure(bench=BENCH, path="tool-service call, memory bus, sequential",
               value=rounds.median("memory sequential"), unit=seq,
               floor=rounds.median("orjson sequential"), floor_what=floor_what,
               target="≤ 2× floor", note=note),
        Figure(bench=BENCH, path=f"tool-service call, memory bus, {IN_FLIGHT} in flight",
               value=rounds.median("memory in flight"), unit=tput,
               floor=rounds.median("orjson in flight"), floor_what=floor_what,
               better="higher", target="≥ 0.5× floor", note=note),
        # the serializer's share of the floor: the same RPC with the standard library's json
        Figure(bench=BENCH, path="in-process queue RPC, json, sequential",
               value=rounds.median("json sequential"), unit=seq,
               floor=rounds.median("orjson sequential"), floor_what=floor_what, note=note),
        Figure(bench=BENCH, path=f"in-process queue RPC, json, {IN_FLIGHT} in flight",
               value=rounds.median("json in flight"), unit=tput,
               floor=rounds.median("orjson in flight"), floor_what=floor_what,
               better="higher", note=note),
    ]


def amqp_figures(result: tuple[float, float, float], loop: str) -> list[Figure]:
    # a direct await of invoke() is no floor for a broker round trip (ratios of 1,000x say
    # nothing): rabbitmq_rpc.py measures the same call against a plain aio-pika RPC
    seq, tput, _direct = result
    note = f"{loop} loop; against a plain aio-pika RPC: rabbitmq_rpc"
    return [
        Figure(bench=BENCH, path="tool-service call, RabbitMQ, sequential", value=seq,
               unit="µs", note=note),
        Figure(bench=BENCH, path=f"tool-service call, RabbitMQ, {IN_FLIGHT} in flight",
               value=tput, unit="calls/s", better="higher", note=note),
    ]


async def run(args: argparse.Namespace, loop: str) -> list[Figure]:
    calls = 1000 if args.quick else args.calls
    repeat = 3 if args.quick else args.repeat
    figures = memory_figures(await memory_rounds(calls, repeat), loop, repeat)
    if not args.skip_amqp:
        figures += amqp_figures(await amqp_round(args.amqp, max(calls // 4, 100)), loop)
    return figures


def loop_factory(loop: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    if loop == "asyncio":
        return None
    import uvloop  # the optional extra: pip install 'toolmesh[fast]'

    return uvloop.new_event_loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--skip-amqp", action="store_true")
    parser.add_argument("--calls", type=int, default=4000,
                        help="sequential calls per round (four times as many in flight)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (the median is kept)")
    parser.add_argument("--loop", choices=("asyncio", "uvloop", "both"), default="both",
                        help="the event loop(s) to measure on (both: when uvloop is installed)")
    add_arguments(parser)
    args = parser.parse_args()
    loops = ["asyncio", "uvloop"] if args.loop == "both" else [args.loop]
    if args.loop == "both":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            print("uvloop is not installed (pip install 'toolmesh[fast]'): asyncio only",
                  file=sys.stderr)
            loops = ["asyncio"]
    figures: list[Figure] = []
    for loop in loops:
        with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
            figures += runner.run(run(args, loop))
    emit(figures, args)


if __name__ == "__main__":
    main()
