"""Every Prometheus metric toolmesh exports, and the calls that record them.

One module holds them all, so the names, labels and buckets are read in one place
(docs/observability.md lists them with the queries worth knowing). They live in
``prometheus_client``'s default registry, beside its process metrics (CPU, memory, open
files), and are served by :mod:`toolmesh.telemetry.exposition`.

Labels never carry what a caller chose freely: no user ids, no question text, no workspace
names, no name the LLM made up. Tool, queue, service and model names come from config and the
deployment (a flow shows inside its services' queue names, and only once config defines it:
the gateway refuses unknown flows before the bus), and pass through
:class:`~toolmesh.telemetry.labels.BoundedValues` anyway; outcomes are ``ok`` or an error
type (also bounded: a tool service may invent its own).

Recording is cheap (a cached child and an increment) so it is always on; tests and the
benchmarks call :func:`set_enabled` to compare with it off. The counts taken on every bus
message and every request a service handles are cheaper still: plain numbers under one lock
(:class:`Counts`, :class:`Latencies`), turned into metric families only when scraped — a
``prometheus_client`` child's ``inc()`` or ``observe()`` cost more than the rest of an
in-process round trip's bookkeeping.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import (
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from toolmesh.telemetry.labels import BoundedValues

# a `_created` timestamp beside every counter doubles the scrape and no query here needs it
disable_created_metrics()

#: seconds: from a fast in-process call to a long LLM answer or tool run
LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
           30.0, 60.0, 120.0, 300.0)
#: steps (LLM turns) per dialog; the agent's default limit is 10
STEPS = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50)
#: seconds a person takes to answer: a quick click to well past the default expiry (300 s)
DECISION = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
#: the values of the approval metrics' labels (anything else is counted as ``other``)
APPROVAL_KINDS = frozenset({"approval", "elicitation"})
APPROVAL_FACES = frozenset({"workbench", "cli", "websocket", "rest", "mcp", "bus", "none"})


class Tally:
    """One label set's count in a :class:`Counts` family, taken with no lookup and no lock:
    for the counts taken on every message, resolved once by whoever counts them (a
    producer, a subscription, a service) and then counted by the event loop's thread.

    ``count`` is an increment of a plain int, which CPython does not switch threads in the
    middle of: threads counting the same tally at once lose no count.
    """

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def count(self) -> None:
        """Count one (unless recording is off: :func:`set_enabled`)."""
        if _enabled:
            self.n += 1


class Counts(Collector):
    """A counter family kept as plain numbers by label values, read when scraped.

    For the counts taken on every message: a :class:`Tally` per label set, where a
    ``prometheus_client`` child costs a few method calls and a lock of its own. It is
    registered (in ``registry``, the default one unless told) when made, and scrapes as a
    ``Counter`` of the same name and labels would (``NAME_total``)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], *,
                 registry: CollectorRegistry = REGISTRY) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._tallies: dict[tuple[str, ...], Tally] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def tally(self, labels: tuple[str, ...]) -> Tally:
        """The tally of ``labels`` (the same one every time it is asked for)."""
        tally = self._tallies.get(labels)
        if tally is None:
            with self._lock:
                tally = self._tallies.setdefault(labels, Tally())
        return tally

    def inc(self, labels: tuple[str, ...], amount: float = 1) -> None:
        tally = self.tally(labels)
        with self._lock:
            tally.n += amount

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        with self._lock:
            # a tally made but not yet counted is a series that has not happened yet
            rows = [(labels, tally.n) for labels, tally in self._tallies.items() if tally.n]
        for labels, value in rows:
            family.add_metric(labels, value)
        yield family


class LatencyRow:
    """One label set's histogram in a :class:`Latencies` family: observations per bucket
    and their sum, observed with no lookup and no lock (as a :class:`Tally` is counted)."""

    __slots__ = ("_bounds", "buckets", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        #: observations per bucket; the last one: above every bound
        self.buckets = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Record one observation."""
        # the first bound not below the value: a bucket counts values <= its bound ("le")
        self.buckets[bisect.bisect_left(self._bounds, value)] += 1
        self.sum += value


class Latencies(Collector):
    """A histogram family kept as plain numbers by label values, read when scraped (see
    :class:`Counts`); it scrapes as a ``Histogram`` with the same ``buckets`` would."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str],
                 buckets: Sequence[float], *, registry: CollectorRegistry = REGISTRY) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._bounds = tuple(sorted(buckets))
        self._rows: dict[tuple[str, ...], LatencyRow] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def row(self, labels: tuple[str, ...]) -> LatencyRow:
        """The histogram of ``labels`` (the same one every time it is asked for)."""
        row = self._rows.get(labels)
        if row is None:
            with self._lock:
                row = self._rows.setdefault(labels, LatencyRow(self._bounds))
        return row

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        self.row(labels).observe(value)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        with self._lock:
            rows = [(labels, list(row.buckets), row.sum) for labels, row in self._rows.items()]
        bounds = [floatToGoString(b) for b in (*self._bounds, math.inf)]
        for labels, buckets, total in rows:
            cumulative = itertools.accumulate(buckets)
            family.add_metric(labels, list(zip(bounds, cumulative, strict=True)),
                              sum_value=total)
        yield family


gateway_requests = Counter(
    "toolmesh_gateway_requests", "Requests the gateway answered, by route (rest or socket), "
    "service and outcome (ok or the error type)", ["route", "service", "outcome"])
gateway_seconds = Histogram(
    "toolmesh_gateway_request_duration_seconds", "Time from a request's arrival at the "
    "gateway to its final answer", ["route", "service"], buckets=LATENCY)
service_requests = Counts(
    "toolmesh_service_requests", "Requests a service handled from the bus, by service "
    "(its request queue's topic) and outcome", ["service", "outcome"])
service_seconds = Latencies(
    "toolmesh_service_request_duration_seconds", "Time a service spent on one request",
    ["service"], buckets=LATENCY)
tool_calls = Counter(
    "toolmesh_tool_calls", "Tool calls the agent made, by tool, tool type and outcome "
    "(ok, error, timeout, invalid-arguments, unknown-tool)", ["tool", "type", "outcome"])
tool_seconds = Histogram(
    "toolmesh_tool_call_duration_seconds", "Time one tool call took, seen from the agent",
    ["tool", "type"], buckets=LATENCY)
llm_calls = Counter(
    "toolmesh_llm_calls", "Completions the text-completion service asked of its LLM, by "
    "model and outcome", ["model", "outcome"])
llm_seconds = Histogram(
    "toolmesh_llm_call_duration_seconds", "Time one completion took (a stream: to its last "
    "piece)", ["model"], buckets=LATENCY)
llm_tokens = Counter(
    "toolmesh_llm_tokens", "Tokens the LLM reported, by model and direction (in: prompt, "
    "out: completion)", ["model", "direction"])
dialogs_started = Counter("toolmesh_dialogs_started", "Agent dialogs started")
dialogs_finished = Counter(
    "toolmesh_dialogs_finished", "Agent dialogs ended, by outcome (answer, or the error "
    "type that ended it)", ["outcome"])
dialogs_active = Gauge("toolmesh_dialogs_in_progress", "Agent dialogs running now")
dialog_steps = Histogram("toolmesh_dialog_steps", "LLM turns per finished dialog",
                         buckets=STEPS)
dialog_seconds = Histogram("toolmesh_dialog_duration_seconds", "Time one dialog took",
                           buckets=LATENCY)
bus_messages = Counts(
    "toolmesh_bus_messages", "Messages this process put on or took off the bus, by queue "
    "and event (published, consumed, redelivered: consumed again after a failure or a "
    "lost consumer, requeued: handed back by a handler, dropped: a handler failed on it)",
    ["queue", "event"])
approvals_waiting = Gauge(
    "toolmesh_approvals_waiting", "Calls of this process waiting for a person, by kind "
    "(approval; elicitation: an MCP server's question)", ["kind"])
approval_decisions = Counter(
    "toolmesh_approval_decisions", "Answers to calls that waited for a person, by kind, "
    "decision (approve, deny, expired; accept, decline, cancel) and face (workbench, cli, "
    "websocket, rest, mcp, bus; none: expired)", ["kind", "decision", "face"])
approval_seconds = Histogram(
    "toolmesh_approval_decision_seconds", "Time from a call's request for a person to its "
    "answer", ["kind", "decision"], buckets=DECISION)
config_version = Gauge("toolmesh_config_version", "The newest config version this process "
                                                 "has seen")

_enabled = True
#: the newest config version seen (the gauge has no public getter)
_newest_config = -1
_tools = BoundedValues(500)
_queues = BoundedValues(500)
_services = BoundedValues(200)
_models = BoundedValues(50)
_outcomes = BoundedValues(64)
_children: dict[tuple[Any, ...], Any] = {}


def set_enabled(enabled: bool) -> None:
    """Record (the default) or not: for benchmarks that measure what recording costs."""
    global _enabled
    _enabled = enabled


def enabled() -> bool:
    """Whether metrics are being recorded."""
    return _enabled


def _child(metric: Any, *values: str) -> Any:
    # labels() validates and locks on every call; the children are few and live forever
    key = (metric, *values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    return child


def outcome_of(error_type: str | None) -> str:
    """The outcome label of a call that ended with ``error_type`` (``None``: ``ok``)."""
    return "ok" if error_type is None else _outcomes(error_type)


def gateway_request(*, route: str, service: str, outcome: str, seconds: float) -> None:
    """One request the gateway finished (``service``: one of its endpoints' names)."""
    if _enabled:
        _child(gateway_requests, route, service, _outcomes(outcome)).inc()
        _child(gateway_seconds, route, service).observe(seconds)


class ServiceCounts:
    """One service's requests (:data:`service_requests`, :data:`service_seconds`), its
    labels resolved once: a service makes one and counts every request it finishes."""

    __slots__ = ("_ok", "_seconds", "_service")

    def __init__(self, service: str) -> None:
        self._service = _services(service)
        self._ok = service_requests.tally((self._service, "ok"))
        self._seconds = service_seconds.row((self._service,))

    def finished(self, outcome: str | None, seconds: float) -> None:
        """One request finished: ``outcome`` ``None`` (ok) or the error type it answered."""
        if _enabled:
            tally = self._ok if outcome is None else \
                service_requests.tally((self._service, _outcomes(outcome)))
            tally.n += 1
            self._seconds.observe(seconds)


def service_request(*, service: str, outcome: str, seconds: float) -> None:
    """One request a bus service finished (a service counts through its own
    :class:`ServiceCounts` instead)."""
    ServiceCounts(service).finished(None if outcome == "ok" else outcome, seconds)


def tool_call(*, tool: str, type: str, outcome: str, seconds: float | None) -> None:
    """One tool call the agent made (``seconds`` ``None``: it never started, e.g. its
    arguments were refused)."""
    if _enabled:
        tool, type = _tools(tool), _tools(type)
        _child(tool_calls, tool, type, _outcomes(outcome)).inc()
        if seconds is not None:
            _child(tool_seconds, tool, type).observe(seconds)


def llm_call(*, model: str | None, outcome: str, seconds: float,
             in_tokens: int | None = None, out_tokens: int | None = None) -> None:
    """One completion asked of an LLM, and the tokens it reported."""
    if _enabled:
        model = _models(model or "unknown")
        _child(llm_calls, model, _outcomes(outcome)).inc()
        _child(llm_seconds, model).observe(seconds)
        if in_tokens:
            _child(llm_tokens, model, "in").inc(in_tokens)
        if out_tokens:
            _child(llm_tokens, model, "out").inc(out_tokens)


def dialog_started() -> None:
    """An agent dialog began."""
    if _enabled:
        dialogs_started.inc()
        dialogs_active.inc()


def dialog_finished(*, outcome: str, steps: int, seconds: float) -> None:
    """An agent dialog ended (``outcome``: ``answer`` or the error type that ended it)."""
    if _enabled:
        dialogs_active.dec()
        _child(dialogs_finished, _outcomes(outcome)).inc()
        dialog_steps.observe(steps)
        dialog_seconds.observe(seconds)


def _one_of(value: str, allowed: frozenset[str]) -> str:
    return value if value in allowed else "other"


def approval_waiting(*, kind: str, change: int) -> None:
    """A call of this process began (``change`` 1) or stopped (-1) waiting for a person."""
    if _enabled:
        _child(approvals_waiting, _one_of(kind, APPROVAL_KINDS)).inc(change)


def approval_decided(*, kind: str, decision: str, face: str, seconds: float | None) -> None:
    """A call that waited for a person was answered (``face``: through which face; ``none``
    for an expiry), ``seconds`` after it was asked (``None``: not known)."""
    if _enabled:
        kind = _one_of(kind, APPROVAL_KINDS)
        decision = _outcomes(decision)
        _child(approval_decisions, kind, decision, _one_of(face, APPROVAL_FACES)).inc()
        if seconds is not None:
            _child(approval_seconds, kind, decision).observe(max(seconds, 0.0))


class BusCounts:
    """The counts of one queue's messages (:data:`bus_messages`), one :meth:`Tally.count`
    per event, resolved once by the producer or subscription that counts them."""

    __slots__ = ("consumed", "dropped", "published", "queue", "redelivered", "requeued")

    def __init__(self, queue: object) -> None:
        self.queue = queue
        label = _queues(str(queue))
        self.published: Callable[[], None] = bus_messages.tally((label, "published")).count
        self.consumed: Callable[[], None] = bus_messages.tally((label, "consumed")).count
        #: consumed again, after a failure or a lost consumer
        self.redelivered: Callable[[], None] = bus_messages.tally((label, "redelivered")).count
        self.requeued: Callable[[], None] = bus_messages.tally((label, "requeued")).count
        self.dropped: Callable[[], None] = bus_messages.tally((label, "dropped")).count


def bus_message(queue: object, event: str) -> None:
    """One message event on ``queue`` (see :data:`bus_messages` for the events; the buses
    count through a :class:`BusCounts` instead)."""
    if _enabled:
        bus_messages.tally((_queues(str(queue)), event)).n += 1


def saw_config_version(version: int) -> None:
    """A config version this process saw (the gauge keeps the newest)."""
    global _newest_config
    if _enabled and version > _newest_config:
        _newest_config = version
        config_version.set(version)


class InstancesCollector(Collector):
    """``toolmesh_tool_service_instances``: the live instances of each announced tool
    service, read at scrape time from every live registry of the process (the agent's and
    the gateway's see the same instances: they are counted once)."""

    def __init__(self) -> None:
        self._sources: dict[int, Callable[[], Iterable[tuple[str, str]]]] = {}

    def add(self, source: Callable[[], Iterable[tuple[str, str]]]) -> Callable[[], None]:
        """Count the ``(service id, instance id)`` pairs ``source`` yields; returns the call
        that stops counting them."""
        key = id(source)
        self._sources[key] = source

        def remove() -> None:
            self._sources.pop(key, None)

        return remove

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "toolmesh_tool_service_instances", "Live instances of each self-announcing tool "
            "service (announced, not yet expired or gone)", labels=["service"])
        instances: dict[str, set[str]] = {}
        for source in list(self._sources.values()):
            for service, instance in source():
                instances.setdefault(_services(service), set()).add(instance)
        for service, ids in sorted(instances.items()):
            family.add_metric([service], len(ids))
        yield family


tool_service_instances = InstancesCollector()
REGISTRY.register(tool_service_instances)
