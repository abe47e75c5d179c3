"""toolmesh across processes: every service its own ``toolmesh run PART`` process, on a real broker.

Each figure is printed beside floors measured in the same run, in alternating rounds (the
order rotates every round), as the median over rounds — the machine is small and shared, so
absolute numbers drift; the ratios are what compare across runs.

1. Tool-service round trip on RabbitMQ, the joke service in its own process and the client
   here: µs per call (sequential) and calls/s with 64 in flight; floors: (a) service and client
   in this process on the same broker, (b) the in-process memory bus.
2. One agent dialog on RabbitMQ with config, prompt, text-completion (a scripted, instant LLM),
   agent and joke each its own process: ms per dialog, sequential. A dialog is one ReAct step
   that calls the tell-joke tool and one that gives the final answer: 2 LLM completions
   (agent -> prompt -> text-completion, each), 1 tool-service call, and the agent's request
   with its streamed messages. Floors: the same dialog with every service in this process on
   RabbitMQ, and on the memory bus (as bench/agent_step.py).
3. Tool-service round trip on pulsar-lite (a Pulsar-protocol broker started here) across
   processes; floors: in this process on pulsar-lite, and the memory bus.
4. Scaling: calls/s of one tool service (``bench.services:Latency``, 10 ms of waiting per call,
   ``--concurrency 1`` per replica) as its replicas (same ``--id``) go 1 -> 2 -> 4, on RabbitMQ
   and on pulsar-lite; speed-up against 1 replica and the ideal.

Private RabbitMQ vhosts are created with rabbitmqctl and deleted at the end (also on failure or
Ctrl-C); every child process is stopped with SIGTERM.

    python bench/distributed.py [--calls N] [--quick] [--skip-rabbitmq] [--skip-pulsar]
                                [--amqp URL] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from report import Figure, add_arguments, emit  # noqa: E402

from bench.processes import Child, Children, PulsarLite, rabbit_vhost  # noqa: E402
from bench.services import LATENCY  # noqa: E402
from toolmesh import RequestClient, ToolServiceClient, connect  # noqa: E402
from toolmesh.agent.service import AgentService  # noqa: E402
from toolmesh.bus.base import Bus  # noqa: E402
from toolmesh.bus.memory import new_memory_url  # noqa: E402
from toolmesh.config.client import ConfigClient  # noqa: E402
from toolmesh.config.service import ConfigService  # noqa: E402
from toolmesh.config.store import open_store  # noqa: E402
from toolmesh.llm import ScriptedLLM, TextCompletionService  # noqa: E402
from toolmesh.prompt import PromptService  # noqa: E402
from toolmesh.schema.agent import is_final  # noqa: E402
from toolmesh.tools.queues import topic_queues  # noqa: E402
from toolmesh.tools.services.joke import JokeService  # noqa: E402

CALL = {"user": "bench", "config": {"style": "pun"}, "arguments": {"topic": "food"}}
IN_FLIGHT = 64
#: calls in flight while measuring scaling: well above 4 replicas x --concurrency 1
SCALE_IN_FLIGHT = 32
REPLICAS = (1, 2, 4)
#: the instant LLM: call tell-joke for "joke TOPIC", then answer with the observation
SCRIPT = {"rules": [
    {"match": r"Observation: (?P<obs>.*?)\n\nYour reply",
     "response": "Thought: done\nFinal Answer: {obs}"},
    {"match": r"Question: joke (?P<topic>\w+)",
     "response": 'Thought: a joke\nAction: tell-joke\nArgs: {"topic": "{topic}"}'}]}
JOKE_ITEMS = {("tool-service", "joke-service"): ROOT / "examples/joke/joke-service.json",
              ("tool", "tell-joke"): ROOT / "examples/joke/tell-joke.json"}

Call = Callable[[], Awaitable[Any]]
BENCH = "distributed"
#: what the run measured, for bench/all.py's table
FIGURES: list[Figure] = []


@dataclass(frozen=True)
class Settings:
    calls: int        # sequential tool calls per configuration (4x that with 64 in flight)
    rounds: int       # alternating rounds; figures are medians over them
    dialogs: int      # sequential agent dialogs per stack
    scale_calls: int  # calls per replica per scaling round

    @property
    def per_round(self) -> int:
        return max(self.calls // self.rounds, 20)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


# --- measuring ------------------------------------------------------------------------------

async def sequential(call: Call, n: int) -> float:
    """Seconds per call, one at a time."""
    start = time.perf_counter()
    for _ in range(n):
        await call()
    return (time.perf_counter() - start) / n


async def in_flight(call: Call, n: int, width: int) -> float:
    """Calls per second with ``width`` calls in flight (``width`` workers, ``n`` calls)."""
    left = n

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await call()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(width)))
    return n / (time.perf_counter() - start)


async def alternate(configs: dict[str, Call], rounds: int,
                    measure: Callable[[str, Call], Awaitable[float]]) -> dict[str, float]:
    """``measure`` each configuration once per round, rotating the order; medians."""
    samples: dict[str, list[float]] = {name: [] for name in configs}
    names = list(configs)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            samples[name].append(await measure(name, configs[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


def tool_call(client: ToolServiceClient) -> Call:
    async def call() -> str:
        return await client.call(**CALL, timeout=60)
    return call


async def tool_round_trips(title: str, configs: dict[str, Call], s: Settings
                           ) -> tuple[dict[str, float], dict[str, float]]:
    """Part 1 and 3: the first configuration against the others (the floors)."""
    for call in configs.values():  # warm up: connections, producers, caches
        await sequential(call, min(100, s.per_round))
        await in_flight(call, 4 * IN_FLIGHT, IN_FLIGHT)
    n = s.per_round
    cpu: dict[str, list[float]] = {name: [] for name in configs}

    async def throughput(name: str, call: Call) -> float:
        cpu_start = time.process_time()
        rate = await in_flight(call, 4 * n, IN_FLIGHT)
        cpu[name].append((time.process_time() - cpu_start) / (4 * n))
        return rate

    seq = await alternate(configs, s.rounds, lambda _, c: sequential(c, n))
    thr = await alternate(configs, s.rounds, throughput)
    main, *floors = configs
    print(title)
    print(f"   {'':34s} {'sequential':>12s} {f'{IN_FLIGHT} in flight':>14s} "
          f"{'CPU here/call':>14s}")
    for name in configs:
        print(f"   {name:34s} {fmt_us(seq[name]):>12s} {thr[name]:>12.0f}/s "
              f"{fmt_us(statistics.median(cpu[name])):>14s}")
    for floor in floors:
        print(f"   {main} vs {floor}: {seq[main] / seq[floor]:.2f}x the time per call, "
              f"{thr[main] / thr[floor]:.2f}x the calls/s")
    print(f"   (CPU here/call: this process's CPU time per call with {IN_FLIGHT} in flight — "
          f"the client alone\n    for '{main}', client and service for the others)")
    return seq, thr


# --- part 1 and 3: tool-service round trip ---------------------------------------------------

async def part_tools(title: str, broker: str, proc_url: str, bus: Bus, memory: Bus,
                     s: Settings) -> float:
    """The joke service in its own process vs in this process vs the memory bus; returns the
    cross-process sequential time per call."""
    async with Children() as children, AsyncExitStack() as stack:
        topic = unique("bench-joke")
        await children.start(Child(f"{broker} joke", [
            "run", "joke", "--bus", proc_url, "--topic", topic, "--id", f"{topic}-service"]))
        local_topic, memory_topic = unique("bench-joke-local"), unique("bench-joke-memory")
        await stack.enter_async_context(JokeService(bus, topic=local_topic, concurrency=IN_FLIGHT))
        await stack.enter_async_context(JokeService(memory, topic=memory_topic,
                                                    concurrency=IN_FLIGHT))

        async def client(b: Bus, t: str) -> Call:
            request_queue, response_queue = topic_queues(t)
            return tool_call(await stack.enter_async_context(ToolServiceClient(
                b, request_queue=request_queue, response_queue=response_queue)))

        configs = {f"service process, {broker}": await client(bus, topic),
                   f"one process, {broker}": await client(bus, local_topic),
                   "one process, memory bus": await client(memory, memory_topic)}
        answer = await configs[f"service process, {broker}"]()
        assert "Here's a pun" in answer, answer
        seq, thr = await tool_round_trips(title, configs, s)
    report_logs(children)
    main, local, memory_bus = configs
    rounds = f"median of {s.rounds} alternating rounds"
    FIGURES.extend([
        Figure(bench=BENCH, path=f"tool-service round trip, {broker}, service in its own "
               "process, sequential", value=seq[main] * 1e6, unit="µs",
               floor=seq[local] * 1e6, floor_what=f"both in one process, {broker}",
               note=f"{rounds}; memory bus {seq[memory_bus] * 1e6:.0f} µs"),
        Figure(bench=BENCH, path=f"tool-service calls/s, {broker}, service in its own process, "
               f"{IN_FLIGHT} in flight", value=thr[main], unit="calls/s", floor=thr[local],
               floor_what=f"both in one process, {broker}", better="higher",
               note=f"{rounds}; memory bus {thr[memory_bus]:,.0f} calls/s"),
    ])
    return seq[main]


# --- part 2: agent dialog --------------------------------------------------------------------

def joke_items() -> dict[tuple[str, str], str]:
    return {key: path.read_text() for key, path in JOKE_ITEMS.items()}


def dialog_call(client: RequestClient) -> Call:
    async def dialog() -> None:
        messages = [m async for m in client.stream(
            {"question": "joke food", "streaming": False}, timeout=60)]
        last = messages[-1]
        assert last.get("message_type") == "answer" and "Here's a pun" in last.get("answer", ""), \
            last
    return dialog


def agent_client(bus: Bus) -> RequestClient:
    return RequestClient(bus, request_queue="request:tg:agent:default",
                         response_queue="response:tg:agent:default", is_final=is_final)


async def local_stack(stack: AsyncExitStack, bus: Bus, tmp: Path, script: Path) -> Call:
    """Every service of the dialog in this process on ``bus`` (default queues)."""
    store = await open_store(f"sqlite://{tmp / unique('config')}.db")
    stack.push_async_callback(store.close)
    agent = AgentService(bus)
    llm = ScriptedLLM.from_file(script)
    for part in (ConfigService(bus, store), TextCompletionService(bus, llm), PromptService(bus),
                 JokeService(bus, topic="joke", id="joke-service"), agent):
        await stack.enter_async_context(part)
    config = await stack.enter_async_context(ConfigClient(bus))
    version = await config.put(joke_items())
    async with asyncio.timeout(10):
        await agent.wait_for_config(version)
    return dialog_call(await stack.enter_async_context(agent_client(bus)))


async def part_agent(amqp: str, memory: Bus, tmp: Path, s: Settings,
                     tool_round_trip: float | None) -> None:
    script = tmp / "llm.json"
    script.write_text(json.dumps(SCRIPT))
    async with rabbit_vhost(amqp, unique("toolmesh-bench-stack")) as stack_url, \
            rabbit_vhost(amqp, unique("toolmesh-bench-local")) as local_url, \
            Children() as children, AsyncExitStack() as stack:
        store = tmp / f"{unique('stack-config')}.db"
        await children.start(Child("config", [
            "run", "config", "--bus", stack_url, "--config-store", f"sqlite://{store}"]))
        stack_bus = await connect(stack_url)
        stack.push_async_callback(stack_bus.close)
        # The tools are in the store before the agent starts, so it loads them at start.
        config_client = await stack.enter_async_context(ConfigClient(stack_bus))
        await config_client.put(joke_items())
        await children.start(
            Child("prompt", ["run", "prompt", "--bus", stack_url]),
            Child("text-completion", ["run", "text-completion", "--bus", stack_url,
                                      "--llm", f"scripted:{script}"]),
            Child("joke", ["run", "joke", "--bus", stack_url]),
            Child("agent", ["run", "agent", "--bus", stack_url]))
        local_bus = await connect(local_url)
        stack.push_async_callback(local_bus.close)
        local_rabbit = await local_stack(stack, local_bus, tmp, script)
        local_memory = await local_stack(stack, memory, tmp, script)
        processes = dialog_call(await stack.enter_async_context(agent_client(stack_bus)))
        configs = {"5 processes, RabbitMQ": processes, "one process, RabbitMQ": local_rabbit,
                   "one process, memory bus": local_memory}
        for call in configs.values():
            await sequential(call, max(s.dialogs // 10, 5))
        n = max(s.dialogs // s.rounds, 5)
        per = await alternate(configs, s.rounds, lambda _, c: sequential(c, n))
    print("2. agent dialog, sequential, non-streaming (1 tool-using ReAct step + the final answer:"
          "\n   2 LLM completions via prompt -> text-completion, 1 tool-service call)")
    for name, seconds in per.items():
        print(f"   {name:34s} {fmt_ms(seconds):>10s} per dialog")
    main = "5 processes, RabbitMQ"
    for floor in ("one process, RabbitMQ", "one process, memory bus"):
        print(f"   {main} vs {floor}: {per[main] / per[floor]:.2f}x")
    FIGURES.append(Figure(
        bench=BENCH, path="agent dialog (2 completions, 1 tool call), config/prompt/"
        "text-completion/agent/joke as 5 processes, RabbitMQ", value=per[main] * 1e3, unit="ms",
        floor=per["one process, RabbitMQ"] * 1e3, floor_what="all in one process, RabbitMQ",
        note=f"sequential; median of {s.rounds} alternating rounds; memory bus "
             f"{per['one process, memory bus'] * 1e3:.2f} ms"))
    if tool_round_trip:
        print(f"   = {per[main] / tool_round_trip:.1f} cross-process tool-service round trips "
              f"({fmt_us(tool_round_trip)} each, part 1)")
    report_logs(children)


# --- part 4: scaling -------------------------------------------------------------------------

def counting_call(client: ToolServiceClient, pids: collections.Counter[str]) -> Call:
    """A Latency call that counts which replica (pid) answered."""
    async def call() -> None:
        answer = await client.call(**CALL, timeout=60)
        pids[answer.rpartition("pid ")[2].rstrip(")")] += 1
    return call

async def part_scaling(broker: str, url_for: Callable[[int], str], bus: Bus, s: Settings) -> None:
    """Groups of 1, 2 and 4 Latency replicas (each group its own topic, all running at once so
    the rounds can alternate between them)."""
    async with Children() as children, AsyncExitStack() as stack:
        groups: dict[int, tuple[str, list[Child]]] = {}
        index = 0
        for n in REPLICAS:
            topic = unique(f"bench-scale{n}")
            replicas = []
            for i in range(n):
                index += 1
                replicas.append(Child(f"{broker} latency x{n} #{i + 1}", [
                    "run", "bench.services:Latency", "--bus", url_for(index), "--topic", topic,
                    "--id", f"{topic}-service", "--concurrency", "1"]))
            groups[n] = (topic, replicas)
        await children.start(*(c for _, replicas in groups.values() for c in replicas))
        pids: dict[int, collections.Counter[str]] = {n: collections.Counter() for n in REPLICAS}
        configs: dict[str, Call] = {}
        for n, (topic, _) in groups.items():
            request_queue, response_queue = topic_queues(topic)
            client = await stack.enter_async_context(ToolServiceClient(
                bus, request_queue=request_queue, response_queue=response_queue))
            configs[str(n)] = counting_call(client, pids[n])
        for n in REPLICAS:  # warm up every replica's connection
            await in_flight(configs[str(n)], 4 * n, SCALE_IN_FLIGHT)
        for counter in pids.values():
            counter.clear()

        async def measure(name: str, call: Call) -> float:
            return await in_flight(call, s.scale_calls * int(name), SCALE_IN_FLIGHT)

        rate = await alternate(configs, s.rounds, measure)
    cap = 1 / LATENCY
    print(f"4. scaling on {broker}: bench.services:Latency ({LATENCY * 1e3:g} ms per call, "
          f"--concurrency 1 per replica), {SCALE_IN_FLIGHT} calls in flight")
    print(f"   {'replicas':>8s} {'calls/s':>9s} {'speed-up':>9s} {'ideal':>6s} "
          f"{'of ideal':>9s}  work split (calls per replica)")
    one = rate["1"]
    for n in REPLICAS:
        split = "/".join(str(v) for v in sorted(pids[n].values(), reverse=True))
        print(f"   {n:>8d} {rate[str(n)]:>9.0f} {rate[str(n)] / one:>8.2f}x {n:>5d}x "
              f"{rate[str(n)] / (n * cap):>8.0%}  {split}")
    print(f"   (ideal: {cap:.0f} calls/s per replica = 1 / {LATENCY * 1e3:g} ms; \"of ideal\" is "
          f"calls/s over replicas x {cap:.0f})")
    what = f"a service waiting {LATENCY * 1e3:g} ms a call, --concurrency 1"
    FIGURES.append(Figure(
        bench=BENCH, path=f"scaling on {broker}: 1 replica, calls/s", value=one,
        unit="calls/s", floor=cap, floor_what=f"the ideal, 1 / {LATENCY * 1e3:g} ms",
        better="higher", note=f"{what}; {SCALE_IN_FLIGHT} in flight"))
    for n in REPLICAS[1:]:
        split = "/".join(str(v) for v in sorted(pids[n].values(), reverse=True))
        FIGURES.append(Figure(
            bench=BENCH, path=f"scaling on {broker}: {n} replicas (same --id), calls/s",
            value=rate[str(n)], unit="calls/s", floor=one, floor_what="1 replica",
            better="higher", target=f"≈ {n}× floor", note=f"{what}; work split {split}"))
    report_logs(children)


# --- reporting, main -------------------------------------------------------------------------

ODD: list[str] = []


def report_logs(children: Children) -> None:
    """Remember warnings/errors in the children's output and non-zero exit codes."""
    for child in children.all:
        for line in child.notable:
            ODD.append(f"{child.name} (pid {child.pid}): {line}")
        if child.returncode not in (0, None):
            ODD.append(f"{child.name} (pid {child.pid}) exited with {child.returncode}; "
                       "its last output:")
            ODD.extend(f"      {line}" for line in list(child.tail)[-12:])


async def run(args: argparse.Namespace) -> list[Figure]:
    s = (Settings(calls=args.calls or 200, rounds=3, dialogs=30, scale_calls=15) if args.quick
         else Settings(calls=args.calls or 2000, rounds=5, dialogs=250, scale_calls=60))
    print(f"toolmesh distributed benchmark: {s.per_round} sequential calls x {s.rounds} rounds "
          f"per configuration, medians; {'quick' if args.quick else 'full'} run")
    async with AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="toolmesh-bench-")))
        memory = await connect(new_memory_url())
        stack.push_async_callback(memory.close)
        rabbit = pulsar = None
        pulsar_broker: PulsarLite | None = None
        if not args.skip_rabbitmq:
            rabbit_url = await stack.enter_async_context(
                rabbit_vhost(args.amqp, unique("toolmesh-bench-tools")))
            rabbit = await connect(rabbit_url)
            stack.push_async_callback(rabbit.close)
        if not args.skip_pulsar:
            pulsar_broker = PulsarLite(tmp / "pulsar")
            stack.callback(pulsar_broker.stop)
            pulsar_broker.start()  # not in a thread: a cancellation must not orphan it
            pulsar = await connect(pulsar_broker.url)  # this process: consumer_id_offset 0
            stack.push_async_callback(pulsar.close)

        def pulsar_url(index: int) -> str:
            """Every process its own range of consumer ids (the pulsar-lite quirk)."""
            assert pulsar_broker is not None
            return f"{pulsar_broker.url}?consumer_id_offset={64 * index}"

        round_trip = None
        if rabbit is not None:
            round_trip = await part_tools(
                "1. tool-service round trip (joke), RabbitMQ", "RabbitMQ", rabbit_url, rabbit,
                memory, s)
            await part_agent(args.amqp, memory, tmp, s, round_trip)
        if pulsar is not None:
            await part_tools("3. tool-service round trip (joke), pulsar-lite", "pulsar-lite",
                             pulsar_url(1), pulsar, memory, s)
        if rabbit is not None:
            await part_scaling("RabbitMQ", lambda _: rabbit_url, rabbit, s)
        if pulsar is not None:
            await part_scaling("pulsar-lite", lambda i: pulsar_url(i + 1), pulsar, s)
    if ODD:
        print("child process logs (warnings, errors, exit codes):")
        for line in ODD:
            print(f"   {line}")
    else:
        print("child process logs: no warnings or errors; every process exited cleanly (0)")
    return FIGURES


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=None,
                        help="sequential tool calls per configuration, over all rounds "
                             "(default 2000; 200 with --quick)")
    add_arguments(parser)
    parser.add_argument("--skip-rabbitmq", action="store_true")
    parser.add_argument("--skip-pulsar", action="store_true")
    parser.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672/",
                        help="RabbitMQ (private vhosts are created on it with rabbitmqctl)")
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
