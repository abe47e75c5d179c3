"""A real ``toolmesh serve`` process for end-to-end tests."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator
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
                         extra_env: dict[str, str] | None = None, cwd: Path | None = None,
                         as_user: bool = False) -> AsyncIterator[Served]:
    """Run ``toolmesh serve --port 0`` with its data in ``data_dir`` (its config store there
    unless ``store`` is false); yield its URL. ``cwd``, ``as_user``: as for
    :func:`~tests.processes.start_toolmesh`."""
    where = ["--config-store", str(data_dir / "config.db")] if store else []
    proc, lines = await start_toolmesh("serve", "--port", "0", *where, *extra,
                                       extra_env=extra_env, cwd=cwd, as_user=as_user)
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


@contextlib.contextmanager
def serving(data_dir: Path, *extra: str, cwd: Path | None = None, as_user: bool = False,
            extra_env: dict[str, str] | None = None) -> Iterator[Served]:
    """``toolmesh serve --port 0`` for the tests of a module (a synchronous context, so a
    module-scoped fixture can share one server among its tests); stops it on exit."""
    import subprocess
    import sys
    import threading

    from tests.processes import console_script, env

    command = [console_script()] if as_user else [sys.executable, "-m", "toolmesh.cli.main"]
    proc = subprocess.Popen(
        [*command, "serve", "--port", "0", "--config-store", str(data_dir / "config.db"), *extra],
        env={**env(), "TOOLMESH_DATA_DIR": str(data_dir), **(extra_env or {})}, cwd=cwd,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    url: str | None = None
    for line in proc.stderr:
        lines.append(line)
        if (m := re.search(r"gateway listening on (\S+)", line)):
            url = m.group(1)
        if "ready:" in line or "Traceback" in line:
            break
    # keep reading: a process whose stderr pipe fills up blocks on its next log line
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    try:
        assert url is not None and proc.poll() is None, "".join(lines)
        yield Served(url, proc, data_dir, lines)  # type: ignore[arg-type]
    finally:
        proc.terminate()
        proc.wait(20)
        reader.join(5)
        proc.stderr.close()
