"""Start the suite's Python child processes by forking a template that has imported their code.

The suite starts well over a thousand Python processes: ``toolmesh serve``, ``toolmesh run
PART``, CLI commands, MCP test servers. A new interpreter spends most of such a start importing
(0.45 s of CPU for ``toolmesh serve`` to be ready, 0.1 s for a CLI command, on the 2-core CI
machine), and the suite is CPU-bound. So each test worker keeps a *template* process per kind of
child that has imported the kind's modules once, and a child is ``fork()``-ed from it. The child
then runs its module as ``python -m MODULE ARGS`` would: as ``__main__`` (:func:`runpy.run_module`),
with the test's arguments, environment, working folder, import path and standard streams, in a
process of its own that signals, exit codes and pipes reach as they reach any child. Its code is
the real code: nothing is stubbed, only the imports were done before the fork.

Console scripts (trustgraph-cli's ``tg-show-config``, say) are forked too
(:func:`spawn_script`): from a template of the interpreter their first line names, which imports
the module the script calls ``main`` of before it forks (once: the template keeps it). The child
drops the script's own package from its modules, so that their code runs again, reading the
child's environment as it loads, and runs the script's file as ``python SCRIPT ARGS`` would:
what the fork saves is importing the other packages (three quarters of a trustgraph-cli
command's start).

What a fork cannot reproduce runs as a real ``exec`` instead (:func:`spawn` decides):

- an environment that changes how the interpreter starts (``PYTHONPROFILEIMPORTTIME``,
  ``PYTHONDEVMODE``, ``PYTHONWARNINGS``… any ``PYTHON*`` variable but ``PYTHONPATH``; the
  locale's ``LANG`` and ``LC_*``);
- a module no template imports;
- every start when ``TOOLMESH_TEST_FORK=0`` is set — the whole suite then starts each process
  as a new interpreter, as it did before, for comparison or suspicion.

Tests that are about starting itself (what a start imports, the console script, installs from
the docs, whole deployments in ``tests/e2e``) start real interpreters by their own means.

The template is ``python -m tests.forkserver SOCKET MODULE...``: it imports the modules, says
``ready``, and answers each connection on its Unix socket — a JSON request and three file
descriptors (the child's stdin, stdout, stderr) — with ``pid N``, then ``exit CODE`` when that
child ends. It ends when the test worker that started it closes its stdin.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import io
import json
import os
import re
import runpy
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the kinds of children, and what each kind's template imports before it forks: toolmesh's
#: commands with what ``toolmesh serve`` imports before it is ready (not the MCP SDK, which
#: toolmesh loads at its first MCP request: a child must load it as a real one would); the MCP
#: test servers with the SDK's server
TEMPLATES: tuple[tuple[str, ...], ...] = (
    ("toolmesh.cli.main", "toolmesh.cli.serve", "toolmesh.runtime", "toolmesh.gateway.server",
     "toolmesh.agent.service", "toolmesh.prompt.defaults", "toolmesh.telemetry.exposition",
     "toolmesh.config.store.sqlite", "toolmesh.dialogs.sqlite", "tests.fork_probe"),
    ("tests.mcp.servers", "tests.mcp.callback_servers", "tests.agent.arg_servers"),
)
#: the modules a child may run as ``__main__`` when forked, and the template it is forked from
#: (tests.fork_probe is tests/test_forkserver.py's)
RUNS = {"toolmesh.cli.main": 0, "tests.fork_probe": 0, "tests.mcp.servers": 1,
        "tests.mcp.callback_servers": 1, "tests.agent.arg_servers": 1}
PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
_HEADER = struct.Struct("!I")


def _interpreter_variables(env: dict[str, str]) -> dict[str, str]:
    """The variables that shape an interpreter's start, which a fork inherits unchanged: the
    ``PYTHON*`` ones but ``PYTHONPATH``, and the locale's (the standard streams' encoding)."""
    return {k: v for k, v in env.items()
            if (k.startswith("PYTHON") and k != "PYTHONPATH") or k == "LANG"
            or k.startswith("LC_")}


# ---------------------------------------------------------------------------------- the client


class ForkedProcess:
    """A child forked from a template: what :class:`asyncio.subprocess.Process` offers."""

    def __init__(self, pid: int, control: asyncio.StreamReader, control_writer: asyncio.StreamWriter,
                 stdin: asyncio.StreamWriter | None, stdout: asyncio.StreamReader | None,
                 stderr: asyncio.StreamReader | None) -> None:
        self.pid = pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self._control_writer = control_writer
        self._exited = asyncio.ensure_future(self._await_exit(control))

    async def _await_exit(self, control: asyncio.StreamReader) -> int:
        line = await control.readline()
        self._control_writer.close()
        # the template answers "exit CODE"; no answer: the template itself is gone
        self.returncode = int(line.split()[1]) if line.startswith(b"exit ") else -signal.SIGKILL
        if self.stdin is not None and not self.stdin.is_closing():
            self.stdin.close()  # nothing reads it any more
        return self.returncode

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def send_signal(self, sig: int) -> None:
        if self.returncode is not None:
            raise ProcessLookupError(self.pid)
        os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def communicate(self, input: bytes | None = None) -> tuple[bytes | None, bytes | None]:
        async def feed() -> None:
            if self.stdin is None:
                return
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                if input:
                    self.stdin.write(input)
                    await self.stdin.drain()
                self.stdin.close()

        async def read(stream: asyncio.StreamReader | None) -> bytes | None:
            return None if stream is None else await stream.read()

        _, out, err = await asyncio.gather(feed(), read(self.stdout), read(self.stderr))
        await self.wait()
        return out, err


@dataclass
class _Template:
    """One template process of this test worker."""

    modules: tuple[str, ...]
    python: str = sys.executable
    process: subprocess.Popen[bytes] | None = None
    socket_path: str = ""
    variables: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def started(self, env: dict[str, str]) -> _Template:
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self._start(env)
        return self

    def _start(self, env: dict[str, str]) -> None:
        folder = tempfile.mkdtemp(prefix="tm-fork-")
        self.socket_path = os.path.join(folder, "socket")
        self.variables = _interpreter_variables(env)
        root = Path(__file__).resolve().parent.parent
        self.process = subprocess.Popen(
            [self.python, "-m", "tests.forkserver", self.socket_path, *self.modules],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=root)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != b"ready":
            self.process.kill()
            raise RuntimeError(f"the fork template for {self.modules[0]} did not start: {line!r}")
        atexit.register(self._stop)

    def _stop(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            self.process.stdin.close()  # its lifeline: it ends when this closes
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)


_templates = [_Template(modules) for modules in TEMPLATES]
#: the console scripts' templates, by interpreter (started empty: they import on demand)
_script_templates: dict[str, _Template] = {}
_script_templates_lock = threading.Lock()
#: a pip console script's line naming its module: ``from trustgraph.cli.show_config import main``
_ENTRY = re.compile(r"^from ([\w.]+) import \w+$", re.MULTILINE)


def forking() -> bool:
    """Whether children are forked from templates (not ``TOOLMESH_TEST_FORK=0``)."""
    return os.environ.get("TOOLMESH_TEST_FORK", "1") != "0"


async def spawn(module: str, *args: str, env: dict[str, str], cwd: Path | str | None = None,
                stdin: int | None = None, stdout: int | None = None, stderr: int | None = None,
                start_new_session: bool = False) -> Any:
    """``python -m module args`` as a child process: forked from a template where it can be
    (see the module's docstring), else a new interpreter. Returns a
    :class:`asyncio.subprocess.Process` or a :class:`ForkedProcess`, which behave alike."""
    template = _templates[RUNS[module]] if module in RUNS else None
    if template is None or not forking():
        return await _exec(module, args, env, cwd, stdin, stdout, stderr, start_new_session)
    started = await asyncio.to_thread(template.started, env)
    if _interpreter_variables(env) != started.variables:
        return await _exec(module, args, env, cwd, stdin, stdout, stderr, start_new_session)
    return await _fork(started, module, args, env, cwd, stdin, stdout, stderr, start_new_session)


async def spawn_script(script: Path | str, *args: str, env: dict[str, str] | None = None,
                       cwd: Path | str | None = None, stdin: int | None = None,
                       stdout: int | None = None, stderr: int | None = None) -> Any:
    """A console script run as ``SCRIPT ARGS`` would run it (its ``#!`` interpreter, the
    script's folder first on the import path): forked from that interpreter's template where it
    can be (see the module's docstring), else executed. Returns what :func:`spawn` does."""
    script = str(script)
    env = dict(os.environ) if env is None else env
    with open(script, "rb") as f:
        head = f.read(4096).decode(errors="replace")
    python = head[2:].splitlines()[0].strip() if head.startswith("#!") else ""
    entry = _ENTRY.search(head)
    if forking() and entry is not None and os.path.basename(python).startswith("python"):
        with _script_templates_lock:
            template = _script_templates.setdefault(python, _Template((), python=python))
        started = await asyncio.to_thread(template.started, env)
        if _interpreter_variables(env) == started.variables:
            return await _fork(started, entry.group(1), args, env, cwd, stdin, stdout, stderr,
                               False, script=script)
    return await asyncio.create_subprocess_exec(
        script, *args, env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr)


async def _exec(module: str, args: Sequence[str], env: dict[str, str], cwd: Path | str | None,
                stdin: int | None, stdout: int | None, stderr: int | None,
                start_new_session: bool) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, *args, env=env, cwd=cwd, stdin=stdin, stdout=stdout,
        stderr=stderr, start_new_session=start_new_session)


async def _fork(template: _Template, module: str, args: Sequence[str], env: dict[str, str],
                cwd: Path | str | None, stdin: int | None, stdout: int | None,
                stderr: int | None, start_new_session: bool, script: str | None = None
                ) -> ForkedProcess:
    loop = asyncio.get_running_loop()
    ours: list[int] = []  # our ends of the pipes
    theirs: list[int] = []  # the child's standard streams, sent to the template
    for number, how in enumerate((stdin, stdout, stderr)):
        if how == PIPE:
            read_end, write_end = os.pipe()
            ours.append(write_end if number == 0 else read_end)
            theirs.append(read_end if number == 0 else write_end)
        elif how == DEVNULL:
            ours.append(-1)
            theirs.append(os.open(os.devnull, os.O_RDWR))
        else:  # inherited, as a new interpreter would
            ours.append(-1)
            theirs.append(os.dup(number))
    request = json.dumps({"module": module, "script": script, "args": list(args), "env": env,
                          "cwd": str(cwd or os.getcwd()), "session": start_new_session}).encode()
    control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        control.connect(template.socket_path)
        socket.send_fds(control, [_HEADER.pack(len(request)) + request], theirs)
        answer = b""
        while not answer.endswith(b"\n"):  # "pid N\n": the fork is done at once
            # a byte at a time: a child that ends at once has its "exit" line right behind
            chunk = control.recv(1)
            if not chunk:
                raise RuntimeError(f"the fork template for {module} closed without a child")
            answer += chunk
    except BaseException:
        control.close()
        for fd in ours:
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    pid = int(answer.split()[1])
    control.setblocking(False)
    reader, writer = await asyncio.open_unix_connection(sock=control)
    streams: list[Any] = [None, None, None]
    for number, fd in enumerate(ours):
        if fd < 0:
            continue
        if number == 0:
            transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()),
                os.fdopen(fd, "wb", 0))
            streams[0] = asyncio.StreamWriter(transport, protocol, None, loop)
        else:
            stream = asyncio.StreamReader(limit=2 ** 16)
            await loop.connect_read_pipe(lambda s=stream: asyncio.StreamReaderProtocol(s),
                                         os.fdopen(fd, "rb", 0))
            streams[number] = stream
    return ForkedProcess(pid, reader, writer, *streams)


# -------------------------------------------------------------------------------- the template


def serve(socket_path: str, modules: Sequence[str]) -> None:
    """Import ``modules``, then fork a child for each request on ``socket_path`` until stdin
    closes."""
    for name in modules:
        importlib.import_module(name)
    # the import path a child starts from: ours without what `-m` and PYTHONPATH added
    added = {os.getcwd(), *os.environ.get("PYTHONPATH", "").split(os.pathsep)}
    base = [p for p in sys.path[1:] if p not in added]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "lifeline")
    waiting: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, its connection)
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "lifeline":  # the test worker is gone
                return
            if key.data == "accept":
                connection, _ = listener.accept()
                request, fds = _receive(connection)
                if request["script"] is not None and request["module"] not in sys.modules:
                    # kept for the next child; one that fails to import fails in the child
                    # again, where the script's own import reports it
                    with contextlib.suppress(BaseException):
                        importlib.import_module(request["module"])
                if threading.active_count() != 1:  # a fork would copy a thread's locks
                    raise RuntimeError("the fork template started a thread")
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    for fd in (listener.fileno(), connection.fileno(),
                               *(c.fileno() for _, c in waiting.values()), *waiting):
                        with contextlib.suppress(OSError):
                            os.close(fd)
                    _child(request, fds, base)  # never returns
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                waiting[pidfd] = (pid, connection)
                selector.register(pidfd, selectors.EVENT_READ, "exit")
                with contextlib.suppress(OSError):
                    connection.sendall(f"pid {pid}\n".encode())
            else:  # a child ended
                pidfd = key.fd
                pid, connection = waiting.pop(pidfd)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):
                    connection.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
                connection.close()


def _receive(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack_from(data)[0]:
        more = connection.recv(1 << 16)
        if not more:
            raise RuntimeError("a fork request was cut short")
        data += more
    return json.loads(data[_HEADER.size:]), fds


def _child(request: dict[str, Any], fds: list[int], base: list[str]) -> None:
    """In the forked child: become ``python -m MODULE ARGS`` as started by the test, run it,
    and end as the interpreter would."""
    code = 1
    try:
        if request["session"]:
            os.setsid()
        for number, fd in enumerate(fds):
            os.dup2(fd, number)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()  # the C library read TZ once, in the template
        paths = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        script = request["script"]
        # `python SCRIPT` puts the script's folder first, `python -m` the working folder
        sys.path[:] = [os.path.dirname(script) if script else os.getcwd(), *paths, *base]
        importlib.invalidate_caches()  # files written since the template started
        _new_standard_streams(unbuffered=bool(request["env"].get("PYTHONUNBUFFERED")))
        if script:
            # the script's own package is imported again, as in a new interpreter: its modules
            # may read the environment as they load (trustgraph-cli's read TRUSTGRAPH_TOKEN);
            # what the template keeps warm is the other packages (requests, aiohttp…)
            top = request["module"].split(".")[0]
            for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
                del sys.modules[name]
            sys.argv = [script, *request["args"]]
            code = _run(lambda: runpy.run_path(script, run_name="__main__"))
        else:
            sys.argv = [request["module"], *request["args"]]
            # as under `python -m`, the module runs as __main__ only, not also under its name
            sys.modules.pop(request["module"], None)
            code = _run(lambda: runpy.run_module(request["module"], run_name="__main__",
                                                 alter_sys=True))
    finally:
        os._exit(code)


def _new_standard_streams(*, unbuffered: bool) -> None:
    """``sys.stdin``/``stdout``/``stderr`` on the new descriptors 0–2, made as the interpreter
    makes them at start: with the template's encodings and error handlers (it started with the
    same locale and ``PYTHON*`` variables), buffered as a pipe's or a terminal's are."""
    def writer(fd: int, like: io.TextIOWrapper, line_buffering: bool) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "w", closefd=False)
        return io.TextIOWrapper(raw if unbuffered else io.BufferedWriter(raw),
                                encoding=like.encoding, errors=like.errors,
                                line_buffering=line_buffering and not unbuffered,
                                write_through=unbuffered)

    was_in, was_out, was_err = sys.__stdin__, sys.__stdout__, sys.__stderr__
    assert was_in is not None and was_out is not None and was_err is not None
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=was_in.encoding,
        errors=was_in.errors)
    sys.stdout = sys.__stdout__ = writer(1, was_out, os.isatty(1))  # type: ignore[arg-type]
    sys.stderr = sys.__stderr__ = writer(2, was_err, True)  # type: ignore[arg-type]


def _run(main: Callable[[], object]) -> int:
    """Run ``main`` (a module or script as ``__main__``); what the interpreter would exit
    with."""
    interrupted = False
    try:
        main()
        code = 0
    except SystemExit as e:
        code = _exit_code(e.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        interrupted, code = True, 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    # what an interpreter does on its way out: join its threads, run atexit, flush
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    if interrupted:  # as Python does: die of the SIGINT, so the parent sees it
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
