"""Real MCP servers for the tests, written with the ``mcp`` SDK (``MCPServer``), each run as a
separate process, plus helpers to start, stop, kill and restart them.

    python -m tests.mcp.servers --transport streamable-http|sse|stdio [--port N] [--name NAME]

An HTTP server prints ``listening on URL`` to stderr once its socket accepts connections (the
URL is the MCP endpoint: ``.../mcp`` or ``.../sse``). The ``stats`` tool tells a test what the
server saw: how many ``initialize`` handshakes (one per session), which tool calls were
cancelled, how many TCP connections it accepted, its pid. ``--json-response`` answers each
streamable-HTTP POST with ``application/json`` instead of an SSE stream, ``--stateless`` keeps
no session either (the SDK's ``json_response`` and ``stateless_http``).

:func:`start_server` and :func:`running_server` run the other test servers' modules too
(``module=``): any that takes ``--transport``, ``--port`` and ``--name`` (and ``--token`` when
one is given) and serves HTTP with :func:`serve_asgi`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp_types import ToolAnnotations
from pydantic import BaseModel

from tests.forkserver import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: the (address, port) of every client connection an HTTP server of this process accepted
PEERS: set[tuple[Any, ...]] = set()

#: a 1x1 transparent PNG
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000100e221bc33000000"
                    "0049454e44ae426082")


# --------------------------------------------------------------------------------------------
# The server (runs in the child process)
# --------------------------------------------------------------------------------------------

class Person(BaseModel):
    name: str


def ask_name() -> Elicit[Person]:
    return Elicit("What is your name?", Person)


def build_server(name: str, *, place: str = "town") -> MCPServer:
    """The test MCP server; ``place`` names the argument of ``forecast`` (a server whose
    schema changes between restarts is started with another one)."""
    seen: dict[str, Any] = {"initializations": 0, "cancel_notifications": 0, "cancelled": [],
                            "calls": 0}
    cancelled = anyio.Event()

    async def observe(ctx: Any, call_next: Any) -> Any:
        # Counting handshakes here (not in a tool) sees every session the server accepts.
        if ctx.method == "initialize":
            seen["initializations"] += 1
        elif ctx.method == "notifications/cancelled":
            seen["cancel_notifications"] += 1
        elif ctx.method == "tools/call":
            seen["calls"] += 1
        return await call_next(ctx)

    mcp = MCPServer(name, log_level="WARNING", middleware=[observe])

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @mcp.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool()
    def hello() -> str:
        """Say which server answers."""
        return f"hello from {name}"

    @mcp.tool()
    def weather(city: str, days: int = 1) -> str:
        """The weather forecast for a city."""
        return f"{city}: sunny for {days} day{'s' if days != 1 else ''}"

    @mcp.tool()
    def fail() -> str:
        """Always fails (an isError result)."""
        raise ToolError("the weather station is on fire")

    @mcp.tool()
    def image() -> Image:
        """A tiny PNG."""
        return Image(data=PNG, format="png")

    @mcp.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer; records when the client cancels it."""
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            seen["cancelled"].append(seconds)
            cancelled.set()
            raise
        return f"slept {seconds:g} s"

    groups: dict[str, tuple[list[int], anyio.Event]] = {}

    @mcp.tool()
    async def together(group: str, n: int, timeout: float = 10.0) -> int:
        """Answer once ``n`` calls of ``group`` are in flight at once (or ``timeout`` passed):
        for tests whose calls must overlap however loaded the machine is. How many came."""
        arrived, everyone = groups.setdefault(group, ([0], anyio.Event()))
        arrived[0] += 1
        if arrived[0] >= n:
            everyone.set()
        with anyio.move_on_after(timeout):
            await everyone.wait()
        return arrived[0]

    @mcp.tool()
    async def wait_cancelled(timeout: float = 10.0) -> int:
        """How many calls were cancelled, once at least one was (or the timeout passed)."""
        with anyio.move_on_after(timeout):
            await cancelled.wait()
        return len(seen["cancelled"])

    @mcp.tool()
    def meta(ctx: Context) -> str:
        """The _meta the call came with, as JSON (tests: what a caller tells the server)."""
        found = ctx.request_context.meta
        if found is None:
            return "{}"
        return json.dumps(found if isinstance(found, dict)
                          else found.model_dump(mode="json", by_alias=True, exclude_none=True))

    @mcp.tool()
    def whoami(ctx: Context) -> str:
        """The Authorization header of this request ('' when there is none)."""
        headers = ctx.headers or {}
        return headers.get("authorization", "")

    @mcp.tool()
    def whoami_digest(ctx: Context) -> str:
        """SHA-256 of the Authorization header: proves which token came without echoing it
        (the SDK debug-logs results, and a test scanning logs for the token must not see it
        because the server repeated it)."""
        header = (ctx.headers or {}).get("authorization", "")
        return hashlib.sha256(header.encode()).hexdigest()

    def forecast_town(town: str) -> str:
        return f"forecast for {town}: rain"

    def forecast_city(city: str) -> str:
        return f"forecast for {city}: rain"

    mcp.add_tool(forecast_town if place == "town" else forecast_city, name="forecast",
                 description=f"The forecast for a {place}.")

    @mcp.tool()
    def large(size: int) -> str:
        """A text of ``size`` characters (for the message-size limits)."""
        return "x" * size

    @mcp.tool()
    async def register(ctx: Context, tool: str) -> str:
        """Add a tool named ``tool`` and tell the client (notifications/tools/list_changed)."""
        def added(word: str) -> str:
            return f"{tool}: {word}"
        mcp.add_tool(added, name=tool, description=f"The tool {tool!r}, added at run time.")
        await ctx.session.send_tool_list_changed()
        return f"added {tool}"

    # a question for the person: asked during the call on 2025-11-25, as an
    # InputRequiredResult retry on 2026-07-28 (the SDK picks by the revision agreed)
    @mcp.tool()
    def greet(who: Annotated[Person, Resolve(ask_name)]) -> str:
        """Greet the user by the name they give."""
        return f"hello {who.name}"

    # tools that say what they do (MCP annotations): the agent's approval policy reads them
    @mcp.tool(annotations=ToolAnnotations(destructiveHint=True, readOnlyHint=False))
    def remove(path: str) -> str:
        """Remove a file (it says so: destructiveHint)."""
        seen.setdefault("removed", []).append(path)
        return f"removed {path}"

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def look(path: str) -> str:
        """Look at a file (it says so: readOnlyHint)."""
        return f"{path} looks fine"

    @mcp.tool()
    def stats() -> dict[str, Any]:
        """What this server has seen."""
        return {**seen, "pid": os.getpid(), "name": name, "connections": len(PEERS)}

    return mcp


def _bind(port: int) -> socket.socket:
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say so, and without it
    # an answer on a reused connection waits for the client's delayed ACK (40 ms a request).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    # A restarted server takes the port of the one that was killed (TIME_WAIT must not block).
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def require_token(app: Any, token: str) -> Any:
    """ASGI middleware: answer 401 to any HTTP request without ``Authorization: Bearer TOKEN``."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


def count_connections(app: Any) -> Any:
    """ASGI middleware: note each HTTP request's client address in :data:`PEERS`."""

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("client"):
            PEERS.add(tuple(scope["client"]))
        await app(scope, receive, send)

    return counted


async def serve_http(name: str, transport: str, port: int, token: str | None, *,
                     place: str = "town", json_response: bool = False,
                     stateless: bool = False) -> None:
    mcp = build_server(name, place=place)
    app = mcp.sse_app() if transport == "sse" else mcp.streamable_http_app(
        json_response=json_response, stateless_http=stateless)
    if token:
        app = require_token(app, token)
    await serve_asgi(count_connections(app), port, "/sse" if transport == "sse" else "/mcp")


async def serve_asgi(app: Any, port: int, path: str = "/mcp") -> None:
    """Serve the MCP server's ASGI ``app`` on 127.0.0.1:``port`` (0: a free port); print
    ``listening on URL`` (``path`` on that address) to stderr once it accepts connections."""
    import uvicorn

    sock = _bind(port)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}{path}"

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            print(f"listening on {url}", file=sys.stderr, flush=True)

    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await Server(config).serve(sockets=[sock])


async def serve_mute(port: int) -> None:
    """Accept TCP connections and never answer (a hung server: every request waits)."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # keep it open; read nothing, answer nothing

    server = await asyncio.start_server(hold, sock=_bind(port))
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    print(f"listening on {url}", file=sys.stderr, flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description="a test MCP server")
    parser.add_argument("--transport", choices=["streamable-http", "sse", "stdio"],
                        default="streamable-http")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--name", default="test-server")
    parser.add_argument("--token", help="refuse HTTP requests without this bearer token")
    parser.add_argument("--place", choices=["town", "city"], default="town",
                        help="the argument of the forecast tool (its schema changes with it)")
    parser.add_argument("--mute", action="store_true",
                        help="HTTP: accept connections and never answer")
    parser.add_argument("--stubborn", action="store_true",
                        help="stdio: ignore SIGTERM and stay alive after stdin closes")
    parser.add_argument("--json-response", action="store_true",
                        help="streamable HTTP: answer POSTs with application/json, not SSE")
    parser.add_argument("--stateless", action="store_true",
                        help="streamable HTTP: no session (implies --json-response)")
    args = parser.parse_args()
    if args.transport == "stdio":
        if args.stubborn:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        anyio.run(build_server(args.name, place=args.place).run_stdio_async)
        if args.stubborn:
            signal.pause()  # only SIGKILL ends us now
    elif args.mute:
        asyncio.run(serve_mute(args.port))
    else:
        asyncio.run(serve_http(args.name, args.transport, args.port, args.token,
                               place=args.place, json_response=args.json_response or args.stateless,
                               stateless=args.stateless))


# --------------------------------------------------------------------------------------------
# Helpers for the tests (run in the test process)
# --------------------------------------------------------------------------------------------

def child_env() -> dict[str, str]:
    """What a server child needs besides the default environment: the tests importable."""
    return {"PYTHONPATH": os.pathsep.join(p for p in [ROOT, os.environ.get("PYTHONPATH", "")] if p)}


def stdio_item(name: str = "stdio-server", *, stubborn: bool = False) -> dict[str, Any]:
    """An ``mcp`` config item that runs this module as a stdio server."""
    return {"transport": "stdio", "command": sys.executable,
            "args": ["-m", "tests.mcp.servers", "--transport", "stdio", "--name", name,
                     *(["--stubborn"] if stubborn else [])],
            "env": child_env()}


@dataclass
class ServerProcess:
    """One running HTTP test server."""

    transport: str
    name: str
    token: str | None
    port: int
    url: str
    process: asyncio.subprocess.Process
    stderr: list[str] = field(default_factory=list)
    args: tuple[str, ...] = ()
    module: str = "tests.mcp.servers"
    _drain: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    async def stop(self) -> None:
        """Terminate the server and wait for it to exit."""
        await self._end(signal.SIGTERM)

    async def kill(self) -> None:
        """Kill the server abruptly (no goodbye to its clients) and wait for it to be gone."""
        await self._end(signal.SIGKILL)

    async def restart(self, *, args: tuple[str, ...] | None = None) -> None:
        """Start a new server process on the same port (after :meth:`kill` or :meth:`stop`),
        with other command-line ``args`` if given (``("--place", "city")``)."""
        self.args = self.args if args is None else args
        fresh = await start_server(self.transport, port=self.port, name=self.name,
                                   token=self.token, args=self.args, module=self.module)
        self.process, self.url, self.stderr, self._drain = (
            fresh.process, fresh.url, fresh.stderr, fresh._drain)

    async def _end(self, sig: int) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)
            await asyncio.wait_for(self.process.wait(), 20)
        if self._drain is not None:
            await self._drain


async def _drain_stderr(stream: asyncio.StreamReader, lines: list[str]) -> None:
    # Keep reading so a chatty server never blocks on a full pipe.
    while raw := await stream.readline():
        lines.append(raw.decode(errors="replace"))


async def start_server(transport: str = "streamable-http", *, port: int = 0,
                       name: str = "test-server", token: str | None = None,
                       args: tuple[str, ...] = (), timeout: float = 30,
                       module: str = "tests.mcp.servers") -> ServerProcess:
    """Start an HTTP test server as a child process (``python -m module``: this module's
    server unless told otherwise); return once it says it is listening."""
    # forked from a template that imported the module (tests/forkserver.py): a new
    # interpreter would spend most of a second importing the MCP SDK's server
    proc = await spawn(
        module, "--transport", transport,
        "--port", str(port), "--name", name, *(["--token", token] if token else []), *args,
        env={**os.environ, **child_env()}, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(timeout):
            while True:
                raw = await proc.stderr.readline()
                if not raw:
                    await proc.wait()
                    raise RuntimeError(f"MCP test server exited before listening:\n{''.join(lines)}")
                lines.append(raw.decode(errors="replace"))
                if lines[-1].startswith("listening on "):
                    break
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    url = lines[-1].split("listening on ", 1)[1].strip()
    bound = int(url.split(":")[2].split("/")[0])
    drain = asyncio.create_task(_drain_stderr(proc.stderr, lines))
    return ServerProcess(transport, name, token, bound, url, proc, lines, args=args,
                         module=module, _drain=drain)


@contextlib.asynccontextmanager
async def running_server(transport: str = "streamable-http", *, name: str = "test-server",
                         token: str | None = None, args: tuple[str, ...] = (),
                         timeout: float = 30, module: str = "tests.mcp.servers"
                         ) -> AsyncIterator[ServerProcess]:
    """A test server (see :func:`start_server`) for the duration of a ``with`` block."""
    server = await start_server(transport, name=name, token=token, args=args, timeout=timeout,
                                module=module)
    try:
        yield server
    finally:
        await server.stop()


if __name__ == "__main__":
    main()
