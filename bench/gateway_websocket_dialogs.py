"""10,000 agent dialogs at once over WebSockets, on one ``toolmesh serve`` with the scripted LLM.

Starts ``toolmesh serve`` (embedded bus, SQLite store, the built-in scripted LLM, the joke
service it runs) as its own process, opens ``--connections`` WebSockets and sends
``--dialogs`` agent requests spread over them, all at once (each socket stays within the
gateway's 64 requests in flight). Every dialog asks for a joke: two ReAct steps, a tool call
to the joke service, streamed. Reports the wall time until every dialog has ended, dialogs/s,
the server's peak RSS (``VmHWM``) and its RSS before the dialogs (the floor: an idle serve).

    python bench/gateway_websocket_dialogs.py [--dialogs N] [--connections N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import aiohttp
from processes import start_serve
from report import Figure, add_arguments, emit

QUESTION = "Tell me a joke about food"


def memory_kib(pid: int, field: str) -> int:
    """``VmRSS`` or ``VmHWM`` (peak) of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for pid {pid}")


async def socket_dialogs(http: aiohttp.ClientSession, url: str, n: int, index: int,
                         start: asyncio.Barrier) -> tuple[int, int]:
    """Connect, wait until every socket has (``start``), run ``n`` dialogs: (answered,
    failed)."""
    async with http.ws_connect(url + "api/v1/socket", max_msg_size=0) as ws:
        await ws.send_json({"type": "auth", "token": ""})
        auth = await ws.receive_json()
        if auth.get("type") != "auth-ok":
            raise RuntimeError(f"socket {index} not admitted: {auth}")
        await start.wait()
        for i in range(n):
            await ws.send_json({"id": f"{index}-{i}", "service": "agent", "flow": "default",
                                "request": {"question": QUESTION, "streaming": True}})
        answered = failed = 0
        while answered + failed < n:
            frame = await ws.receive_json()
            if not frame.get("complete"):
                continue
            response = frame.get("response") or {}
            if frame.get("error") or response.get("error") or \
                    response.get("message_type") != "answer":
                failed += 1
            else:
                answered += 1
        return answered, failed


async def measure(dialogs: int, connections: int) -> list[Figure]:
    per_socket = [dialogs // connections + (1 if i < dialogs % connections else 0)
                  for i in range(connections)]
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = await start_serve(Path(tmp))
        try:
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as http:
                # a warm-up dialog: every part has loaded the config and its tools
                await socket_dialogs(http, url, 1, -1, asyncio.Barrier(1))
                idle = memory_kib(proc.pid, "VmRSS")
                # the clock starts once every socket is connected and admitted
                barrier = asyncio.Barrier(connections + 1)
                runs = [asyncio.create_task(socket_dialogs(http, url, n, i, barrier))
                        for i, n in enumerate(per_socket)]
                await barrier.wait()
                start = time.perf_counter()
                results = await asyncio.gather(*runs)
                wall = time.perf_counter() - start
                peak = memory_kib(proc.pid, "VmHWM")
        finally:
            proc.terminate()
            await proc.wait()
    answered = sum(a for a, _ in results)
    failed = sum(f for _, f in results)
    name = "gateway_websocket_dialogs"
    note = f"{dialogs:,} dialogs on {connections} sockets, {failed} failed"
    return [
        Figure(bench=name, path=f"{dialogs:,} concurrent WebSocket agent dialogs, wall time",
               value=wall, unit="s", note=note),
        Figure(bench=name, path="WebSocket agent dialogs/s (all at once)",
               value=answered / wall, unit="dialogs/s", better="higher", note=note),
        Figure(bench=name, path=f"toolmesh serve peak RSS, {dialogs:,} dialogs at once",
               value=peak / 1024, unit="MiB", floor=idle / 1024,
               floor_what="RSS of the same serve, idle"),
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogs", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=200)
    add_arguments(parser)
    args = parser.parse_args()
    dialogs = 2_000 if args.quick else args.dialogs
    connections = min(args.connections, dialogs)
    if dialogs / connections > 64:
        parser.error("at most 64 dialogs per socket: the gateway's in-flight limit")
    emit(await measure(dialogs, connections), args)


if __name__ == "__main__":
    asyncio.run(main())
