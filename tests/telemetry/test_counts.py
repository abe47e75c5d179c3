"""The counts taken per message and per request are plain numbers, read when scraped: they
must scrape exactly as the ``prometheus_client`` Counter and Histogram they stand for."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from toolmesh.telemetry.metrics import LATENCY, Counts, Latencies


def test_counts_scrape_as_a_counter_would() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    counts = Counts("t_messages", "Messages.", ["queue", "event"], registry=ours)
    counter = Counter("t_messages", "Messages.", ["queue", "event"], registry=theirs)
    for labels, times in [(("q1", "published"), 3), (("q1", "consumed"), 2), (("q2", "x"), 1)]:
        for _ in range(times):
            counts.inc(labels)
            counter.labels(*labels).inc()
    assert generate_latest(ours) == generate_latest(theirs)


def test_latencies_scrape_as_a_histogram_would() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    latencies = Latencies("t_seconds", "Time.", ["service"], buckets=LATENCY, registry=ours)
    histogram = Histogram("t_seconds", "Time.", ["service"], buckets=LATENCY, registry=theirs)
    # on a bound, between bounds, below the first, above the last
    for service, value in [("a", 0.001), ("a", 0.0011), ("a", 0.0), ("b", 400.0), ("b", 2.5)]:
        latencies.observe((service,), value)
        histogram.labels(service).observe(value)
    assert generate_latest(ours) == generate_latest(theirs)
