"""Tool services for the benchmarks, importable by service processes as ``bench.services:CLASS``
(the repo root must be on ``PYTHONPATH``; ``bench/processes.py`` sees to that).

``Latency`` stands in for a service that waits on a database or an API: each call awaits a
fixed delay and uses almost no CPU, so how many calls a replica finishes per second is set by
its ``--concurrency`` and the delay, not by the machine's cores.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from toolmesh import DynamicToolService

#: seconds each ``Latency`` call waits (env ``TOOLMESH_BENCH_LATENCY`` overrides)
LATENCY = float(os.environ.get("TOOLMESH_BENCH_LATENCY", "0.01"))


class Latency(DynamicToolService):
    """Answers every call after awaiting :data:`LATENCY` seconds (no CPU spent waiting)."""

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        await asyncio.sleep(LATENCY)
        return f"waited {LATENCY * 1e3:g} ms (pid {os.getpid()})"
