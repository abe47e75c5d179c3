"""Self-announcing tool services on RabbitMQ: how soon a started service is offered, how soon a
killed one is dropped, and what the announcements cost on the wire.

The tool service is the tool-services guide's ``wordtools:WordCount``
(``examples/wordcount``), started as its own ``toolmesh run`` process every round; the agent
(``AgentService``, with the config service) runs in this process on the same private RabbitMQ
vhost, so the moment it offers the tool is seen exactly (``wait_for_tools``), as is the moment
its registry counts an instance (``Registry.wait_for``). Figures are medians over rounds
(min..max beside them) — the machine is small and shared, so absolute numbers drift; the
ratios to floors measured in the same run are what compare across runs.

1. Start to offered: seconds from spawning the process to (a) its ``ready:`` line with
   ``--no-announcements`` — the floor: interpreter, imports, connecting, consuming; (b) its
   ``ready:`` line announcing (the first announcement is sent before it); (c) the agent's
   registry counting the instance; (d) the agent offering ``count-words``. The two kinds of
   process alternate, the order rotating every round. (d) - (b) is what the announcement path
   adds after the service is up.
2. Removal: seconds from SIGKILL to the registry dropping the instance, for a few ttls T,
   the kill at a random moment ``T .. 2T`` after the service was offered (so at a random phase
   of its heartbeat); expected between ``2T/3`` (killed just after a beat) and ``T`` (just
   before one), plus delivery. Beside it: SIGTERM to removal (the goodbye).
3. Traffic per instance: every message on the announcement exchange
   (``tg.notify.tool-descriptors``) from one instance, heard with plain aio-pika for a few
   beats: bytes per announcement (the JSON body) x beats per second, and what that is at the
   default ttl (15 s). Every listener (each agent, each gateway) gets its own copy.

A private RabbitMQ vhost is created with rabbitmqctl and deleted at the end (also on failure
or Ctrl-C); every child process is stopped.

    python bench/announcements.py [--rounds N] [--ttl T ...] [--quick] [--amqp URL]
                                  [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import aio_pika  # noqa: E402
from report import Figure, add_arguments, emit  # noqa: E402

from bench.processes import Child, rabbit_vhost  # noqa: E402
from toolmesh import connect  # noqa: E402
from toolmesh.agent.service import AgentService  # noqa: E402
from toolmesh.bus.base import Bus  # noqa: E402
from toolmesh.config.service import ConfigService  # noqa: E402
from toolmesh.config.store import open_store  # noqa: E402
from toolmesh.registry.wire import DEFAULT_TTL  # noqa: E402

#: the guide's service, importable from the repository root (``toolmesh run`` runs from
#: there, so the example's folder is not the current one)
SERVICE = "examples.wordcount.wordtools:WordCount"
REQUEST_QUEUE = "non-persistent://tg/request/word-count"
TOOL = "count-words"
ANNOUNCEMENTS = "tg.notify.tool-descriptors"
#: seconds any one wait may take before the bench gives up
TIMEOUT = 60.0
BENCH = "announcements"


def stats(values: list[float], unit: Callable[[float], str]) -> str:
    return (f"{unit(statistics.median(values)):>9s}  ({unit(min(values))} .. "
            f"{unit(max(values))})")


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms"


def secs(seconds: float) -> str:
    return f"{seconds:.2f} s"


async def at(awaitable: Awaitable[Any]) -> float:
    """The moment ``awaitable`` finished (perf_counter)."""
    await awaitable
    return time.perf_counter()


class Bench:
    def __init__(self, url: str, bus: Bus, agent: AgentService) -> None:
        self.url = url
        self.bus = bus
        self.agent = agent
        assert agent.registry is not None
        self.registry = agent.registry
        self.children: list[Child] = []
        self._n = 0

    def child(self, *args: str) -> Child:
        self._n += 1
        c = Child(f"wordcount-{self._n}", ["run", SERVICE, "--bus", self.url, *args])
        self.children.append(c)
        return c

    def live(self) -> int:
        return self.registry.live_instances("word-count", REQUEST_QUEUE) or 0

    async def registry_holds(self, predicate: Callable[[], bool],
                             timeout: float = TIMEOUT) -> None:
        async with asyncio.timeout(timeout):
            await self.registry.wait_for(predicate)

    async def offered(self, present: bool) -> None:
        async with asyncio.timeout(TIMEOUT):
            await self.agent.wait_for_tools(lambda ts: (TOOL in ts.tools) == present)

    # --- 1 ---------------------------------------------------------------------------------

    async def start_floor(self) -> float:
        """Spawn -> ready with --no-announcements."""
        c = self.child("--no-announcements")
        spawned = time.perf_counter()
        await c.start(TIMEOUT)
        ready = time.perf_counter() - spawned
        await c.stop()
        return ready

    async def start_announcing(self) -> tuple[float, float, float, float]:
        """Spawn -> ready, -> counted, -> offered; then SIGTERM -> dropped."""
        assert self.live() == 0
        c = self.child("--announce-ttl", f"{DEFAULT_TTL:g}")
        counted = asyncio.ensure_future(at(self.registry_holds(lambda: self.live() == 1)))
        offered = asyncio.ensure_future(at(self.offered(True)))
        spawned = time.perf_counter()
        await c.start(TIMEOUT)
        ready = time.perf_counter()
        counted_at, offered_at = await asyncio.gather(counted, offered)
        dropped = asyncio.ensure_future(at(self.registry_holds(lambda: self.live() == 0)))
        stopped = time.perf_counter()
        await c.stop()
        gone = await dropped - stopped
        await self.offered(False)
        return ready - spawned, counted_at - spawned, offered_at - spawned, gone

    # --- 2 ---------------------------------------------------------------------------------

    async def killed(self, ttl: float, rng: random.Random) -> float:
        """SIGKILL at a random phase -> the registry drops the instance."""
        assert self.live() == 0
        c = self.child("--announce-ttl", f"{ttl:g}")
        offered = asyncio.ensure_future(self.offered(True))
        await c.start(TIMEOUT)
        await offered
        # the moment of the kill is the bench's choice: some heartbeats in, at a random phase
        await asyncio.sleep(rng.uniform(ttl, 2 * ttl))
        assert self.live() == 1, "the instance was dropped while it was alive"
        dropped = asyncio.ensure_future(at(self.registry_holds(lambda: self.live() == 0,
                                                               timeout=ttl + TIMEOUT)))
        assert c.proc is not None
        killed = time.perf_counter()
        c.proc.send_signal(signal.SIGKILL)
        gone = await dropped - killed
        await c.stop()
        await self.offered(False)
        return gone

    # --- 3 ---------------------------------------------------------------------------------

    async def traffic(self, ttl: float, beats: int) -> tuple[list[int], list[float]]:
        """Body sizes and arrival intervals of ``beats`` announcements of one instance."""
        connection = await aio_pika.connect(self.url)
        arrivals: list[tuple[float, int]] = []
        enough = asyncio.Event()
        mine: list[str] = []
        c = self.child("--announce-ttl", f"{ttl:g}")
        try:
            channel = await connection.channel()
            exchange = await channel.declare_exchange(
                ANNOUNCEMENTS, aio_pika.ExchangeType.FANOUT, durable=True)
            queue = await channel.declare_queue("", exclusive=True)
            await queue.bind(exchange, routing_key="")

            async def heard(message: aio_pika.abc.AbstractIncomingMessage) -> None:
                body = json.loads(message.body)
                if c.pid is not None and body.get("pid") == c.pid and not body.get("goodbye"):
                    mine.append(body["instance"])
                    arrivals.append((time.perf_counter(), len(message.body)))
                    if len(arrivals) > beats:
                        enough.set()

            await queue.consume(heard, no_ack=True)
            await c.start(TIMEOUT)
            async with asyncio.timeout(ttl / 3 * (beats + 2) + TIMEOUT):
                await enough.wait()
        finally:
            await c.stop()
            await connection.close()
        assert len(set(mine)) == 1
        times = [t for t, _ in arrivals]
        return [n for _, n in arrivals], [b - a for a, b in itertools.pairwise(times)]


async def run(args: argparse.Namespace) -> list[Figure]:
    rounds = args.rounds or (3 if args.quick else 7)
    ttls = args.ttl or ([1.0] if args.quick else [1.0, 3.0])
    kills = 3 if args.quick else 6
    beats = 4 if args.quick else 8
    rng = random.Random(args.seed)
    print(f"toolmesh announcements benchmark: {rounds} rounds of start-up, {kills} kills per "
          f"ttl, {beats} beats of traffic; medians (min .. max); seed {args.seed}")
    async with AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="toolmesh-bench-")))
        url = await stack.enter_async_context(
            rabbit_vhost(args.amqp, f"toolmesh-bench-announce-{uuid.uuid4().hex[:8]}"))
        bus = await connect(url)
        stack.push_async_callback(bus.close)
        store = await open_store(f"sqlite:///{tmp}/config.db")
        stack.push_async_callback(store.close)
        config = ConfigService(bus, store)
        await config.start()
        stack.push_async_callback(config.stop)
        agent = AgentService(bus)
        await agent.start()
        stack.push_async_callback(agent.stop)
        await agent.wait_for_config(0)
        b = Bench(url, bus, agent)

        async def stop_children() -> None:
            for c in b.children:
                await c.stop()
        stack.push_async_callback(stop_children)

        # 1 ---------------------------------------------------------------------------------
        floor: list[float] = []
        ready: list[float] = []
        counted: list[float] = []
        offered: list[float] = []
        goodbye: list[float] = []
        for r in range(rounds):
            for kind in (("floor", "announcing") if r % 2 == 0 else ("announcing", "floor")):
                if kind == "floor":
                    floor.append(await b.start_floor())
                else:
                    a, c, o, g = await b.start_announcing()
                    ready.append(a)
                    counted.append(c)
                    offered.append(o)
                    goodbye.append(g)
        f = statistics.median(floor)
        print(f"1. process start -> tool offered by an agent on the same RabbitMQ "
              f"(ttl {DEFAULT_TTL:g} s)")
        rows = [("ready:, --no-announcements (floor)", floor),
                ("ready:, announcing", ready),
                ("the agent's registry counts it", counted),
                ("the agent offers count-words", offered)]
        for name, values in rows:
            print(f"   {name:38s} {stats(values, ms)}  {statistics.median(values) / f:.2f}x")
        added = [o - a for o, a in zip(offered, ready)]
        received = [c - a for c, a in zip(counted, ready)]
        print(f"   announcing adds to start-up: {ms(statistics.median(ready) - f)}; after ready:, "
              f"the registry hears it {stats(received, ms).strip()}, the agent offers it "
              f"{stats(added, ms).strip()}")
        floor_what = "process start → ready:, --no-announcements"
        figures = [Figure(bench=BENCH, path=f"floor: {floor_what}", value=f * 1e3, unit="ms",
                          note=f"median of {rounds}")]
        for name, values in rows[1:]:
            figures.append(Figure(bench=BENCH, path=f"process start → {name}",
                                  value=statistics.median(values) * 1e3, unit="ms", floor=f * 1e3,
                                  floor_what=floor_what, note=f"median of {rounds}"))

        # 2 ---------------------------------------------------------------------------------
        print("2. removal of a stopped instance from the agent's registry")
        print(f"   {'SIGTERM (goodbye)':38s} {stats(goodbye, ms)}  "
              f"(ttl {DEFAULT_TTL:g} s: {statistics.median(goodbye) / DEFAULT_TTL:.3f} T)")
        figures.append(Figure(bench=BENCH, path="SIGTERM → gone from the agent's registry "
                              "(goodbye)", value=statistics.median(goodbye) * 1e3, unit="ms",
                              note=f"median of {rounds}; the ttl is {DEFAULT_TTL:g} s"))
        for ttl in ttls:
            gone = [await b.killed(ttl, rng) for _ in range(kills)]
            print(f"   {f'SIGKILL, ttl T = {ttl:g} s':38s} {stats(gone, secs)}  "
                  f"{statistics.median(gone) / ttl:.2f} T (expected {2 / 3:.2f} .. 1 T; "
                  f"max {max(gone) / ttl:.2f} T)")
            figures.append(Figure(bench=BENCH, path=f"SIGKILL → gone from the agent's registry, "
                                  f"ttl {ttl:g} s", value=statistics.median(gone), unit="s",
                                  floor=ttl, floor_what="the ttl", target="⅔ … 1× floor",
                                  note=f"median of {kills}; max {max(gone) / ttl:.2f} of the ttl"))

        # 3 ---------------------------------------------------------------------------------
        ttl = ttls[-1]
        sizes, intervals = await b.traffic(ttl, beats)
        size = statistics.median(sizes)
        per_second = 1 / statistics.median(intervals)
        print(f"3. announcement traffic of one instance (ttl {ttl:g} s, {len(sizes)} "
              f"announcements heard)")
        print(f"   {size:.0f} bytes per announcement (JSON body; {min(sizes)}..{max(sizes)}) x "
              f"{per_second:.2f} beats/s (interval {ms(statistics.median(intervals))}, "
              f"{ms(min(intervals))} .. {ms(max(intervals))}; nominal {ms(ttl / 3)}) "
              f"= {size * per_second:.0f} B/s per listener")
        print(f"   at the default ttl {DEFAULT_TTL:g} s (a beat every {DEFAULT_TTL / 3:g} s): "
              f"{size * 3 / DEFAULT_TTL:.0f} B/s per instance per listener; 100 instances, "
              f"10 listeners: {size * 3 / DEFAULT_TTL * 1000 / 1024:.0f} KiB/s at the broker")
        figures += [
            Figure(bench=BENCH, path="bytes per announcement (JSON body)", value=size,
                   unit="bytes", note=f"median of {len(sizes)}; a beat every ttl/3"),
            Figure(bench=BENCH, path=f"announcement traffic per instance per listener, default "
                   f"ttl {DEFAULT_TTL:g} s", value=size * 3 / DEFAULT_TTL, unit="B/s",
                   note=f"measured {per_second:.2f} beats/s at ttl {ttl:g} s "
                        f"(nominal {3 / ttl:.2f})"),
        ]
    odd = [f"{c.name}: {line}" for c in b.children for line in c.notable] + [
        f"{c.name} exited with {c.returncode}" for c in b.children
        if c.returncode not in (0, -signal.SIGKILL, None)]
    if odd:
        print("child process logs (warnings, errors, exit codes):")
        for line in odd:
            print(f"   {line}")
    else:
        print("child process logs: no warnings or errors; every process exited as told "
              "(0, or -9 after SIGKILL)")
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=None,
                        help="start-up rounds (default 7; 3 with --quick)")
    parser.add_argument("--ttl", type=float, action="append",
                        help="ttl for the SIGKILL figures; repeat for more (default 1 and 3)")
    add_arguments(parser)
    parser.add_argument("--seed", type=int, default=random.randrange(2**32),
                        help="for the kill moments")
    parser.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672/",
                        help="RabbitMQ (a private vhost is created on it with rabbitmqctl)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress, piped too
    task = asyncio.current_task()
    assert task is not None
    # SIGTERM as Ctrl-C: cancel, so every `finally` stops its processes and deletes its vhost
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    start = time.perf_counter()
    figures = await run(args)
    print(f"(total {time.perf_counter() - start:.0f} s)")
    emit(figures, args)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, or SIGTERM (see main)
        print("interrupted; child processes stopped, vhosts deleted", file=sys.stderr)
        sys.exit(130)
