"""A real Prometheus server scraping toolmesh, for tests that check the metrics as an
operator sees them: through Prometheus' own scrape (its content negotiation, its parser, its
``up`` and its label handling) and PromQL, not through ``prometheus_client`` in the test.

Debian's ``prometheus`` package gives the binary (.ci/run installs it when it is missing).
Each :func:`prometheus` runs its own server: a config and a TSDB in a temporary folder, a
free port on 127.0.0.1, every target scraped each second; the process is stopped (killed if
it lingers) and reaped when the block ends, however it ends.

The waits here poll Prometheus' HTTP API. Prometheus is a server we did not write and cannot
be told to call us back, so a bounded poll (a deadline, a short pause) is the only way to ask
it whether a scrape has happened; toolmesh's own state is never polled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

#: how often Prometheus scrapes every target (seconds)
SCRAPE_INTERVAL = 1.0
#: the pause between two polls of Prometheus' API
POLL = 0.1
#: how long Prometheus may take to start and load its (empty) TSDB
READY_WITHIN = 30.0
#: how long a wait for a scrape or a value may take: several scrape intervals and a margin
#: for a busy machine
SOON = 20.0
INSTALL_HINT = ("Debian's `prometheus` package (apt-get install prometheus; .ci/run installs "
                "it when it is missing)")


def prometheus_missing() -> str | None:
    """Why no Prometheus server can run here, or ``None`` if one can."""
    if shutil.which("prometheus") is None:
        return f"the `prometheus` binary is not on PATH: install {INSTALL_HINT}"
    return None


def require_prometheus() -> None:
    """Skip the calling test when Prometheus is missing on a developer's machine; fail it in
    CI (``CI`` set, as CI services do), where .ci/run must have installed it: a skip there
    would hide that the tests never ran."""
    problem = prometheus_missing()
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(problem, pytrace=False)
    pytest.skip(problem)


@dataclass(frozen=True)
class Target:
    """One scrape job: ``address`` (``host:port``) at ``path``, with a bearer token read
    from ``token_file`` (Prometheus rereads it at each scrape) if one is given."""

    job: str
    address: str
    path: str = "/metrics"
    token_file: Path | None = None

    def scrape_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"job_name": self.job, "metrics_path": self.path,
                                  "static_configs": [{"targets": [self.address]}]}
        if self.token_file is not None:
            config["authorization"] = {"type": "Bearer",
                                       "credentials_file": str(self.token_file)}
        return config


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (another process may take it before
    the caller does: :func:`prometheus` tries again when that happens)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    """A running Prometheus server: PromQL over its HTTP API, and bounded waits."""

    def __init__(self, url: str, http: aiohttp.ClientSession) -> None:
        self.url = url
        self._http = http

    async def api(self, path: str, **params: str) -> Any:
        """The ``data`` of a successful API answer (``path`` below ``/api/v1/``)."""
        async with self._http.get(f"{self.url}/api/v1/{path}", params=params) as r:
            body = await r.json()
        if body.get("status") != "success":
            raise AssertionError(f"Prometheus refused {path} {params}: {body}")
        return body["data"]

    async def vector(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """The series of an instant query now: ``(labels, value)`` each (a scalar answer is
        one series without labels)."""
        data = await self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        if data["resultType"] != "vector":
            raise AssertionError(f"{expr!r} is a {data['resultType']}, not an instant vector")
        return [(item["metric"], float(item["value"][1])) for item in data["result"]]

    async def query(self, expr: str) -> float | None:
        """The value of an instant query now: ``None`` when it has no series; an error when
        it has several (aggregate them in ``expr``)."""
        found = await self.vector(expr)
        if len(found) > 1:
            raise AssertionError(f"{expr!r} has {len(found)} series, not one: {found}")
        return found[0][1] if found else None

    async def wait_until(self, expr: str, holds: Callable[[float | None], bool], *,
                         timeout: float = SOON, what: str = "") -> float | None:
        """Poll ``query(expr)`` until ``holds`` accepts its value; that value. On timeout,
        the assertion names the last value and every target's health and last error."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.query(expr)
            if holds(value):
                return value
            if time.monotonic() >= deadline:
                raise AssertionError(f"{what or expr!r}: still {value} after {timeout:g} s; "
                                     f"targets: {await self.target_health()}")
            await asyncio.sleep(POLL)

    async def scraped_after(self, job: str, when: float, *, timeout: float = SOON) -> None:
        """Wait until Prometheus holds a scrape of ``job`` that began after ``when`` (a
        ``time.time()``): every sample of that job it answers with from then on shows what
        the target had at or after ``when``. (Prometheus commits a scrape's samples and its
        ``up`` together; it may shift a scrape's timestamp by a few milliseconds to align it,
        hence the margin.)"""
        await self.wait_until(f'timestamp(up{{job="{job}"}})',
                              lambda t: t is not None and t > when + 0.01, timeout=timeout,
                              what=f"a scrape of {job} after {when:.3f}")

    async def target_health(self) -> dict[str, tuple[str, str]]:
        """Each job's ``(health, last error)``, as Prometheus' targets page shows them."""
        data = await self.api("targets")
        return {t["labels"].get("job", "?"): (t["health"], t["lastError"])
                for t in data["activeTargets"]}


def write_config(folder: Path, targets: Sequence[Target]) -> Path:
    """``prometheus.yml`` scraping ``targets`` every :data:`SCRAPE_INTERVAL`. It is written as
    JSON, which YAML reads as it is: no YAML library needed."""
    seconds = f"{SCRAPE_INTERVAL:g}s"
    config = {"global": {"scrape_interval": seconds, "scrape_timeout": seconds,
                         "evaluation_interval": seconds},
              "scrape_configs": [t.scrape_config() for t in targets]}
    path = folder / "prometheus.yml"
    path.write_text(json.dumps(config, indent=2))
    return path


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM (Prometheus closes its TSDB), SIGKILL if it lingers; reaped either way."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


async def _ready(url: str, http: aiohttp.ClientSession, process: asyncio.subprocess.Process,
                 log: Path) -> bool:
    """Poll ``/-/ready`` until it answers 200 (``True``) or the process exits (``False``)."""
    deadline = time.monotonic() + READY_WITHIN
    exited = asyncio.ensure_future(process.wait())
    try:
        while not exited.done():
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(f"{url}/-/ready") as r:
                    if r.status == 200:
                        return True
            if time.monotonic() >= deadline:
                raise AssertionError(f"Prometheus not ready within {READY_WITHIN:g} s:\n"
                                     f"{log.read_text(errors='replace')}")
            await asyncio.wait({exited}, timeout=POLL)  # at once if it exits
        return False
    finally:
        exited.cancel()


@contextlib.asynccontextmanager
async def prometheus(folder: Path, targets: Sequence[Target]) -> AsyncIterator[Prometheus]:
    """A Prometheus server scraping ``targets``, its files in ``folder``, ready to answer
    queries; stopped and reaped on exit. Skips (or fails in CI) without the binary."""
    require_prometheus()
    folder.mkdir(parents=True, exist_ok=True)
    config = write_config(folder, targets)
    log = folder / "prometheus.log"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        for _attempt in range(3):  # the free port may be taken before Prometheus binds it
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            with log.open("ab") as out:
                process = await asyncio.create_subprocess_exec(
                    "prometheus", f"--config.file={config}",
                    f"--storage.tsdb.path={folder / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}", "--log.level=info",
                    stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out)
            try:
                if await _ready(url, http, process, log):
                    yield Prometheus(url, http)
                    return
                if "address already in use" not in log.read_text(errors="replace"):
                    raise AssertionError(f"Prometheus exited ({process.returncode}):\n"
                                         f"{log.read_text(errors='replace')}")
            finally:
                await _stop(process)
        raise AssertionError(f"Prometheus found no free port in 3 tries:\n{log.read_text()}")


def finite(value: float | None) -> bool:
    """Whether a query gave a number (not ``None``, NaN or an infinity)."""
    return value is not None and math.isfinite(value)
