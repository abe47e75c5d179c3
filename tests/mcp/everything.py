"""``@modelcontextprotocol/server-everything``, the MCP project's own test server, from npm:
installed on demand into a cache directory and run as a child process, bound to loopback.

    python -m tests.mcp.everything --install     # what .ci/run calls; prints the directory

It is a server toolmesh did not write (Node, the TypeScript SDK), so the tests that use it
(tests/mcp/test_server_everything.py) check toolmesh against someone else's reading of MCP.
Over streamable HTTP it calls ``app.listen(PORT)``, which binds every interface; the preload
``loopback.cjs`` makes such a listen bind 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKAGE = "@modelcontextprotocol/server-everything"
VERSION = "2026.8.31"
CACHE = Path.home() / ".cache" / "toolmesh-tests" / f"npm-everything-{VERSION}"
PRELOAD = Path(__file__).with_name("loopback.cjs")
READY = re.compile(r"MCP Streamable HTTP Server listening on port (\d+)")
INSTALL_HINT = ("install Node.js >= 18 with npm, e.g. `apt-get install -y nodejs npm` "
                "(.ci/run does this when `node` is missing)")


class NodeMissing(RuntimeError):
    """``node`` or ``npm`` is not on PATH: the server-everything tests cannot run."""


def executable(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise NodeMissing(f"`{name}` is not on PATH, and the tests run {PACKAGE} "
                          f"{VERSION} from npm with it: {INSTALL_HINT}")
    return path


def missing_node() -> str | None:
    """Why server-everything cannot run here (no ``node`` or ``npm``), or ``None``."""
    for name in ("node", "npm"):
        try:
            executable(name)
        except NodeMissing as e:
            return str(e)
    return None


def package_dir(root: Path = CACHE) -> Path:
    return root / "node_modules" / "@modelcontextprotocol" / "server-everything"


def install(root: Path = CACHE) -> Path:
    """The installed package's directory; installed first if it is not there
    (:func:`npm_install`)."""
    npm_install(root, f"{PACKAGE}@{VERSION}",
                marker=Path("node_modules", ".bin", "mcp-server-everything"))
    return package_dir(root)


def npm_install(root: Path, spec: str, *, marker: Path) -> None:
    """``npm install spec`` into ``root`` unless ``root / marker`` is there: into a scratch
    directory renamed into place when complete, under a file lock — an interrupted install
    leaves nothing half-made, and two test runs starting at once install it once."""
    if (root / marker).exists():
        return
    npm = executable("npm")
    executable("node")
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / marker).exists():
            return
        scratch = root.with_name(f"{root.name}.partial")
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--save-exact", "--prefix",
             str(scratch), spec], check=False, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"npm install {spec} failed ({done.returncode}):\n"
                               f"{done.stdout}{done.stderr}")
        scratch.rename(root)


def entry(root: Path = CACHE) -> Path:
    """The server's ``dist/index.js`` (installed if need be)."""
    return install(root) / "dist" / "index.js"


def stdio_item(**extra: Any) -> dict[str, Any]:
    """An ``mcp`` config item that runs server-everything over stdio. Its command is the
    absolute path of ``node``: allow exactly that (``--mcp-stdio-allow``, StdioAllowList)."""
    return {"transport": "stdio", "command": executable("node"),
            "args": [str(entry()), "stdio"], **extra}


# --------------------------------------------------------------------------------------------
# Streamable HTTP: a child process on a free loopback port
# --------------------------------------------------------------------------------------------

@dataclass
class EverythingServer:
    """One running server-everything over streamable HTTP."""

    process: subprocess.Popen[bytes]
    port: int
    #: every line the server wrote to stderr so far
    stderr: list[str] = field(default_factory=list)
    _drain: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        """End the server and anything it started (its own process group), and reap it.

        The group is signalled only while its leader is not reaped yet, so the id cannot
        have passed to another process."""
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 20)):
            if self.process.returncode is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(wait)
        if self._drain is not None:
            self._drain.join(5)  # the pipe ends with the process
        if self.process.stderr is not None:
            self.process.stderr.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_http(*, timeout: float = 30, preload: bool = True) -> EverythingServer:
    """Start server-everything over streamable HTTP; return once it says it is listening.

    ``preload=False`` leaves its ``listen`` alone (it then binds every interface): only for
    checking that :func:`listening_addresses` sees the difference."""
    script = entry()
    for _ in range(3):  # another process may take the free port before the server does
        port = _free_port()
        command = [executable("node"), *(["--require", str(PRELOAD)] if preload else []),
                   str(script), "streamableHttp"]
        process = subprocess.Popen(command, env={**os.environ, "PORT": str(port)},
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True)
        server = EverythingServer(process, port)
        said = threading.Event()  # the ready line came, or stderr ended
        server._drain = threading.Thread(target=_drain, args=(process, server.stderr, said),
                                         daemon=True, name=f"everything-stderr-{port}")
        server._drain.start()
        if not said.wait(timeout):
            server.stop()
            raise RuntimeError(f"{PACKAGE} did not listen within {timeout:g} s:\n"
                               + "".join(server.stderr))
        ready = [m for line in server.stderr if (m := READY.search(line))]
        if ready and int(ready[0].group(1)) == port:
            return server
        server.stop()
        if not any("already in use" in line for line in server.stderr):
            break
    raise RuntimeError(f"{PACKAGE} exited before listening:\n" + "".join(server.stderr))


def _drain(process: subprocess.Popen[bytes], lines: list[str], said: threading.Event) -> None:
    # Keep reading, so a chatty server never blocks on a full pipe.
    assert process.stderr is not None
    for raw in process.stderr:
        lines.append(raw.decode(errors="replace"))
        if READY.search(lines[-1]):
            said.set()
    said.set()


@contextlib.contextmanager
def everything_http(**options: Any) -> Iterator[EverythingServer]:
    """server-everything over streamable HTTP for a ``with`` block (e.g. a module fixture)."""
    server = start_http(**options)
    try:
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def running_everything(**options: Any) -> AsyncIterator[EverythingServer]:
    """server-everything over streamable HTTP for an ``async with`` block."""
    server = await asyncio.to_thread(start_http, **options)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on TCP ``port`` (from /proc/net/tcp and
    tcp6): ``{"127.0.0.1"}`` for a loopback-only server, ``"0.0.0.0"`` or ``"::"`` for one on
    every interface."""
    found: set[str] = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        with contextlib.suppress(FileNotFoundError), open(table) as f:
            next(f)  # the header
            for line in f:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    raw = bytes.fromhex(address)
                    # the kernel prints each 32-bit word in host (little-endian) order
                    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                    found.add(socket.inet_ntop(family, raw))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=f"{PACKAGE} {VERSION} for the tests")
    parser.add_argument("--install", action="store_true",
                        help=f"install it into {CACHE} if it is not there; print the directory")
    args = parser.parse_args()
    if not args.install:
        parser.error("nothing to do (try --install)")
    try:
        print(install())
    except RuntimeError as e:  # NodeMissing too
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
