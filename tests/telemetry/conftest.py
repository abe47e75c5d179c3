"""Fixtures of the telemetry tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.gateway.conftest import gateway, guarded, http  # noqa: F401 - the gateway's, here too
from toolmesh.telemetry import metrics, tracing
from toolmesh.telemetry.labels import BoundedValues


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on in this process for the test, every span kept in memory as it ends."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        yield exporter
    finally:
        tracing.disable()


@pytest.fixture(autouse=True)
def fresh_label_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Label bounds as a new process has them. A test worker makes thousands of queues and
    services over the suite, far past the bounds, after which every new name is counted as
    ``_other`` (as it should be: tests/telemetry/test_metrics_endpoint.py checks the bound);
    these tests count by the names of their own queues and services."""
    for name in ("_tools", "_queues", "_services", "_models", "_outcomes"):
        monkeypatch.setattr(metrics, name, BoundedValues(getattr(metrics, name).limit))
