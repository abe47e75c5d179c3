"""What observability costs on the hot paths, beside a floor measured in the same run.

The same workload three ways, in interleaved rounds whose order rotates, so the shared
machine's drift falls on all three alike:

* ``floor``   — metrics recording off (``metrics.set_enabled(False)``), tracing off;
* ``metrics`` — metrics on, tracing off: the default;
* ``traced``  — metrics on, and tracing on as ``OTEL_EXPORTER_OTLP_ENDPOINT`` turns it on
  (``tracing.configure``: the SDK's TracerProvider, a BatchSpanProcessor, OTLP/HTTP), exporting
  to a sink in its own process on 127.0.0.1 that decodes every export and answers 200. Each
  batch flushes its last spans inside its timing, so every span's export is paid for.
  ``--exporter drop``: the same SDK pipeline with an exporter that drops the batches.

Workloads, everything in this process on the memory bus: (a) a tool-service round trip,
ToolServiceClient → JokeService; (b) an agent dialog of two ReAct steps (call tell-joke,
answer; an instant scripted LLM); (c) a config ``get`` through the gateway over HTTP (the
aiohttp client in this process too).

Each batch is timed by the wall clock and by this process' CPU time (its threads: the event
loop and the batch processor's exporter; the sink's CPU is not counted, as a collector's
would not be). On a shared machine the neighbours' load moves both, the wall clock more.

Then the cost of each recording call alone, on and off (CPU, best of 5 rounds), and from
the registry how many of each one op makes. Their product is what metrics add at the least:
in a hot loop the caches are warm; among the workload's own code the same instructions take
longer (an instruction count under valgrind agrees with the product, the time does not).

About a minute and a half on 2 shared cores (``--quick``: 11 rounds at half the scale, about
20 s).

    python bench/telemetry.py [--rounds N] [--scale X] [--exporter otlp|drop] [--quick]
                              [--json PATH]
    OTEL_TRACES_SAMPLER=always_off python bench/telemetry.py    # spans that are not sampled
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from prometheus_client import REGISTRY
from report import Figure, add_arguments, emit

from toolmesh import RequestClient, ToolServiceClient, connect
from toolmesh.agent.service import AgentService
from toolmesh.bus.memory import new_memory_url
from toolmesh.bus.queue_id import parse_queue_id
from toolmesh.config.client import ConfigClient
from toolmesh.config.service import ConfigService
from toolmesh.config.store import open_store
from toolmesh.gateway import Gateway
from toolmesh.gateway.server import GatewayOptions
from toolmesh.llm import Rule, ScriptedLLM, TextCompletionService
from toolmesh.prompt import PromptService
from toolmesh.schema.agent import is_final
from toolmesh.telemetry import metrics, tracing
from toolmesh.tools.queues import topic_queues
from toolmesh.tools.services.joke import JokeService

BENCH = "telemetry"
MODES = ("floor", "metrics", "traced")
LABELS = {"floor": "floor: metrics off, no traces", "metrics": "metrics on (the default)",
          "traced": "metrics on + traces exported"}
LLM = ScriptedLLM(rules=[
    Rule(r"Observation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}"),
    Rule(r"Question: joke (?P<topic>\w+)",
         'Thought: a joke\nAction: tell-joke\nArgs: {"topic": "{topic}"}')])
CALL = {"user": "bench", "config": {"style": "pun"}, "arguments": {"topic": "food"}}
GET = {"operation": "get", "keys": [{"type": "tool", "key": "tell-joke"}]}
TELL_JOKE = {"type": "tool-service", "name": "tell-joke", "description": "Tell a joke",
             "service": "joke-service", "style": "pun",
             "arguments": [{"name": "topic", "type": "string", "description": "The topic"}]}
#: each recording call of toolmesh.telemetry.metrics, and the sample that counts its calls
RECORDINGS = {
    "bus_message": "toolmesh_bus_messages_total",
    "service_request": "toolmesh_service_requests_total",
    "gateway_request": "toolmesh_gateway_requests_total",
    "tool_call": "toolmesh_tool_calls_total",
    "llm_call": "toolmesh_llm_calls_total",
    "dialog_started": "toolmesh_dialogs_started_total",
    "dialog_finished": "toolmesh_dialogs_finished_total",
}

# A stand-in collector: its own process, decodes each OTLP/HTTP export, answers 200 (an empty
# ExportTraceServiceResponse); GET answers what it received. Ends when the bench closes stdin.
SINK = r'''
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

stats = {"exports": 0, "spans": 0, "bytes": 0}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        request = ExportTraceServiceRequest.FromString(body)
        spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        with lock:
            stats["exports"] += 1
            stats["spans"] += spans
            stats["bytes"] += len(body)
        self.answer(b"", "application/x-protobuf")

    def do_GET(self):
        with lock:
            body = json.dumps(stats).encode()
        self.answer(body, "application/json")

    def answer(self, body, content_type):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
'''

Op = Callable[[], Awaitable[None]]
#: per mode, (wall, CPU) seconds per op of each round
Samples = dict[str, list[tuple[float, float]]]


class Dropped(SpanExporter):
    """``--exporter drop``: the SDK's pipeline without the network."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class Tracing:
    """Turns tracing on for a batch and off after it, as a deployment turns it on."""

    def __init__(self, exporter: str, sink_url: str) -> None:
        self.exporter = exporter
        self.sink_url = sink_url

    def on(self) -> None:
        if self.exporter == "drop":
            provider = TracerProvider()
            provider.add_span_processor(BatchSpanProcessor(Dropped()))
            tracing.enable(provider)
        else:
            assert tracing.configure(service_name="toolmesh-bench")

    async def received(self) -> dict[str, int]:
        """What the sink has decoded so far."""
        if self.exporter == "drop":
            return {"spans": 0, "exports": 0, "bytes": 0}
        async with aiohttp.ClientSession() as session, session.get(self.sink_url) as r:
            return await r.json()


async def start_sink() -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SINK, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    port = int((await proc.stdout.readline()).decode())
    return proc, f"http://127.0.0.1:{port}"


async def batch(mode: str, op: Op, n: int, traces: Tracing) -> tuple[float, float]:
    """Wall and CPU seconds per op over ``n`` sequential ops in ``mode``."""
    metrics.set_enabled(mode != "floor")
    if mode == "traced":
        traces.on()
    gc.collect()  # one mode's garbage is not charged to the next
    try:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            await op()
        if mode == "traced":
            tracing.flush()  # the batch's last spans: their export is part of the cost
        return (time.perf_counter() - start) / n, (time.process_time() - cpu) / n
    finally:
        if mode == "traced":
            tracing.disable()
        metrics.set_enabled(True)


async def compare(op: Op, n: int, rounds: int, traces: Tracing) -> Samples:
    for mode in MODES:  # warm up every path (the first span imports the SDK)
        await batch(mode, op, max(n // 5, 10), traces)
    samples: Samples = {mode: [] for mode in MODES}
    for r in range(rounds):
        for mode in MODES[r % 3:] + MODES[:r % 3]:
            samples[mode].append(await batch(mode, op, n, traces))
    return samples


def recorded() -> Counter[str]:
    """How often each recording call has run in this process so far."""
    wanted = {sample: call for call, sample in RECORDINGS.items()}
    totals: Counter[str] = Counter()
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name in wanted:
                totals[wanted[sample.name]] += int(sample.value)
    return totals


async def recordings_per_op(op: Op, n: int) -> dict[str, float]:
    before = recorded()
    for _ in range(n):
        await op()
    after = recorded()
    return {call: (after[call] - before[call]) / n for call in RECORDINGS
            if after[call] > before[call]}


def per_call(fn: Callable[[], object], n: int, after: Callable[[], object] = lambda: None
             ) -> float:
    """CPU seconds per call, best of 5 rounds (the least disturbed by the shared machine);
    ``after`` ends each round, inside its timing."""
    for _ in range(n // 10):
        fn()
    after()
    best = float("inf")
    for _ in range(5):
        gc.collect()
        t = time.process_time()
        for _ in range(n):
            fn()
        after()
        best = min(best, (time.process_time() - t) / n)
    return best


def single_calls(n: int, traces: Tracing) -> dict[str, tuple[float, float]]:
    """CPU seconds of each recording call alone, metrics (or tracing) off and on."""
    queue = parse_queue_id("request:tg:joke")  # what the buses pass: a QueueId
    service_counts = metrics.ServiceCounts("joke")
    calls: dict[str, Callable[[], object]] = {
        # what a producer calls per message, and a service per request: resolved handles
        "bus_message": metrics.BusCounts(queue).published,
        "service_request": lambda: service_counts.finished(None, 0.002),
        "service_request (by name)": lambda: metrics.service_request(service="joke", outcome="ok",
                                                           seconds=0.002),
        "gateway_request": lambda: metrics.gateway_request(route="rest", service="config",
                                                           outcome="ok", seconds=0.002),
        "tool_call": lambda: metrics.tool_call(tool="tell-joke", type="tool-service",
                                               outcome="ok", seconds=0.002),
        "llm_call": lambda: metrics.llm_call(model="scripted", outcome="ok", seconds=0.002,
                                             in_tokens=160, out_tokens=12),
        "dialog_started": metrics.dialog_started,
        "dialog_finished": lambda: metrics.dialog_finished(outcome="answer", steps=2,
                                                           seconds=0.004),
    }
    costs = {}
    for name, fn in calls.items():
        metrics.set_enabled(False)
        off = per_call(fn, n)
        metrics.set_enabled(True)
        costs[name] = (off, per_call(fn, n))
    # as a service's handling opens one: a request's properties without a traceparent
    props = {"id": "4bf92f35"}
    attributes = {"messaging.destination.name": "request:tg:joke", "toolmesh.service": "Joke"}

    def span() -> None:
        with tracing.span("joke handle", kind="server", parent=props, attributes=attributes):
            pass

    off = per_call(span, n)
    traces.on()
    try:
        # 2,000 a round: all fit the batch processor's queue (2,048), so none is dropped,
        # and the round's flush (timed) exports every one
        on = per_call(span, 2000, after=tracing.flush)
    finally:
        tracing.disable()
    costs["span"] = (off, on)
    return costs


def spread(values: list[float]) -> str:
    """``median (q1–q3)``"""
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{q2:.3f}x ({q1:.3f}–{q3:.3f})"


def figures(workload: str, samples: Samples, spans: float | None, exporter: str
            ) -> list[Figure]:
    """CPU per op with metrics on, and traced, beside the floor's (medians of the rounds)."""
    floor_cpu = statistics.median(c for _, c in samples["floor"])
    out = []
    for mode, what in (("metrics", "metrics on (the default)"),
                       ("traced", "metrics on + traces exported" if exporter == "otlp"
                        else "metrics on + traces (exporter drops)")):
        pairs = list(zip(samples[mode], samples["floor"]))
        cpus = spread([c / f for (_, c), (_, f) in pairs])
        walls = spread([w / f for (w, _), (f, _) in pairs])
        note = (f"CPU of the process, medians of the rounds; each round against its floor, "
                f"median (IQR): CPU {cpus}, wall {walls}")
        if mode == "traced" and spans is not None:
            note += f"; {spans:.2f} spans an op"
        out.append(Figure(bench=BENCH, path=f"{workload}, {what}",
                          value=statistics.median(c for _, c in samples[mode]) * 1e6,
                          unit="µs", floor=floor_cpu * 1e6, floor_what="metrics off, no traces",
                          note=note))
    return out


def report(title: str, samples: Samples, counts: dict[str, float], spans: float | None,
           costs: dict[str, tuple[float, float]]) -> None:
    print(title)
    print(f"    {'':30s} {'wall µs/op':>10s} {'CPU µs/op':>10s}   {'wall ratio (IQR)':23s} "
          "CPU ratio (IQR)")
    floor_cpu = statistics.median(c for _, c in samples["floor"])
    for mode in MODES:
        wall = statistics.median(w for w, _ in samples[mode])
        cpu = statistics.median(c for _, c in samples[mode])
        line = f"    {LABELS[mode]:30s} {wall * 1e6:10.1f} {cpu * 1e6:10.1f}"
        if mode != "floor":
            pairs = list(zip(samples[mode], samples["floor"]))
            line += (f"   {spread([w / f for (w, _), (f, _) in pairs]):23s} "
                     f"{spread([c / f for (_, c), (_, f) in pairs])}")
        print(line)
    made = ", ".join(f"{n:g} {call}" for call, n in counts.items())
    predicted = sum(n * (costs[call][1] - costs[call][0]) for call, n in counts.items())
    print(f"    recording calls per op: {made}; in a hot loop they cost +{predicted * 1e6:.1f} "
          f"µs (+{predicted / floor_cpu:.1%} of the floor's CPU), a lower bound: among the "
          "workload's own code the same instructions run slower")
    if spans is not None:
        per_span = costs["span"][1] - costs["span"][0]
        print(f"    spans exported per op: {spans:.2f}; in a hot loop: +{spans * per_span * 1e6:.0f}"
              f" µs (+{spans * per_span / floor_cpu:.0%})")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds per workload (default 31; --quick 11)")
    parser.add_argument("--scale", type=float, default=None,
                        help="multiplies the ops per batch (1: a batch takes 0.05-0.2 s; "
                             "the default; --quick 0.5)")
    parser.add_argument("--exporter", choices=("otlp", "drop"), default="otlp")
    add_arguments(parser)
    args = parser.parse_args()
    args.rounds = args.rounds or (11 if args.quick else 31)
    args.scale = args.scale or (0.5 if args.quick else 1.0)
    # each batch's tracing.enable() sets the global provider again, which OTel refuses with
    # a warning; toolmesh traces with its own tracer, so the refusal changes nothing here
    logging.getLogger("opentelemetry.trace").setLevel(logging.ERROR)
    sink, sink_url = await start_sink()
    for name in ("OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_COMPRESSION",
                 "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_SERVICE_NAME"):
        os.environ.pop(name, None)
    os.environ.update({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": sink_url,
                       "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    traces = Tracing(args.exporter, sink_url)
    bus = await connect(new_memory_url())
    results = []
    found: list[Figure] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = await open_store(str(Path(tmp) / "c.db"))
            request_queue, response_queue = topic_queues("joke")
            async with AsyncExitStack() as stack:
                stack.push_async_callback(store.close)
                # nothing announces: no heartbeats on the bus between the batches
                for service in (ConfigService(bus, store), TextCompletionService(bus, LLM),
                                PromptService(bus),
                                JokeService(bus, topic="joke", announce=False)):
                    await stack.enter_async_context(service)
                agent = await stack.enter_async_context(AgentService(bus, announcements=False))
                gateway = await stack.enter_async_context(Gateway(bus, GatewayOptions(port=0)))
                config = await stack.enter_async_context(ConfigClient(bus))
                tools = await stack.enter_async_context(ToolServiceClient(
                    bus, request_queue=request_queue, response_queue=response_queue))
                dialogs = await stack.enter_async_context(RequestClient(
                    bus, request_queue="request:tg:agent:default",
                    response_queue="response:tg:agent:default", is_final=is_final))
                http = await stack.enter_async_context(aiohttp.ClientSession())
                version = await config.put({
                    ("tool-service", "joke-service"): json.dumps({
                        "id": "joke-service", "request-queue": request_queue,
                        "response-queue": response_queue,
                        "config-params": [{"name": "style", "required": False}]}),
                    ("tool", "tell-joke"): json.dumps(TELL_JOKE)})
                await agent.wait_for_config(version)

                async def round_trip() -> None:
                    await tools.call(**CALL, timeout=30)

                async def dialog() -> None:
                    messages = [m async for m in dialogs.stream({"question": "joke food"},
                                                                timeout=30)]
                    assert messages[-1]["message_type"] == "answer", messages[-1]
                    assert messages[-1]["tool_calls"] == 1, messages[-1]

                async def config_get() -> None:
                    async with http.post(gateway.url + "api/v1/config", json=GET) as r:
                        await r.read()
                        assert r.status == 200, r.status

                workloads: list[tuple[str, str, Op, int]] = [
                    ("(a) tool-service round trip, memory bus", "tool-service round trip",
                     round_trip, 300),
                    ("(b) agent dialog: 2 steps, 1 tool call, memory bus",
                     "agent dialog (2 steps, 1 tool call)", dialog, 40),
                    ("(c) gateway: config get over HTTP", "gateway config get over HTTP",
                     config_get, 80),
                ]
                for title, short, op, n in workloads:
                    n = max(int(n * args.scale), 10)
                    before = (await traces.received())["spans"]
                    samples = await compare(op, n, args.rounds, traces)
                    traced_ops = n * args.rounds + max(n // 5, 10)
                    spans = ((await traces.received())["spans"] - before) / traced_ops \
                        if args.exporter == "otlp" else None
                    counts = await recordings_per_op(op, n)
                    results.append((f"{title}: {n} ops a batch, {args.rounds} rounds",
                                    samples, counts, spans))
                    found += figures(f"{short}, memory bus, CPU per op", samples, spans,
                                     args.exporter)
            costs = single_calls(max(int(100_000 * args.scale), 1000), traces)
            received = await traces.received()
    finally:
        await bus.close()
        assert sink.stdin is not None
        sink.stdin.close()
        await sink.wait()
    exported = (f"OTLP/HTTP to a sink process on 127.0.0.1: {received['exports']} exports, "
                f"{received['spans']} spans, {received['bytes'] // max(received['exports'], 1)}"
                " bytes each" if args.exporter == "otlp" else "an exporter that drops the batches")
    # the SDK reads OTEL_TRACES_SAMPLER itself: the bench runs sampled-out spans with it too
    sampler = os.environ.get("OTEL_TRACES_SAMPLER")
    print(f"traces: the SDK's BatchSpanProcessor, {exported}"
          + (f"; sampler {sampler} {os.environ.get('OTEL_TRACES_SAMPLER_ARG', '')}".rstrip()
             if sampler else ""))
    print("per op: the median of the rounds; a ratio: each round against the floor of the "
          "same round, median (interquartile range)")
    for title, samples, counts, spans in results:
        report(title, samples, counts, spans, costs)

    def empty() -> None:
        pass

    print(f"one call alone, CPU, best of 5 rounds (for scale: an empty function call "
          f"{per_call(empty, 100_000) * 1e6:.3f} µs)")
    for name, (off, on) in costs.items():
        what = "tracing.span(...) enter + exit" if name == "span" else f"metrics.{name}(...)"
        extra = " (with its export)" if name == "span" and args.exporter == "otlp" else ""
        print(f"    {what:34s} off {off * 1e6:6.3f} µs   on {on * 1e6:7.3f} µs{extra}")
    emit(found, args)


if __name__ == "__main__":
    asyncio.run(main())
