"""Processes of a toolmesh deployment under test: start them, read their logs, kill them.

Every child's stderr (and stdout) is drained for its whole life — a child blocked on a full
pipe would look like a hang — and tests wait on what a process *says* (``ready:``, a config
version, a reconnection) instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Callable

from tests.forkserver import spawn
from tests.processes import env


class Proc:
    """One child process and the lines it has written so far."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process) -> None:
        self.name = name
        self.proc = proc
        self.lines: list[str] = []
        self._changed = asyncio.Event()
        self._readers = [asyncio.create_task(self._drain(s))
                         for s in (proc.stdout, proc.stderr) if s is not None]

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        while raw := await stream.readline():
            self.lines.append(raw.decode(errors="replace"))
            self._changed.set()
        self._changed.set()

    async def wait_for(self, pattern: str, *, after: int = 0, timeout: float = 30) -> re.Match[str]:
        """The first line from index ``after`` on that matches ``pattern``."""
        regex = re.compile(pattern)
        seen = after
        async with asyncio.timeout(timeout):
            while True:
                for line in self.lines[seen:]:
                    if m := regex.search(line):
                        return m
                seen = max(seen, len(self.lines))
                if self.proc.returncode is not None and all(r.done() for r in self._readers):
                    raise RuntimeError(f"{self.name} exited ({self.proc.returncode}) without "
                                       f"saying {pattern!r}:\n{self.log()}")
                self._changed.clear()
                await self._changed.wait()

    async def grown(self, beyond: int) -> None:
        """Wait until the process has written more than ``beyond`` lines (or has ended)."""
        while len(self.lines) <= beyond and not all(r.done() for r in self._readers):
            self._changed.clear()
            await self._changed.wait()

    def log(self, last: int = 40) -> str:
        return "".join(self.lines[-last:])

    def kill(self) -> None:
        """SIGKILL: no goodbye, nothing acknowledged."""
        self.proc.send_signal(signal.SIGKILL)

    async def stop(self, timeout: float = 20) -> int:
        """SIGTERM, and the exit code once it has gone."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        await asyncio.gather(*self._readers, return_exceptions=True)
        assert self.proc.returncode is not None
        return self.proc.returncode


async def until(condition: Callable[[], bool], procs: list[Proc], *, timeout: float) -> None:
    """Wait until ``condition()`` holds, checking it whenever one of ``procs`` writes a line."""
    async with asyncio.timeout(timeout):
        while not condition():
            waiters = [asyncio.ensure_future(p.grown(len(p.lines))) for p in procs]
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()


class Cluster:
    """The processes of one test; all stopped (and checked) at the end.

    toolmesh's parts are forked from the test worker's template (tests/forkserver.py) unless
    ``new_interpreters``: then each starts as ``python -m`` does, a new interpreter importing
    everything itself, as in a real deployment (the flagship deployment test does so).
    """

    def __init__(self, *, new_interpreters: bool = False) -> None:
        self.new_interpreters = new_interpreters
        self.procs: dict[str, Proc] = {}
        #: the processes' data folder (an agent's dialogs by default): never the user's
        self.data_dir = tempfile.mkdtemp(prefix="toolmesh-e2e-")

    async def start(self, name: str, *args: str, module: str = "toolmesh.cli.main",
                    ready: str | None = "ready:", timeout: float = 60,
                    extra_env: dict[str, str] | None = None) -> Proc:
        """Start ``python -m MODULE ARGS`` and wait until it logs ``ready``."""
        child_env = {**env(), "TOOLMESH_DATA_DIR": self.data_dir, **(extra_env or {})}
        pipe = asyncio.subprocess.PIPE
        if self.new_interpreters:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", module, *args, env=child_env, stdout=pipe, stderr=pipe)
        else:
            proc = await spawn(module, *args, env=child_env, stdout=pipe, stderr=pipe)
        p = self.procs[name] = Proc(name, proc)
        if ready is not None:
            await p.wait_for(re.escape(ready), timeout=timeout)
        return p

    async def toolmesh(self, name: str, *args: str, timeout: float = 60,
                       extra_env: dict[str, str] | None = None) -> Proc:
        """``toolmesh ARGS`` as a process, once it is ready."""
        return await self.start(name, *args, timeout=timeout, extra_env=extra_env)

    def logs(self) -> str:
        return "\n".join(f"----- {name} -----\n{p.log()}" for name, p in self.procs.items())

    async def stop_all(self) -> dict[str, int]:
        """SIGTERM every process still running; their exit codes."""
        codes = await asyncio.gather(*(p.stop() for p in self.procs.values()))
        return dict(zip(self.procs, codes))


@contextlib.asynccontextmanager
async def cluster(*, new_interpreters: bool = False) -> AsyncIterator[Cluster]:
    c = Cluster(new_interpreters=new_interpreters)
    try:
        yield c
    except BaseException:
        print(c.logs(), file=sys.stderr)  # pytest shows it with the failure
        raise
    finally:
        await c.stop_all()
        shutil.rmtree(c.data_dir, ignore_errors=True)
