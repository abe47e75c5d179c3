"""Serving the metrics: the gateway's ``/metrics`` route, and ``--metrics-port`` for any part.

Both answer Prometheus' text format (or OpenMetrics when the scraper asks for it) from
``prometheus_client``'s default registry: every metric of :mod:`toolmesh.telemetry.metrics`
and the process' own (CPU, memory, file descriptors).

The port of :class:`MetricsServer` listens on 127.0.0.1 by default, where it needs no token,
as the gateway does not. Beyond loopback (a container's address, for a scraper beside it) it
needs a token, as the gateway does: the scraper sends ``Authorization: Bearer <token>``. The
metrics hold counts and the names of tools, queues and models of every workspace, never
arguments, answers or secrets. The gateway's ``/metrics`` is behind the gateway's own access
checks (docs/observability.md shows how to let a scraper in).
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import logging
import os

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

    def __init__(self, *, host: str = "127.0.0.1", port: int, token: str | None = None) -> None:
        from toolmesh.urls import is_loopback

        if token is None and not is_loopback(host):
            raise MetricsError(
                f"--metrics-host {host}: serving metrics beyond loopback needs a token (set "
                "TOOLMESH_METRICS_TOKEN or --metrics-token-file; the scraper sends it as a "
                "bearer token)")
        self.host = host
        self.port = port
        self.url = ""
        self._token = token
        self._runner: web.AppRunner | None = None

    async def _scrape(self, request: web.Request) -> web.Response:
        if self._token is not None:
            scheme, _, given = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                    given.strip().encode(), self._token.encode()):
                return web.json_response(
                    {"error": {"type": "auth-failed", "message": "the metrics token is "
                               "required (Authorization: Bearer <token>)"}}, status=401)
        return await metrics_handler(request)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get(PATH, self._scrape)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as e:
            await self.stop()
            # aiohttp's message repeats the address: say what went wrong in our words
            reason = ("the address is in use" if e.errno == errno.EADDRINUSE
                      else os.strerror(e.errno) if e.errno else str(e))
            raise MetricsError(f"cannot serve metrics on {self.host}:{self.port}: {reason}; "
                               "choose another --metrics-port") from None
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{port}{PATH}"
        log.info("metrics at %s%s", self.url,
                 " (bearer token required)" if self._token is not None else "")

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await asyncio.shield(runner.cleanup())
