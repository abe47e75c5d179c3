"""Observability: Prometheus metrics (:mod:`.metrics`), OpenTelemetry traces (:mod:`.tracing`)
and the endpoint that serves the metrics (:mod:`.exposition`).

Metrics are always counted (a labelled counter's increment costs well under a microsecond);
they are only *served* where asked (the gateway's ``/metrics``, ``--metrics-port``). Traces are
off unless the standard ``OTEL_*`` environment variables name an OTLP endpoint.
"""
