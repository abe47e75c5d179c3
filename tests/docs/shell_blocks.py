"""Run a page's shell blocks as a reader would, in order, each in the terminal it names.

A page marks each ```` ```bash ```` block it wants run with a comment just above it:

* ``<!-- run: foreground -->`` — typed into the reader's shell: run to its end, which must be
  exit 0; what it exports (``export VAR=...``) holds for the blocks after it.
* ``<!-- run: input "TEXT" -->`` — the same, with ``TEXT`` typed when it asks.
* ``<!-- run: background "READY" -->`` — a terminal of its own running a server: started, and
  the next block waits until its output shows ``READY``.
* ``<!-- run: restart "READY" -->`` — Ctrl-C in the terminal whose server runs the same program,
  then this block there.

Every block runs in ``bash`` with ``set -euo pipefail``, in a folder of the reader's own, with
``HOME`` a fresh folder: a new machine, but for the package caches (pip's and npm's), which are
shared so a model's server built once is not built again.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

MARKED = re.compile(r'<!-- run: (foreground|input|background|restart)(?: "([^"]*)")? -->\n'
                    r'```bash\n(.*?)```', re.S)
ANY_BLOCK = re.compile(r"```(?:bash|sh|shell|console)\n(.*?)```", re.S)


@dataclass(frozen=True)
class Block:
    """One shell block of a page and how the reader runs it."""

    how: str
    text: str
    #: the line a server prints once ready (background, restart); what is typed (input)
    arg: str = ""

    @property
    def program(self) -> str:
        """The command a background block runs (what a restart stops)."""
        words = shlex.split(self.text.replace("\\\n", " "))
        return " ".join(words[:2]) if words[0] == "toolmesh" else words[0]


def blocks(markdown: str) -> list[Block]:
    """The marked shell blocks of a page, in order."""
    return [Block(how, text, arg or "") for how, arg, text in MARKED.findall(markdown)]


def unmarked(markdown: str) -> list[str]:
    """The shell blocks of a page that no ``run:`` comment marks (each should be)."""
    marked = {b.text for b in blocks(markdown)}
    return [text for text in ANY_BLOCK.findall(markdown) if text not in marked]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Ran:
    """What a foreground block printed."""

    block: Block
    code: int
    stdout: str
    stderr: str


@dataclass
class _Server:
    block: Block
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None

    def stopped(self) -> None:
        """Once the process ended: its output read to the end and the pipe closed."""
        if self.reader is not None:
            self.reader.join(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if self.block.arg in line:
                self.ready.set()
        self.ready.set()  # ended: whoever waits finds out (it is not running)


class Reader:
    """A reader's terminals: one shell for the commands, one for each server."""

    def __init__(self, *, cwd: Path, home: Path, path: list[Path],
                 ports: dict[str, int] | None = None) -> None:
        self.cwd = cwd
        self.ports = ports or {}
        self.state = home / ".exports.sh"
        home.mkdir(parents=True, exist_ok=True)
        real_home = Path.home()
        self.env = {**os.environ, "HOME": str(home),
                    "PATH": os.pathsep.join([*map(str, path), os.environ["PATH"]]),
                    # the package caches are the machine's: fresh, but not downloaded again
                    "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR",
                                                    str(real_home / ".cache" / "pip")),
                    "npm_config_cache": os.environ.get("npm_config_cache",
                                                       str(real_home / ".npm"))}
        pip_conf = real_home / ".config" / "pip" / "pip.conf"
        if pip_conf.exists():
            self.env.setdefault("PIP_CONFIG_FILE", str(pip_conf))
        for name in ("PYTHONPATH", "TOOLMESH_URL", "TOOLMESH_TOKEN", "VIRTUAL_ENV"):
            self.env.pop(name, None)  # the reader's shell has none of the suite's
        self.state.write_text("")
        self.servers: list[_Server] = []
        #: servers a restart stopped, with what they printed
        self.stopped: list[_Server] = []

    def text(self, block: Block) -> str:
        """The block with the page's ports replaced by free ones (nothing else changes)."""
        text = block.text
        for port, free in self.ports.items():
            text = re.sub(rf"\b{port}\b", str(free), text)
        return text

    def script(self, block: Block) -> str:
        return (f"set -euo pipefail\nsource {shlex.quote(str(self.state))}\n{self.text(block)}"
                f"\nexport -p > {shlex.quote(str(self.state))}\n")

    def run(self, block: Block, *, timeout: float) -> Ran:
        """A foreground (or input) block, to its end."""
        done = subprocess.run(["bash", "-c", self.script(block)], cwd=self.cwd, env=self.env,
                              input=block.arg + "\n" if block.how == "input" else "",
                              capture_output=True, text=True, timeout=timeout)
        return Ran(block, done.returncode, done.stdout, done.stderr)

    def start(self, block: Block, *, timeout: float) -> list[str]:
        """A background block: its server started and ready; its output so far."""
        if block.how == "restart":
            self.interrupt(block.program)
        process = subprocess.Popen(
            ["bash", "-c", f"set -euo pipefail\nsource {shlex.quote(str(self.state))}\n"
                           f"exec {self.text(block)}"],
            cwd=self.cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        server = _Server(block, process)
        self.servers.append(server)
        server.reader = threading.Thread(target=server.read, daemon=True)
        server.reader.start()
        if not server.ready.wait(timeout) or process.poll() is not None:
            raise AssertionError(f"{block.program} did not print {block.arg!r} within "
                                 f"{timeout:g} s:\n" + "".join(server.lines[-40:]))
        return server.lines

    def interrupt(self, program: str) -> int:
        """Ctrl-C in the terminal running ``program``: its exit code."""
        [server] = [s for s in self.servers if s.block.program == program
                    and s.process.poll() is None]
        os.killpg(server.process.pid, signal.SIGINT)
        code = server.process.wait(timeout=30)
        server.stopped()
        self.stopped.append(server)
        self.servers.remove(server)
        return code

    def close(self) -> None:
        for server in self.servers:
            if server.process.poll() is None:
                os.killpg(server.process.pid, signal.SIGTERM)
                try:
                    server.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(server.process.pid, signal.SIGKILL)
                    server.process.wait()
            server.stopped()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tracked_files(root: Path) -> Iterator[Path]:
    """The repository's files as a clone has them (and new ones not yet committed)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=root, capture_output=True, check=True)
    for name in listed.stdout.decode().split("\0"):
        if name and (root / name).is_file():
            yield Path(name)
