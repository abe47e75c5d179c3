"""Child processes for the benchmarks: toolmesh parts as real processes, a RabbitMQ vhost, and
a pulsar-lite broker.

* :class:`Child` runs ``python -m toolmesh.cli.main ARGS``, waits for its ``ready:`` line
  (never a sleep), keeps draining its output for its whole life so it never blocks on a full
  pipe, and stops it with SIGTERM (SIGKILL only if it does not exit in time).
* :class:`Children` starts batches of them in parallel and stops them all (last batch first)
  when its ``async with`` block ends — normally, on an exception, or on cancellation (Ctrl-C).
* :func:`rabbit_vhost` creates a private vhost and deletes it again, also on failure.
* :func:`start_serve` runs ``toolmesh serve`` on a free port (embedded bus, a SQLite store in
  a folder of the caller's) and answers its URL once it listens.
* :class:`PulsarLite` runs a pulsar-lite broker (the ``pulsar-lite`` package from PyPI: one
  binary speaking Pulsar's binary protocol) on a free loopback port.

The bench's own copy of ``tests/processes.py``'s and ``tests/pulsar_broker.py``'s ideas; it
imports nothing from ``tests/``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent

#: output lines worth reporting after a run
NOTABLE = re.compile(r"\b(WARNING|ERROR|CRITICAL|Traceback)\b")


def child_env() -> dict[str, str]:
    """The environment of a child: the repo root importable (for ``bench.services:...``)."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # faulthandler: a crash (say, in a C extension at shutdown) leaves a Python traceback
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}


class Child:
    """One ``toolmesh`` process (see the module docstring)."""

    def __init__(self, name: str, args: Sequence[str]) -> None:
        self.name = name
        self.args = list(args)
        self.proc: asyncio.subprocess.Process | None = None
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.notable: list[str] = []
        self.returncode: int | None = None
        self._ready = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self, timeout: float = 60) -> None:
        """Start the process; return once it has logged ``ready:``."""
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "toolmesh.cli.main", *self.args, env=child_env(), cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        self._pump = asyncio.create_task(self._drain(), name=f"drain {self.name}")
        ready = asyncio.create_task(self._ready.wait())
        try:
            await asyncio.wait({ready, self._pump}, timeout=timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if not self._ready.is_set():
            why = "exited" if self._pump.done() else f"was not ready after {timeout:g} s"
            raise RuntimeError(f"{self.name} {why} before it was ready; its last output:\n  "
                               + "\n  ".join(self.tail))

    async def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while raw := await self.proc.stdout.readline():
            line = raw.decode(errors="replace").rstrip()
            self.tail.append(line)
            if "ready:" in line:
                self._ready.set()
            elif NOTABLE.search(line) and len(self.notable) < 20:
                self.notable.append(line)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    async def stop(self, timeout: float = 15) -> None:
        """SIGTERM, wait (SIGKILL after ``timeout``), and finish draining its output."""
        proc = self.proc
        if proc is None or self._stopping:
            return
        self._stopping = True
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except asyncio.TimeoutError:
                self.notable.append(f"did not exit {timeout:g} s after SIGTERM; killed")
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        self.returncode = proc.returncode
        if self._pump is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._pump, 5)

    def stop_now(self) -> None:
        """Synchronous last resort (stopping was interrupted): send SIGTERM, do not wait."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)


class Children:
    """Batches of :class:`Child`, stopped last batch first at the end of ``async with``."""

    def __init__(self) -> None:
        self.batches: list[list[Child]] = []
        self.all: list[Child] = []

    async def start(self, *children: Child, timeout: float = 60) -> list[Child]:
        """Start ``children`` in parallel; return once every one of them is ready."""
        batch = list(children)
        self.batches.append(batch)
        self.all.extend(batch)
        results = await asyncio.gather(*(c.start(timeout) for c in batch),
                                       return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]
        return batch

    async def stop(self) -> None:
        """Stop every child, last batch first (each batch in parallel)."""
        while self.batches:
            batch = self.batches.pop()
            # shielded: a second Ctrl-C must not leave processes behind
            await asyncio.shield(asyncio.gather(*(c.stop() for c in batch),
                                                return_exceptions=True))

    async def __aenter__(self) -> Children:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            await self.stop()
        except BaseException:
            for child in self.all:
                child.stop_now()
            raise


def _rabbitmqctl(*args: str) -> None:
    tool = shutil.which("rabbitmqctl") or "rabbitmqctl"
    done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed: "
                           f"{(done.stderr or done.stdout).strip()}")


def vhost_url(base: str, vhost: str) -> str:
    """``base`` (an ``amqp://`` URL) pointing at ``vhost``."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path="/" + quote(vhost, safe="")))


@contextlib.asynccontextmanager
async def rabbit_vhost(base: str, vhost: str, user: str = "guest") -> AsyncIterator[str]:
    """A fresh RabbitMQ vhost with full permissions for ``user``; its URL. Deleted at exit,
    also after an error or a cancellation."""
    # rabbitmqctl runs synchronously (about 0.4 s): a cancellation (Ctrl-C, SIGTERM) cannot
    # land between creating the vhost and entering the `try` that deletes it
    try:
        _rabbitmqctl("add_vhost", vhost)
        _rabbitmqctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*")
        yield vhost_url(base, vhost)
    finally:
        try:
            _rabbitmqctl("delete_vhost", vhost)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            if "not_found" not in str(e) and "does not exist" not in str(e):
                print(f"warning: could not delete the RabbitMQ vhost {vhost!r}: {e}",
                      file=sys.stderr)


class PulsarLite:
    """One pulsar-lite process bound to 127.0.0.1 (its metrics endpoint off), with its data
    in ``data_dir``; its log goes to ``data_dir / "pulsar-lite.log"``."""

    READY_LINE = b"Server listening on"

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"pulsar://127.0.0.1:{self.port}"
        self.log_path = data_dir / "pulsar-lite.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._pump: threading.Thread | None = None
        data_dir.mkdir(parents=True, exist_ok=True)
        # its metrics endpoint would otherwise bind 0.0.0.0:8080
        (data_dir / "pulsar-lite.toml").write_text("[metrics]\nenabled = false\n")

    @staticmethod
    def binary() -> str:
        """``$PULSAR_LITE_BIN``, or the binary the ``pulsar-lite`` package ships."""
        if os.environ.get("PULSAR_LITE_BIN"):
            return os.environ["PULSAR_LITE_BIN"]
        from pulsar_lite.binary_finder import find_pulsar_lite_binary

        return str(find_pulsar_lite_binary())

    def start(self, timeout: float = 30) -> None:
        """Start the broker; return once it accepts connections."""
        ready = threading.Event()
        proc = subprocess.Popen(
            [self.binary(), "--config", str(self.data_dir / "pulsar-lite.toml"),
             "--addr", f"127.0.0.1:{self.port}", "--db-path", str(self.data_dir / "db")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=self.data_dir,
            env={**os.environ, "RUST_LOG": "info"})
        self._proc = proc

        def pump() -> None:
            # drains the pipe for the broker's whole life, so it never blocks on a full pipe
            assert proc.stdout is not None
            with proc.stdout, open(self.log_path, "ab") as log:
                for line in proc.stdout:
                    log.write(line)
                    log.flush()
                    if self.READY_LINE in line:
                        ready.set()
            ready.set()

        self._pump = threading.Thread(target=pump, name="pulsar-lite-log", daemon=True)
        self._pump.start()
        if not ready.wait(timeout) or proc.poll() is not None:
            self.stop()
            raise RuntimeError(f"pulsar-lite did not start; see {self.log_path}")

    def stop(self) -> None:
        """SIGTERM (SIGKILL if it does not exit within 10 s); wait for its log to end."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._pump is not None:
            self._pump.join(10)  # it closes the pipe once the broker has gone


async def start_serve(data: Path, *extra: str, profile: Path | None = None,
                      ) -> tuple[asyncio.subprocess.Process, str]:
    """``toolmesh serve`` on a free port, its config store in ``data``, with the options
    ``extra``; the process and the gateway's URL once it listens. ``profile``: run it under
    cProfile, writing the stats there when it exits on SIGINT. Its log is read for its whole
    life, so a full pipe never stalls it.
    """
    prefix = ["-m", "cProfile", "-o", str(profile)] if profile else []
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *prefix, "-m", "toolmesh.cli.main", "serve", "--port", "0",
        "--config-store", str(data / "config.db"), *extra, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    while True:
        line = (await proc.stderr.readline()).decode()
        if not line:
            raise RuntimeError("toolmesh serve exited")
        if m := re.search(r"gateway listening on (\S+)", line):
            asyncio.get_running_loop().create_task(_drain(proc.stderr))
            return proc, m.group(1)


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass
