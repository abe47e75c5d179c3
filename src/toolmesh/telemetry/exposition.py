"""Serving the metrics: the gateway's ``/metrics`` route, and ``--metrics-port`` for any part.

Both answer Prometheus' text format (or OpenMetrics when the scraper asks for it) from
``prometheus_client``'s default registry: every metric of :mod:`toolmesh.telemetry.metrics`
and the process' own (CPU, memory, file descriptors).

The port of :class:`MetricsServer` has no authentication: it listens on 127.0.0.1 unless the
operator names another address (a container's, for a scraper beside it), and then says in
the log that anyone who reaches it reads the metrics. They hold counts and the names of
tools, queues and models, never arguments, answers or secrets. The gateway's ``/metrics`` is
behind the gateway's own access checks (docs/observability.md shows how to let a scraper in).
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from prometheus_client import REGISTRY
from prometheus_client.exposition import choose_encoder

from toolmesh.errors import ToolmeshError

log = logging.getLogger("toolmesh.metrics")

#: the path metrics are served on (the gateway's and the metrics port's)
PATH = "/metrics"


class MetricsError(ToolmeshError):
    """The metrics endpoint cannot listen where it was told."""

    type = "usage-error"


def render(accept: str | None) -> tuple[bytes, str]:
    """The registry's current samples in the format ``accept`` prefers, and its content type."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(REGISTRY), content_type


async def metrics_handler(request: web.Request) -> web.Response:
    """Answers a scrape. Collecting runs the collectors in this thread: it takes about a
    millisecond for toolmesh's metrics, less than handing it to another thread would."""
    body, content_type = render(request.headers.get("Accept"))
    response = web.Response(body=body)
    response.headers["Content-Type"] = content_type
    return response


class MetricsServer:
    """Serves :data:`PATH` (and nothing else) on ``host:port`` until stopped; a part
    :func:`toolmesh.runtime.serve` can run. ``port=0`` picks a free port (see ``url``)."""

    def __init__(self, *, host: str = "127.0.0.1", port: int) -> None:
        self.host = host
        self.port = port
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get(PATH, metrics_handler)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as e:
            await self.stop()
            raise MetricsError(f"cannot serve metrics on {self.host}:{self.port}: "
                               f"{e.strerror or e}; choose another --metrics-port") from None
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{port}{PATH}"
        log.info("metrics at %s", self.url)
        from toolmesh.gateway.access import is_loopback

        if not is_loopback(self.host):
            log.warning("the metrics port has no authentication: anyone who can reach "
                        "%s:%d reads the metrics (counts and tool names)", self.host, port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await asyncio.shield(runner.cleanup())
