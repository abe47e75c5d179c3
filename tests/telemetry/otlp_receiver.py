"""A small OTLP/HTTP trace receiver: what a collector would get from toolmesh's processes.

Tests point ``OTEL_EXPORTER_OTLP_ENDPOINT`` at :attr:`OtlpReceiver.url` and read back the
spans the real exporter sent (``POST /v1/traces``, a protobuf ``ExportTraceServiceRequest``,
optionally gzip- or deflate-compressed), as plain :class:`ReceivedSpan` records. Waiting for
spans is on a condition notified at each export, never a sleep.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from aiohttp import web
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

#: the span status codes of OTLP (``Status.StatusCode``)
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2


@dataclass(frozen=True, kw_only=True)
class ReceivedSpan:
    """One span as it arrived; ids in lower-case hex, as a ``traceparent`` writes them."""

    trace_id: str
    span_id: str
    #: ``None`` for a root span (OTLP sends no parent id)
    parent_span_id: str | None
    name: str
    #: the ``service.name`` of the exporting process's resource
    service: str
    #: the instrumentation scope that made it (``toolmesh``, ``mcp-python-sdk``, ...)
    scope: str
    attributes: dict[str, Any]
    #: :data:`STATUS_UNSET`, :data:`STATUS_OK` or :data:`STATUS_ERROR`
    status: int

    def __str__(self) -> str:
        return f"{self.service}: {self.name!r} {self.span_id} <- {self.parent_span_id}"


SpansPredicate = Callable[[Sequence[ReceivedSpan]], bool]


class OtlpReceiver:
    """An OTLP/HTTP trace endpoint on 127.0.0.1 (a free port) for the life of an
    ``async with`` block; :attr:`spans` holds everything received, in arrival order."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        #: how many export requests came (each a batch of one process's spans)
        self.exports = 0
        #: the ``Content-Encoding`` of each export (``identity`` when none was named)
        self.encodings: list[str] = []
        #: why requests were refused: a test should find none
        self.refused: list[str] = []
        self._arrived = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def url(self) -> str:
        """The base URL for ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the exporter adds ``/v1/traces``)."""
        assert self._port is not None, "the receiver is not started"
        return f"http://127.0.0.1:{self._port}"

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/v1/traces", self._export)
        # the body is decoded here, as a collector would (aiohttp would do it unasked)
        self._runner = web.AppRunner(app, access_log=None, auto_decompress=False)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        """The spans of one trace received so far."""
        return [s for s in self.spans if s.trace_id == trace_id]

    async def wait_for(self, predicate: SpansPredicate, *, timeout: float = 15.0
                       ) -> list[ReceivedSpan]:
        """Wait until ``predicate(spans received so far)`` holds; those spans. Checked once
        now and again after each export, so nothing sleeps; :class:`TimeoutError` naming what
        did arrive otherwise."""
        try:
            async with asyncio.timeout(timeout), self._arrived:
                await self._arrived.wait_for(lambda: predicate(self.spans))
        except TimeoutError:
            arrived = "\n".join(f"  {s}" for s in self.spans) or "  (none)"
            raise TimeoutError(f"the spans awaited did not arrive within {timeout:g} s; "
                               f"{self.exports} exports brought:\n{arrived}") from None
        return list(self.spans)

    async def _export(self, request: web.Request) -> web.Response:
        body = await request.read()
        encoding = request.headers.get("Content-Encoding", "identity").lower()
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            elif encoding != "identity":
                raise ValueError(f"unknown Content-Encoding {encoding!r}")
            message = ExportTraceServiceRequest.FromString(body)
        except (OSError, EOFError, zlib.error, ValueError, DecodeError) as e:
            # the exporter logs our 400; the test sees `refused`
            self.refused.append(f"{type(e).__name__}: {e}")
            return web.Response(status=400, text=str(e))
        received = _spans(message)
        async with self._arrived:
            self.encodings.append(encoding)
            self.spans.extend(received)
            self.exports += 1
            self._arrived.notify_all()
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")


def _spans(message: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    found = []
    for resource_spans in message.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(ReceivedSpan(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex() or None, name=span.name,
                    service=str(resource.get("service.name", "")),
                    scope=scope_spans.scope.name, attributes=_attributes(span.attributes),
                    status=span.status.code))
    return found


def _attributes(pairs: Sequence[KeyValue]) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, kind)
