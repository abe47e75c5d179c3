"""An MCP tool call, one at a time: toolmesh's pooled session and the mcp-tool service beside
the MCP SDK's own client and a plain HTTP round trip, against servers in their own processes.

Servers, all on loopback:

* the MCP SDK's streamable-HTTP server (``MCPServer`` on uvicorn, written here: ``--serve``),
  once per way it can answer a POST: ``sse`` (an SSE stream, the SDK's default), ``json``
  (``json_response=True``: one ``application/json`` body) and ``stateless``
  (``stateless_http=True``, JSON too: no session). Each also answers ``POST /floor`` from a
  bare ASGI handler with a fixed JSON-RPC result, and ``GET /stats`` with the TCP connections
  it accepted. Its one tool, ``echo``, is ``async``: a plain ``def`` tool runs in a worker
  thread, a hop more per call;
* ``@modelcontextprotocol/server-everything`` (Node, the TypeScript SDK) over streamable HTTP
  (SSE answers), and a bare Node HTTP server as its floor; skipped with ``--no-node`` or
  without Node. Taken from where the tests install it, else run with ``npx``.

Ways of calling, one figure each, in ms per call:

* ``floor``: a plain HTTP POST round trip with the httpx2 client the SDK uses (keep-alive),
  and with aiohttp;
* ``sdk reused``: ``ClientSession.call_tool`` on one long-lived session with the SDK's own
  HTTP client, as toolmesh had it before it set up its own (``toolmesh/mcp/transports.py``);
* ``toolmesh pool``: :meth:`SessionPool.call_tool` on its pooled session;
* ``sdk fresh``: a new transport, session and ``initialize`` for every call (the reference
  implementation's way); and a new ``SessionPool`` per call (what a reconnect costs);
* ``mcp-tool service``: :meth:`McpToolClient.invoke` → memory bus → ``McpToolService`` → its
  pool → the server, and back.

Each figure's floor is the httpx2 POST to the same kind of server (uvicorn or Node) in the same
run. Rounds alternate between the ways and a figure is its median round, since the machine's
pace drifts. Notes give the CPU a call costs the client process (everything in this process:
the SDK, the bus, the service) and the server process (``/proc``, Linux), and the TCP
connections opened per call (counted by the SDK server). The servers' sockets are made with
``IPPROTO_TCP``, so asyncio sets ``TCP_NODELAY`` on them: without it every answer on a
reused connection waits for the client's delayed ACK (40 ms).

    python bench/mcp_call.py [--quick] [--json PATH] [--calls N] [--rounds N] [--no-node]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp  # noqa: E402
import httpx2  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from report import Figure, add_arguments, emit  # noqa: E402

from toolmesh import connect  # noqa: E402
from toolmesh.bus.memory import new_memory_url  # noqa: E402
from toolmesh.config.service import ConfigService  # noqa: E402
from toolmesh.config.store import open_store  # noqa: E402
from toolmesh.mcp import McpServer, McpToolClient, McpToolService, SessionPool  # noqa: E402

BENCH = "mcp_call"
MODES = ("sse", "json", "stateless")
#: the JSON-RPC answer the floors send, as big as the echo call's
FLOOR_REPLY = (b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],'
               b'"isError":false}}')
FLOOR_BODY = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"text": "hello"}}}
#: the version tests/mcp/everything.py pins, and where it installs it
EVERYTHING = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
EVERYTHING_ENTRY = (Path.home() / ".cache" / "toolmesh-tests" / f"npm-everything-{EVERYTHING_VERSION}"
                    / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
                    / "index.js")
#: Node's ``listen(port)`` binds every interface; preloaded, this makes it bind loopback only
LOOPBACK_JS = """
const net = require("node:net"); const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if ((typeof args[0] === "number" || /^\\d+$/.test(String(args[0]))) && typeof args[1] !== "string")
    args.splice(1, 0, "127.0.0.1");
  return listen.apply(this, args);
};
"""
NODE_FLOOR_JS = """
const reply = process.argv[1];
require("node:http").createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(200, {"content-type": "application/json",
                        "content-length": Buffer.byteLength(reply)});
    res.end(reply);
  });
}).listen(0, "127.0.0.1", function () {
  console.error(`listening on http://127.0.0.1:${this.address().port}/floor`);
});
"""

Call = Callable[[], Awaitable[object]]


# --------------------------------------------------------------------------------------------
# The SDK server (a child process: python bench/mcp_call.py --serve MODE)
# --------------------------------------------------------------------------------------------

def serve(mode: str) -> None:
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    mcp = MCPServer("bench", log_level="WARNING")

    @mcp.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    app = mcp.streamable_http_app(json_response=mode != "sse", stateless_http=mode == "stateless")
    peers: set[tuple[Any, ...]] = set()

    async def answer(send: Any, body: bytes) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def bench_app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            peers.add(tuple(scope.get("client") or ()))
            if scope["path"] == "/floor":
                while (await receive()).get("more_body"):
                    pass
                return await answer(send, FLOOR_REPLY)
            if scope["path"] == "/stats":
                return await answer(send, json.dumps({"connections": len(peers)}).encode())
        await app(scope, receive, send)

    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr,
                  flush=True)

    config = uvicorn.Config(bench_app, log_level="warning", lifespan="on")
    asyncio.run(Server(config).serve(sockets=[sock]))


# --------------------------------------------------------------------------------------------
# Starting the servers (in the bench process)
# --------------------------------------------------------------------------------------------

@dataclass
class Child:
    """A server process: where it listens, and its pid for its CPU time."""

    process: asyncio.subprocess.Process
    url: str
    lines: list[str] = field(default_factory=list)
    drain: asyncio.Task[None] | None = None

    @property
    def base(self) -> str:
        return self.url.rsplit("/", 1)[0]

    async def stop(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)  # npx: its node child too
            try:
                await asyncio.wait_for(self.process.wait(), 10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                await self.process.wait()
        if self.drain is not None:
            await self.drain


async def start(command: list[str], ready: re.Pattern[str], url: Callable[[re.Match[str]], str],
                *, env: dict[str, str] | None = None, timeout: float = 120) -> Child:
    """Run ``command`` in its own process group; return once a stderr line matches ``ready``."""
    process = await asyncio.create_subprocess_exec(
        *command, env={**os.environ, **(env or {})}, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        start_new_session=True)
    assert process.stderr is not None
    child = Child(process, "")
    try:
        async with asyncio.timeout(timeout):
            while raw := await process.stderr.readline():
                child.lines.append(raw.decode(errors="replace"))
                if match := ready.search(child.lines[-1]):
                    child.url = url(match)
                    break
            else:
                raise RuntimeError(f"{command[0]} exited before listening:\n"
                                   + "".join(child.lines[-20:]))
    except BaseException:
        await child.stop()
        raise

    async def drain() -> None:  # keep reading: a full pipe would block the server
        assert process.stderr is not None
        while raw := await process.stderr.readline():
            child.lines.append(raw.decode(errors="replace"))
    child.drain = asyncio.create_task(drain())
    return child


async def start_sdk_server(mode: str) -> Child:
    return await start([sys.executable, __file__, "--serve", mode],
                       re.compile(r"listening on (\S+)"), lambda m: m.group(1))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def start_node_servers(tmp: str) -> tuple[Child, Child] | str:
    """server-everything over streamable HTTP and the Node floor, or why not."""
    node, npx = shutil.which("node"), shutil.which("npx")
    if node is None:
        return "no `node` on PATH"
    preload = os.path.join(tmp, "loopback.cjs")
    Path(preload).write_text(LOOPBACK_JS)
    if EVERYTHING_ENTRY.exists():
        command = [node, str(EVERYTHING_ENTRY), "streamableHttp"]
    elif npx is not None:
        command = [npx, "--yes", f"{EVERYTHING}@{EVERYTHING_VERSION}", "streamableHttp"]
    else:
        return f"{EVERYTHING} is not installed and there is no `npx`"
    port = _free_port()
    everything, floor = await asyncio.gather(
        start(command, re.compile(rf"listening on port ({port})"),
              lambda m: f"http://127.0.0.1:{m.group(1)}/mcp",
              env={"PORT": str(port), "NODE_OPTIONS": f"--require {preload}"}),
        start([node, "-e", NODE_FLOOR_JS, FLOOR_REPLY.decode()],
              re.compile(r"listening on (\S+)"), lambda m: m.group(1)),
        return_exceptions=True)
    if isinstance(everything, BaseException) or isinstance(floor, BaseException):
        for child in (everything, floor):
            if isinstance(child, Child):
                await child.stop()
        failure = everything if isinstance(everything, BaseException) else floor
        return f"the Node servers did not start: {failure}"
    return everything, floor


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------

@dataclass
class Way:
    """One way of calling, and what its rounds measured."""

    name: str
    call: Call
    calls: int
    #: the server process it talks to (for its CPU time)
    server: Child | None = None
    #: whether that server counts its TCP connections (``GET /stats``: the SDK servers)
    counted: bool = False
    rounds: list[float] = field(default_factory=list)  # seconds per call, one per round
    done: int = 0
    client_cpu: float = 0.0
    server_cpu: float | None = 0.0
    connections: int = 0

    @property
    def ms(self) -> float:
        return statistics.median(self.rounds) * 1e3

    def note(self) -> str:
        cpu = f"client CPU {self.client_cpu / self.done * 1e3:.2f} ms"
        if self.server_cpu is not None and self.server is not None:
            cpu += f" + server CPU {self.server_cpu / self.done * 1e3:.2f} ms"
        text = f"{cpu} per call"
        if self.counted:
            text += f"; {self.connections / self.done:.2f} TCP connections per call"
        return text


async def connections(stats: httpx2.AsyncClient, server: Child) -> int:
    return (await stats.get(f"{server.base}/stats")).json()["connections"]


async def run_round(way: Way, stats: httpx2.AsyncClient) -> None:
    """``way.calls`` calls, one at a time; add what they cost to ``way``."""
    server = way.server
    opened = await connections(stats, server) if server and way.counted else 0
    server_cpu = cpu_seconds(server.process.pid) if server else None
    cpu, start = time.process_time(), time.perf_counter()
    for _ in range(way.calls):
        await way.call()
    way.rounds.append((time.perf_counter() - start) / way.calls)
    way.client_cpu += time.process_time() - cpu
    way.done += way.calls
    after = cpu_seconds(server.process.pid) if server else None
    if way.server_cpu is not None and server_cpu is not None and after is not None:
        way.server_cpu += after - server_cpu
    else:
        way.server_cpu = None
    if server and way.counted:
        way.connections += await connections(stats, server) - opened


@contextlib.asynccontextmanager
async def sdk_session(url: str) -> AsyncIterator[ClientSession]:
    """An initialized SDK session with the SDK's own HTTP client."""
    async with streamable_http_client(url) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


@dataclass
class Clients:
    """Everything that calls: the HTTP clients of the floors, an SDK session per server, a
    toolmesh session pool, an mcp-tool service client, and the mcp item of each server."""

    http: httpx2.AsyncClient
    aio: aiohttp.ClientSession
    sessions: dict[str, ClientSession]
    pool: SessionPool
    service: McpToolClient
    items: dict[str, McpServer]


def build_ways(servers: dict[str, Child], node: tuple[Child, Child] | None, clients: Clients,
               calls: int) -> dict[str, Way]:
    echo = {"text": "hello"}
    sse = servers["sse"]

    def floor(server: Child) -> Call:
        async def call() -> object:
            return (await clients.http.post(f"{server.base}/floor", json=FLOOR_BODY)).json()
        return call

    async def aio_floor() -> object:
        async with clients.aio.post(f"{sse.base}/floor", json=FLOOR_BODY) as response:
            return await response.json()

    def sdk(kind: str, arguments: dict[str, Any]) -> Call:
        session = clients.sessions[kind]
        return lambda: session.call_tool("echo", arguments)

    def pooled(kind: str, arguments: dict[str, Any]) -> Call:
        item = clients.items[kind]
        return lambda: clients.pool.call_tool(item, arguments, timeout=30)

    def service(kind: str, arguments: dict[str, Any]) -> Call:
        id = clients.items[kind].id
        return lambda: clients.service.invoke(id, arguments, timeout=30)

    async def fresh() -> object:
        async with sdk_session(sse.url) as session:
            return await session.call_tool("echo", echo)

    async def fresh_pool() -> object:
        pool = SessionPool()
        try:
            return await pool.call_tool(clients.items["sse"], echo, timeout=30)
        finally:
            await pool.close()

    ways = [Way("floor: httpx2", floor(sse), calls, sse, True),
            Way("floor: aiohttp", aio_floor, calls, sse, True)]
    for kind, server in servers.items():
        ways += [Way(f"sdk: {kind}", sdk(kind, echo), calls, server, True),
                 Way(f"pool: {kind}", pooled(kind, echo), calls, server, True)]
        if kind != "stateless":
            ways.append(Way(f"service: {kind}", service(kind, echo), calls, server, True))
    ways += [Way("fresh: sse", fresh, max(calls // 10, 5), sse, True),
             Way("fresh pool: sse", fresh_pool, max(calls // 10, 5), sse, True)]
    if node is not None:
        everything, node_floor = node
        message = {"message": "hello"}
        ways += [Way("floor: node", floor(node_floor), calls, node_floor),
                 Way("sdk: everything", sdk("everything", message), calls, everything),
                 Way("pool: everything", pooled("everything", message), calls, everything),
                 Way("service: everything", service("everything", message), calls, everything)]
    return {way.name: way for way in ways}


ANSWERS = {"sse": "SDK server, SSE answers", "json": "SDK server, JSON answers",
           "stateless": "SDK server, stateless, JSON answers",
           "everything": "server-everything (Node), SSE answers"}
FLOOR_WHAT = "HTTP POST round trip, httpx2 keep-alive, same uvicorn"
NODE_FLOOR_WHAT = "HTTP POST round trip, httpx2 keep-alive, bare Node server"


def report(ways: dict[str, Way]) -> list[Figure]:
    floor = ways["floor: httpx2"]
    node_floor = ways.get("floor: node")

    def figure(path: str, way: Way, *, node: bool = False, beside: str = "") -> Figure:
        base = node_floor if node and node_floor is not None else floor
        return Figure(bench=BENCH, path=path, value=way.ms, unit="ms", floor=base.ms,
                      floor_what=NODE_FLOOR_WHAT if node else FLOOR_WHAT,
                      note=way.note() + beside)

    figures = [
        Figure(bench=BENCH, path="HTTP POST round trip, httpx2 (the floor)", value=floor.ms,
               unit="ms", note=floor.note()),
        figure("HTTP POST round trip, aiohttp", ways["floor: aiohttp"]),
    ]
    for kind in ANSWERS:
        if f"sdk: {kind}" not in ways:
            continue
        node = kind == "everything"
        sdk, pool = ways[f"sdk: {kind}"], ways[f"pool: {kind}"]
        figures += [
            figure(f"MCP call, SDK session reused, SDK's HTTP client; {ANSWERS[kind]}", sdk,
                   node=node),
            figure(f"MCP call, toolmesh SessionPool; {ANSWERS[kind]}", pool, node=node,
                   beside=f"; {pool.ms / sdk.ms:.2f}× SDK session reused"),
        ]
        if f"service: {kind}" in ways:
            service = ways[f"service: {kind}"]
            figures.append(figure(f"MCP call via mcp-tool service, memory bus; {ANSWERS[kind]}",
                                  service, node=node,
                                  beside=f"; {service.ms / pool.ms:.2f}× SessionPool"))
        if kind == "sse":
            fresh, fresh_pool = ways["fresh: sse"], ways["fresh pool: sse"]
            figures += [
                figure(f"MCP call, SDK fresh session per call; {ANSWERS[kind]}", fresh,
                       beside=f"; {fresh.ms / pool.ms:.1f}× SessionPool"),
                figure("MCP call, a new SessionPool per call (connect, initialize, list tools, "
                       f"call, close); {ANSWERS[kind]}", fresh_pool,
                       beside=f"; {fresh_pool.ms / fresh.ms:.2f}× SDK fresh session"),
            ]
    if node_floor is not None:
        figures.append(figure("HTTP POST round trip to a bare Node server, httpx2 (the Node "
                              "floor)", node_floor))
    return figures


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.add_argument("--calls", type=int, help="calls per way and round (default 200, "
                        "--quick 40; a fresh session per call: a tenth)")
    parser.add_argument("--rounds", type=int, help="rounds (default 7, --quick 5)")
    parser.add_argument("--no-node", action="store_true",
                        help="skip server-everything and the Node floor")
    parser.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
    else:
        asyncio.run(main(args))


async def main(args: argparse.Namespace) -> None:
    calls = args.calls or (40 if args.quick else 200)
    rounds = args.rounds or (5 if args.quick else 7)
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    config_queues = {"request_queue": f"request:tg:{topic}-config",
                     "response_queue": f"response:tg:{topic}-config",
                     "push_queue": f"notify:tg:{topic}-config"}
    queues = {"request_queue": f"request:tg:{topic}-mcp",
              "response_queue": f"response:tg:{topic}-mcp"}
    with tempfile.TemporaryDirectory() as tmp:
        servers = dict(zip(MODES, await asyncio.gather(*(start_sdk_server(m) for m in MODES))))
        node = None if args.no_node else await start_node_servers(tmp)
        if isinstance(node, str):
            print(f"server-everything skipped: {node}", file=sys.stderr)
            node = None
        urls = {kind: server.url for kind, server in servers.items()}
        if node is not None:
            urls["everything"] = node[0].url
        items = {kind: McpServer.from_config(f"echo-{kind}", {"url": url, "remote-name": "echo"})
                 for kind, url in urls.items()}
        store = await open_store(os.path.join(tmp, "config.db"))
        await store.put("default", [("mcp", item.id, json.dumps({"url": item.url,
                                                                 "remote-name": "echo"}))
                                    for item in items.values()])
        bus = await connect(new_memory_url())
        pool = SessionPool()
        try:
            async with AsyncExitStack() as stack:
                enter = stack.enter_async_context
                stats = await enter(httpx2.AsyncClient())
                await enter(ConfigService(bus, store, **config_queues))
                await enter(McpToolService(bus, **queues, config_queues=config_queues))
                clients = Clients(
                    http=await enter(httpx2.AsyncClient()),
                    aio=await enter(aiohttp.ClientSession()),
                    sessions={kind: await enter(sdk_session(url)) for kind, url in urls.items()},
                    pool=pool, service=await enter(McpToolClient(bus, **queues)), items=items)
                ways = build_ways(servers, node, clients, calls)
                for way in ways.values():  # warm up every path (sessions, tool lists)
                    for _ in range(min(way.calls, 10)):
                        await way.call()
                # Interleaved rounds, median per way: the machine's pace drifts during a run.
                for _ in range(rounds):
                    for way in ways.values():
                        await run_round(way, stats)
        finally:
            await pool.close()
            await bus.close()
            await store.close()
            await asyncio.gather(*(child.stop() for child in [*servers.values(), *(node or ())]))
    emit(report(ways), args)


if __name__ == "__main__":
    cli()
