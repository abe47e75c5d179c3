"""OpenTelemetry traces: spans around the work, and their context carried between processes.

Off unless the standard environment variables ask for it (:func:`configure`): an OTLP
endpoint in ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or
``OTEL_TRACES_EXPORTER=console``; ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``
keep it off. Off, nothing of OpenTelemetry is imported and every call here is a check of one
module global: :func:`span` hands back a shared null context.

On, each unit of work gets a span — a gateway request, a service's handling of a bus
request, an agent dialog and each of its steps, a tool call, an LLM completion — and the
context crosses every hop:

* on the bus, as the W3C ``traceparent`` (and ``tracestate``) message properties, which
  every backend carries (:func:`inject` when sending, ``parent=`` of :func:`span` when
  handling);
* to MCP servers, in the request's ``_meta`` (:func:`mcp_meta`), as the MCP specification's
  trace-context convention says;
* from HTTP clients, in the ``traceparent`` header the gateway reads.

Log lines written while a span is current end with its trace id (:class:`TraceIds`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Literal

from toolmesh.errors import ToolmeshError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger("toolmesh.tracing")

Kind = Literal["internal", "server", "client", "producer", "consumer"]

#: the W3C trace-context keys, in message properties, HTTP headers and MCP ``_meta``
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

#: the longest traceparent or tracestate taken from a peer (W3C allows 512 for tracestate)
MAX_CONTEXT = 512

_tracer: Tracer | None = None
_provider: TracerProvider | None = None
_NULL = contextlib.nullcontext()


class TracingError(ToolmeshError):
    """The ``OTEL_*`` settings ask for something this installation cannot do."""

    type = "usage-error"


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces (see the module docstring)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if exporter == "none":
        return False
    if exporter == "console":
        return True
    return bool(environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def configure(*, service_name: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Turn tracing on for this process if the environment asks for it; whether it is on.

    ``service_name``: the ``service.name`` of the spans unless ``OTEL_SERVICE_NAME`` (or
    ``OTEL_RESOURCE_ATTRIBUTES``) names one. The exporter reads the rest of the standard
    variables itself (headers, timeout, compression). Only the ``http/protobuf`` protocol
    is installed; asking for ``grpc`` is a :class:`TracingError` saying what to install.
    """
    if _tracer is not None or not wanted(environ):
        return _tracer is not None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    exporter_name = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    exporter: SpanExporter
    if exporter_name == "console":
        exporter = ConsoleSpanExporter()
    elif exporter_name == "otlp":
        protocol = (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                    or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
        if protocol != "http/protobuf":
            raise TracingError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: toolmesh exports traces over "
                "'http/protobuf' (port 4318 on most collectors); set that, or unset it")
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter,
        )

        exporter = OTLPSpanExporter()
    else:
        raise TracingError(f"OTEL_TRACES_EXPORTER={exporter_name!r}: toolmesh knows 'otlp', "
                           "'console' and 'none'")
    named = environ.get("OTEL_SERVICE_NAME") or any(
        pair.split("=", 1)[0].strip() == "service.name"
        for pair in environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","))
    attributes = {} if named else {"service.name": service_name}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    enable(provider)
    from opentelemetry import trace

    # the process's global provider too: libraries that trace on their own (the MCP SDK's
    # "MCP send tools/call" spans) then join the same traces
    trace.set_tracer_provider(provider)
    log.info("tracing on: spans of %s go to %s", provider.resource.attributes.get(
        "service.name"), _destination(environ, exporter_name))
    return True


def _destination(environ: Mapping[str, str], exporter: str) -> str:
    if exporter == "console":
        return "stdout"
    return (environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "") + " (OTLP/HTTP)")


def enable(provider: TracerProvider) -> None:
    """Trace toolmesh's own spans with ``provider`` (:func:`configure` builds one from the
    environment and makes it the process's global one too; tests pass one with an in-memory
    exporter, and may call this again, which the global provider does not allow)."""
    global _tracer, _provider
    _provider = provider
    _tracer = provider.get_tracer("toolmesh")


def disable() -> None:
    """Stop tracing (the provider is flushed and shut down)."""
    global _tracer, _provider
    provider, _tracer, _provider = _provider, None, None
    if provider is not None:
        provider.shutdown()


def enabled() -> bool:
    """Whether spans are being made."""
    return _tracer is not None


def flush(timeout: float = 5.0) -> None:
    """Export the spans still buffered (at exit: the batch processor sends every few seconds)."""
    if _provider is not None:
        _provider.force_flush(int(timeout * 1000))


def span(name: str, *, kind: Kind = "internal", attributes: Mapping[str, Any] | None = None,
         parent: Mapping[str, str] | None = None) -> contextlib.AbstractContextManager[Span | None]:
    """A context manager: a span named ``name``, current within the block (``None`` and no
    cost when tracing is off). ``parent``: message properties or HTTP headers whose
    ``traceparent`` the span continues (else it continues the current span, if any).
    An exception leaving the block marks the span failed."""
    tracer = _tracer
    if tracer is None:
        return _NULL
    from opentelemetry.trace import SpanKind

    context = None
    if parent is not None and TRACEPARENT in parent:
        from opentelemetry.propagate import extract

        # what a peer sent (an HTTP client, an MCP server's _meta): text of a sane size only
        carrier = {key: value for key in (TRACEPARENT, TRACESTATE)
                   if isinstance(value := parent.get(key), str) and len(value) <= MAX_CONTEXT}
        context = extract(carrier)
    return tracer.start_as_current_span(
        name, context=context, kind=SpanKind[kind.upper()],
        attributes=dict(attributes) if attributes else None)


def failed(span: Span | None, error_type: str, message: str = "") -> None:
    """Mark ``span`` failed with ``error_type`` (for errors answered, not raised)."""
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, f"{error_type}: {message}" if message
                           else error_type))


def inject(properties: MutableMapping[str, str]) -> None:
    """Add the current span's ``traceparent`` (and ``tracestate``) to ``properties``."""
    if _tracer is None:
        return
    from opentelemetry.propagate import inject as otel_inject

    otel_inject(properties)


def mcp_meta() -> dict[str, str] | None:
    """The ``_meta`` entries that carry the current span to an MCP server (``None``: no span)."""
    if _tracer is None:
        return None
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier or None


def trace_id() -> str | None:
    """The current span's trace id as 32 hex digits, if a span is recording."""
    if _tracer is None:
        return None
    from opentelemetry.trace import get_current_span

    context = get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


class TraceIds(logging.Filter):
    """A handler filter that ends each record written within a span with ``trace=<id>``,
    so a log line leads to its trace (and a trace to its log lines)."""

    def filter(self, record: logging.LogRecord) -> bool:
        tid = trace_id()
        if tid is not None:
            record.msg, record.args = f"{record.getMessage()} trace={tid}", None
        return True
