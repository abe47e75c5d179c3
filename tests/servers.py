"""A real ``toolmesh serve`` process for end-to-end tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.processes import start_toolmesh


@dataclass
class Served:
    url: str
    process: asyncio.subprocess.Process
    data_dir: Path
    #: every line the process wrote to stderr so far (its log), kept up to date
    log: list[str] = field(default_factory=list)


async def _drain(stream: asyncio.StreamReader | None, lines: list[str]) -> None:
    # keep reading: a process whose stderr pipe fills up blocks on its next log line
    while stream is not None and (raw := await stream.readline()):
        lines.append(raw.decode(errors="replace"))


@asynccontextmanager
async def toolmesh_serve(data_dir: Path, *extra: str, store: bool = True,
                         extra_env: dict[str, str] | None = None) -> AsyncIterator[Served]:
    """Run ``toolmesh serve --port 0`` with its data in ``data_dir`` (its config store there
    unless ``store`` is false); yield its URL."""
    where = ["--config-store", str(data_dir / "config.db")] if store else []
    proc, lines = await start_toolmesh("serve", "--port", "0", *where, *extra,
                                       extra_env=extra_env)
    found = [m.group(1) for line in lines if (m := re.search(r"gateway listening on (\S+)", line))]
    drain = asyncio.create_task(_drain(proc.stderr, lines))
    try:
        assert found, "".join(lines)
        yield Served(found[0], proc, data_dir, lines)
    finally:
        if proc.returncode is None:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 20)
        await asyncio.wait_for(drain, 5)


async def stored(served: Served, item: str) -> Any:
    """The JSON value of config item ``TYPE/KEY``, read with ``toolmesh config get``."""
    from tests.processes import run_toolmesh

    code, out, err = await run_toolmesh("config", "get", item, "--url", served.url)
    assert code == 0, err
    return json.loads(out)


def stored_raw(served: Served, item: str, workspace: str = "default") -> Any:
    """The JSON value of ``TYPE/KEY`` as the SQLite store holds it (secrets unmasked)."""
    import sqlite3

    type, key = item.split("/", 1)
    with contextlib.closing(sqlite3.connect(served.data_dir / "config.db")) as db:
        row = db.execute("SELECT value FROM toolmesh_config WHERE workspace = ? AND type = ?"
                         " AND key = ?", (workspace, type, key)).fetchone()
    assert row is not None, f"no {item} in the store"
    return json.loads(row[0])


async def keys(served: Served, type: str) -> list[str]:
    """The keys of a config type, read with ``toolmesh config list``."""
    from tests.processes import run_toolmesh

    code, out, err = await run_toolmesh("config", "list", type, "--url", served.url)
    assert code == 0, err
    return out.split()
