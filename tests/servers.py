"""A real ``toolmesh serve`` process for end-to-end tests."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.processes import start_toolmesh


@dataclass
class Served:
    url: str
    process: asyncio.subprocess.Process
    data_dir: Path


@asynccontextmanager
async def toolmesh_serve(data_dir: Path, *extra: str) -> AsyncIterator[Served]:
    """Run ``toolmesh serve --port 0`` with its data in ``data_dir``; yield its URL."""
    proc, lines = await start_toolmesh(
        "serve", "--port", "0", "--config-store", str(data_dir / "config.db"), *extra)
    found = [m.group(1) for line in lines if (m := re.search(r"gateway listening on (\S+)", line))]
    try:
        assert found, "".join(lines)
        yield Served(found[0], proc, data_dir)
    finally:
        if proc.returncode is None:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 20)


async def stored(served: Served, item: str) -> Any:
    """The JSON value of config item ``TYPE/KEY``, read with ``toolmesh config get``."""
    from tests.processes import run_toolmesh

    code, out, err = await run_toolmesh("config", "get", item, "--url", served.url)
    assert code == 0, err
    return json.loads(out)


async def keys(served: Served, type: str) -> list[str]:
    """The keys of a config type, read with ``toolmesh config list``."""
    from tests.processes import run_toolmesh

    code, out, err = await run_toolmesh("config", "list", type, "--url", served.url)
    assert code == 0, err
    return out.split()
