"""A ``tools/call`` of the joke service through the gateway's MCP endpoint (``/mcp``), beside
the same call through the gateway's REST route (the floor) and beside the MCP SDK's own server
(``MCPServer``, FastMCP before mcp 2) serving the same function (issue 33: ≤ 1.5× REST, faster
than ``MCPServer``).

Servers, each its own process on a free loopback port, on uvloop:

* ``toolmesh serve`` (embedded: memory bus, SQLite store, the joke service announcing
  ``tell-joke``), as a user starts it. ``/mcp``: the MCP SDK's streamable-HTTP session manager
  behind the gateway → the agent's ``tool-calls`` service → the joke service, over the bus.
  REST: ``POST /api/v1/flow/default/service/tool-service`` → the joke service, over the bus;
* ``MCPServer`` on uvicorn (``python bench/mcp_endpoint.py --serve-mcpserver sse|json``), with
  one ``async`` tool ``tell-joke`` that calls the joke service's own function
  (``toolmesh.tools.services.joke.tell_joke``) with what the joke service gives it (user
  ``trustgraph``, style ``pun``), its result plain text content as toolmesh's
  (``structured_output=False``). Twice: with the SDK's defaults (stateful sessions, each POST
  answered as an SSE stream), the one the target names, and for scale with
  ``json_response=True`` (each POST answered with one JSON body).

Ways of calling, sequential, ``tell-joke`` with ``{"topic": "food"}``:

* ``REST`` (the floor): httpx2 — the HTTP client the MCP SDK uses — POSTing the JSON body on a
  keep-alive connection;
* ``/mcp`` and ``MCPServer``: ``ClientSession.call_tool`` of the mcp SDK's client over
  streamable HTTP, one session per server kept open for the whole run;
* ``/mcp bare`` and ``MCPServer bare``: the same JSON-RPC ``tools/call`` as one httpx2 POST on
  a session opened by hand (its ``mcp-session-id``), the answer read whole: the server's part
  of a call, with little of the client's.

The 1.5× goal is measured with the same HTTP client on both sides (``/mcp bare`` against
``REST``): the same call, through /mcp and through REST. Through the SDK's client the figure
is shown too, but that client alone spends more CPU on a call than a whole REST call takes.

Rounds alternate between the ways (the machine's pace drifts); each round makes ``--calls``
calls per way after a warm-up, and a figure is the median of the rounds' p50s (means in the
notes). Notes also give each way's CPU per call in the server process (``/proc``, Linux) and in
this one (the client): a sequential call costs about their sum. ``--profile PATH`` runs
``toolmesh serve`` under cProfile (stats written to PATH when it exits).

    python bench/mcp_endpoint.py [--quick] [--json PATH] [--calls N] [--rounds N]
                                 [--profile PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx2  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from processes import start_serve  # noqa: E402
from report import Figure, add_arguments, emit  # noqa: E402

BENCH = "mcp_endpoint"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "joke"
TOOL, ARGUMENTS = "tell-joke", {"topic": "food"}
#: what the REST route is given: the joke service's descriptor, its config, the arguments
REST_CALL = {"id": "joke-service", "config": {"style": "pun"}, "arguments": ARGUMENTS,
             "streaming": False}
#: what every way must answer (the joke for "food" in the pun style)
EXPECTED = "Why did the tomato blush? It saw the salad dressing."
ACCEPT = {"Accept": "application/json, text/event-stream"}

Call = Callable[[], Awaitable[None]]


# --------------------------------------------------------------------------------------------
# The MCPServer child (python bench/mcp_endpoint.py --serve-mcpserver sse|json)
# --------------------------------------------------------------------------------------------

def serve_mcpserver(mode: str) -> None:
    """``MCPServer`` serving tell-joke on uvicorn, on a free loopback port (printed); ``mode``
    ``sse`` (the SDK's default: each POST answered as an SSE stream) or ``json``
    (``json_response=True``: one JSON body)."""
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    from toolmesh.tools.services.joke import tell_joke

    mcp = MCPServer("bench-joke", log_level="WARNING")

    @mcp.tool(name=TOOL, description="Tell a joke on a given topic", structured_output=False)
    async def tell(topic: str) -> str:
        return tell_joke("trustgraph", {"style": "pun"}, {"topic": topic})

    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP (as
    # uvicorn's own sockets do when it binds a host and port itself)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp",
                  file=sys.stderr, flush=True)

    app = mcp.streamable_http_app(json_response=mode == "json")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(Server(config).serve(sockets=[sock]))


@dataclass
class Child:
    process: asyncio.subprocess.Process
    url: str = ""
    lines: list[str] = field(default_factory=list)
    drain: asyncio.Task[None] | None = None

    async def stop(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                await self.process.wait()
        if self.drain is not None:
            await self.drain


async def start_mcpserver(mode: str, timeout: float = 60) -> Child:
    process = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve-mcpserver", mode, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert process.stderr is not None
    child = Child(process)
    try:
        async with asyncio.timeout(timeout):
            while raw := await process.stderr.readline():
                child.lines.append(raw.decode(errors="replace"))
                if m := re.search(r"listening on (\S+)", child.lines[-1]):
                    child.url = m.group(1)
                    break
            else:
                raise RuntimeError("the MCPServer child exited before listening:\n"
                                   + "".join(child.lines[-20:]))
    except BaseException:
        await child.stop()
        raise

    async def drain() -> None:  # a full pipe would block the server
        assert process.stderr is not None
        while raw := await process.stderr.readline():
            child.lines.append(raw.decode(errors="replace"))
    child.drain = asyncio.create_task(drain())
    return child


# --------------------------------------------------------------------------------------------
# The ways of calling
# --------------------------------------------------------------------------------------------

async def sdk_session(stack: AsyncExitStack, url: str) -> ClientSession:
    http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
    read, write, *_ = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


def sdk_call(session: ClientSession) -> Call:
    async def call() -> None:
        result = await session.call_tool(TOOL, ARGUMENTS)
        if result.is_error or EXPECTED not in result.content[0].text:  # type: ignore[union-attr]
            raise RuntimeError(f"tools/call answered {result}")
    return call


async def bare_session(stack: AsyncExitStack, url: str) -> Call:
    """A session opened by hand (initialize, initialized); a ``tools/call`` as one POST."""
    http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
    init = await http.post(url, headers=ACCEPT, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}})
    init.raise_for_status()
    headers = {**ACCEPT, "mcp-protocol-version": "2025-11-25"}
    if sid := init.headers.get("mcp-session-id"):
        headers["mcp-session-id"] = sid
    (await http.post(url, headers=headers, json={
        "jsonrpc": "2.0", "method": "notifications/initialized"})).raise_for_status()
    ids = iter(range(1, 1 << 62))
    expected = EXPECTED.encode()

    async def call() -> None:
        r = await http.post(url, headers=headers, json={
            "jsonrpc": "2.0", "id": next(ids), "method": "tools/call",
            "params": {"name": TOOL, "arguments": ARGUMENTS}})
        if r.status_code != 200 or expected not in r.content or b'"isError":true' in r.content:
            raise RuntimeError(f"tools/call: HTTP {r.status_code}: {r.text[:300]}")
    return call


async def rest_call(stack: AsyncExitStack, base: str) -> Call:
    http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
    url = base + "api/v1/flow/default/service/tool-service"

    async def call() -> None:
        r = await http.post(url, json=REST_CALL)
        if r.status_code != 200 or EXPECTED not in r.json().get("response", ""):
            raise RuntimeError(f"REST tool-service: HTTP {r.status_code}: {r.text[:300]}")
    return call


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


@dataclass
class Way:
    name: str
    call: Call
    server_pid: int
    p50: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    server_cpu: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)

    async def round(self, calls: int) -> None:
        samples = []
        cpu0, own0 = cpu_seconds(self.server_pid), time.process_time()
        for _ in range(calls):
            t = time.perf_counter()
            await self.call()
            samples.append(time.perf_counter() - t)
        self.server_cpu.append((cpu_seconds(self.server_pid) - cpu0) / calls)
        self.client_cpu.append((time.process_time() - own0) / calls)
        self.p50.append(statistics.median(samples))
        self.mean.append(statistics.fmean(samples))

    def ms(self, what: str = "p50") -> float:
        return statistics.median(getattr(self, what)) * 1e3

    def cpu_note(self) -> str:
        return (f"CPU per call: server {statistics.median(self.server_cpu) * 1e3:.2f} ms, "
                f"client {statistics.median(self.client_cpu) * 1e3:.2f} ms")


async def offered(session: ClientSession, timeout: float = 30) -> None:
    """Wait until the endpoint lists tell-joke (the joke service announces itself)."""
    async with asyncio.timeout(timeout):
        while TOOL not in {t.name for t in (await session.list_tools()).tools}:
            await asyncio.sleep(0.1)


async def measure(calls: int, rounds: int, warmup: int,
                  profile: Path | None) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="toolmesh-bench-mcp-endpoint-") as tmp:
        proc, base = await start_serve(Path(tmp), profile=profile)
        children: list[Child] = []
        try:
            for mode in ("sse", "json"):
                children.append(await start_mcpserver(mode))
            sse, json_ = children
            async with AsyncExitStack() as stack:
                http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
                r = await http.post(base + "api/v1/config", json={
                    "operation": "put", "values": [
                        {"type": "tool-service", "key": "joke-service",
                         "value": (EXAMPLES / "joke-service.json").read_text()}]})
                r.raise_for_status()
                toolmesh = await sdk_session(stack, base + "mcp")
                await offered(toolmesh)
                ways = {
                    "rest": Way("REST", await rest_call(stack, base), proc.pid),
                    "mcp": Way("/mcp", sdk_call(toolmesh), proc.pid),
                    "sdk": Way("MCPServer", sdk_call(await sdk_session(stack, sse.url)),
                               sse.process.pid),
                    "sdk_json": Way("MCPServer json", sdk_call(
                        await sdk_session(stack, json_.url)), json_.process.pid),
                    "mcp_bare": Way("/mcp bare", await bare_session(stack, base + "mcp"),
                                    proc.pid),
                    "sdk_bare": Way("MCPServer bare", await bare_session(stack, sse.url),
                                    sse.process.pid),
                }
                order = list(ways.values())
                for way in order:  # warm up (and check that every way answers the joke)
                    for _ in range(warmup):
                        await way.call()
                for i in range(rounds):
                    for way in (order if i % 2 == 0 else order[::-1]):
                        await way.round(calls)
                    print(f"round {i + 1}/{rounds}: " + ", ".join(
                        f"{w.name} {w.p50[-1] * 1e3:.2f} ms" for w in order), flush=True)
        finally:
            for child in children:
                await child.stop()
            proc.send_signal(signal.SIGINT)  # a clean exit writes the profile
            await proc.wait()
    return figures(ways, calls=calls, rounds=rounds)


def figures(ways: dict[str, Way], *, calls: int, rounds: int) -> list[Figure]:
    rest, mcp, sdk = ways["rest"], ways["mcp"], ways["sdk"]
    rest_what = "REST tool-service call, same serve"
    sdk_what = "MCPServer on uvicorn (SSE answers, the default), same SDK client"

    def per_round(way: Way, vs: Way) -> str:
        ratios = [a / b for a, b in zip(way.p50, vs.p50, strict=True)]
        return (f"per round {statistics.median(ratios):.2f}× (range {min(ratios):.2f}–"
                f"{max(ratios):.2f})")

    def note(way: Way, vs: Way | None = None) -> str:
        text = f"mean {way.ms('mean'):.2f} ms"
        if vs is not None:
            text += f" ({way.ms('mean') / vs.ms('mean'):.2f}× {vs.name}'s)"
        return f"{text}; {way.cpu_note()}"

    return [
        Figure(bench=BENCH, path=f"floor: tools/call's equivalent through the gateway's REST "
               f"route (tool-service, joke), httpx2 — p50 of {calls} sequential calls, median of "
               f"{rounds} alternating rounds", value=rest.ms(), unit="ms", note=note(rest)),
        Figure(bench=BENCH, path="tools/call tell-joke through /mcp, one httpx2 POST a call "
               "(the client REST's floor uses), session opened once",
               value=ways["mcp_bare"].ms(), unit="ms", floor=rest.ms(), floor_what=rest_what,
               target="≤ 1.5× floor",
               note=f"{per_round(ways['mcp_bare'], rest)}; {note(ways['mcp_bare'], rest)}"),
        Figure(bench=BENCH, path="tools/call tell-joke through /mcp, mcp SDK client, session "
               "kept open — the SDK client's own CPU is most of the difference",
               value=mcp.ms(), unit="ms", floor=rest.ms(), floor_what=rest_what,
               note=f"{per_round(mcp, rest)}; {note(mcp, rest)}"),
        Figure(bench=BENCH, path="tools/call tell-joke through /mcp, against MCPServer",
               value=mcp.ms(), unit="ms", floor=sdk.ms(), floor_what=sdk_what,
               target="< 1× floor", note=f"{per_round(mcp, sdk)}; means "
               f"{mcp.ms('mean') / sdk.ms('mean'):.2f}×"),
        Figure(bench=BENCH, path="for scale: tools/call tell-joke on MCPServer (uvicorn, SSE "
               "answers: the default), mcp SDK client", value=sdk.ms(), unit="ms",
               floor=rest.ms(), floor_what=rest_what, note=note(sdk, rest)),
        Figure(bench=BENCH, path="for scale: tools/call tell-joke on MCPServer with "
               "json_response=True, mcp SDK client", value=ways["sdk_json"].ms(), unit="ms",
               floor=rest.ms(), floor_what=rest_what, note=note(ways["sdk_json"], rest)),
        Figure(bench=BENCH, path="for scale: tools/call tell-joke on MCPServer (SSE answers), "
               "one bare httpx2 POST a call", value=ways["sdk_bare"].ms(), unit="ms",
               floor=rest.ms(), floor_what=rest_what, note=note(ways["sdk_bare"], rest)),
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500, help="calls per way and round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", type=Path, help="run toolmesh serve under cProfile, "
                        "writing its stats to PATH")
    add_arguments(parser)
    args = parser.parse_args()
    calls, rounds = (200, 7) if args.quick else (args.calls, args.rounds)
    emit(await measure(calls, rounds, warmup=100, profile=args.profile), args)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-mcpserver"]:
        serve_mcpserver(sys.argv[2])
    else:
        asyncio.run(main())
