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


def test_tallies_count_into_their_family_and_only_what_happened_scrapes() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    counts = Counts("t_events", "Events.", ["queue", "event"], registry=ours)
    counter = Counter("t_events", "Events.", ["queue", "event"], registry=theirs)
    published = counts.tally(("q1", "published"))
    counts.tally(("q1", "dropped"))  # resolved, never counted: no series yet
    assert counts.tally(("q1", "published")) is published
    for _ in range(3):
        published.count()
        counter.labels("q1", "published").inc()
    counts.inc(("q1", "published"), 2)  # the same series, counted the other way
    counter.labels("q1", "published").inc(2)
    assert generate_latest(ours) == generate_latest(theirs)


def test_a_latency_row_observes_into_its_family() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    latencies = Latencies("t_seconds", "Time.", ["service"], buckets=LATENCY, registry=ours)
    histogram = Histogram("t_seconds", "Time.", ["service"], buckets=LATENCY, registry=theirs)
    row = latencies.row(("a",))
    assert latencies.row(("a",)) is row
    for value in (0.001, 0.3, 700.0):
        row.observe(value)
        histogram.labels("a").observe(value)
    assert generate_latest(ours) == generate_latest(theirs)
