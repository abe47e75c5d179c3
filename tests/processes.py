"""Start toolmesh commands as real processes and wait for them to say they are ready."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from tests.forkserver import spawn

ROOT = Path(__file__).resolve().parent.parent


def env() -> dict[str, str]:
    """The environment for a child process: the tests' own modules importable."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


async def start_toolmesh(*args: str, ready: str = "ready:", timeout: float = 30,
                         extra_env: dict[str, str] | None = None, cwd: Path | None = None,
                         as_user: bool = False
                         ) -> tuple[asyncio.subprocess.Process, list[str]]:
    """Run ``python -m toolmesh.cli.main ARGS`` (forked from a template: tests/forkserver.py;
    ``as_user``: the console script, a new interpreter); return once stderr shows ``ready``."""
    proc = await _start(args, env={**env(), **(extra_env or {})}, cwd=cwd, as_user=as_user,
                        stdin=None)
    lines: list[str] = []
    assert proc.stderr is not None
    async with asyncio.timeout(timeout):
        while True:
            raw = await proc.stderr.readline()
            if not raw:
                raise RuntimeError("process exited before it was ready:\n" + "".join(lines))
            lines.append(raw.decode())
            if ready in lines[-1]:
                return proc, lines


def console_script() -> str:
    """The installed ``toolmesh`` command beside this Python: what a user runs. Unlike
    ``python -m``, it does not put the current folder on the import path by itself."""
    path = Path(sys.executable).parent / "toolmesh"
    assert path.exists(), f"no toolmesh console script at {path}: pip install -e ."
    return str(path)


async def run_toolmesh(*args: str, timeout: float = 60, stdin_text: str | None = None,
                       extra_env: dict[str, str] | None = None, cwd: Path | None = None,
                       as_user: bool = False) -> tuple[int, str, str]:
    """Run a toolmesh command to completion: ``(exit code, stdout, stderr)``; ``as_user``:
    through the console script, a new interpreter, as a user would (else ``python -m``, forked
    from a template: tests/forkserver.py)."""
    proc = await _start(args, env={**env(), **(extra_env or {})}, cwd=cwd, as_user=as_user,
                        stdin=asyncio.subprocess.PIPE)
    data = stdin_text.encode() if stdin_text is not None else None
    out, err = await asyncio.wait_for(proc.communicate(data), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _start(args: tuple[str, ...], *, env: dict[str, str], cwd: Path | None, as_user: bool,
                 stdin: int | None) -> Any:
    pipe = asyncio.subprocess.PIPE
    if as_user:
        return await asyncio.create_subprocess_exec(
            console_script(), *args, env=env, cwd=cwd, stdin=stdin, stdout=pipe, stderr=pipe)
    return await spawn("toolmesh.cli.main", *args, env=env, cwd=cwd, stdin=stdin, stdout=pipe,
                       stderr=pipe)
