"""MCP servers that call back into the client while a tool runs — progress notifications and
sampling requests — written with the ``mcp`` SDK and run as separate processes.

    python -m tests.mcp.callback_servers --transport stdio|streamable-http [--port N]

An HTTP server prints ``listening on URL`` to stderr once it accepts connections (as
:mod:`tests.mcp.servers` does, whose helpers this reuses).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from tests.mcp.servers import ServerProcess, _bind, _drain_stderr, child_env


def build_server() -> MCPServer:
    seen: dict[str, Any] = {"cancelled": []}
    any_cancelled = anyio.Event()
    mcp = MCPServer("callbacks", log_level="WARNING")

    @mcp.tool()
    async def count(ctx: Context, steps: int, interval: float) -> str:
        """Report progress ``steps`` times, ``interval`` seconds apart, then answer."""
        for step in range(1, steps + 1):
            await anyio.sleep(interval)
            await ctx.report_progress(step, steps, f"step {step}")
        return f"counted to {steps}"

    @mcp.tool()
    async def stall(ctx: Context, steps: int, interval: float) -> str:
        """Report progress ``steps`` times (forever when ``steps`` is 0), then go quiet;
        records when the client cancels it."""
        try:
            step = 0
            while not steps or step < steps:
                step += 1
                await anyio.sleep(interval)
                await ctx.report_progress(step, None, None)
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            seen["cancelled"].append(step)
            any_cancelled.set()
            raise
        return "unreachable"

    @mcp.tool()
    async def cancelled(wait: float = 0.0) -> list[int]:
        """The step each cancelled ``stall`` call had reached; waits up to ``wait`` seconds
        for there to be one (a cancel notification may still be on its way)."""
        with anyio.move_on_after(wait):
            await any_cancelled.wait()
        return seen["cancelled"]

    @mcp.tool()
    async def summarize(ctx: Context, text: str) -> str:
        """Ask the client's LLM (MCP sampling) to summarize ``text``."""
        try:
            result = await ctx.session.create_message(
                [mcp_types.SamplingMessage(role="user",
                                           content=mcp_types.TextContent(type="text", text=text))],
                max_tokens=100, system_prompt="You summarize in five words.",
                stop_sequences=["<END>"])
        except MCPError as e:  # the client's refusal, as the server sees it
            raise ToolError(f"sampling failed: {e}") from None
        content = result.content
        answer = content.text if isinstance(content, mcp_types.TextContent) else repr(content)
        return f"{answer!r} from {result.model} ({result.stop_reason})"

    return mcp


def stdio_item(**extra: Any) -> dict[str, Any]:
    """An ``mcp`` item that runs this module as a stdio server."""
    return {"transport": "stdio", "command": sys.executable,
            "args": ["-m", "tests.mcp.callback_servers", "--transport", "stdio"],
            "env": child_env(), **extra}


async def serve_http(port: int) -> None:
    import uvicorn

    sock = _bind(port)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            print(f"listening on {url}", file=sys.stderr, flush=True)

    config = uvicorn.Config(build_server().streamable_http_app(), log_level="warning",
                            lifespan="on")
    await Server(config).serve(sockets=[sock])


@contextlib.asynccontextmanager
async def running_http_server(timeout: float = 30) -> AsyncIterator[ServerProcess]:
    """This server over streamable HTTP, in a child process, for a ``with`` block."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.mcp.callback_servers", "--transport", "streamable-http",
        env={**os.environ, **child_env()}, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    lines: list[str] = []
    drain: asyncio.Task[None] | None = None
    try:
        async with asyncio.timeout(timeout):
            while not (lines and lines[-1].startswith("listening on ")):
                raw = await proc.stderr.readline()
                if not raw:
                    raise RuntimeError(f"the callback server exited:\n{''.join(lines)}")
                lines.append(raw.decode(errors="replace"))
        url = lines[-1].split("listening on ", 1)[1].strip()
        drain = asyncio.create_task(_drain_stderr(proc.stderr, lines))
        server = ServerProcess("streamable-http", "callbacks", None,
                               int(url.split(":")[2].split("/")[0]), url, proc, lines, drain)
        yield server
    finally:
        if proc.returncode is None:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 20)
        if drain is not None:
            await drain


def main() -> None:
    parser = argparse.ArgumentParser(description="an MCP server that sends progress and "
                                                 "asks for sampling")
    parser.add_argument("--transport", choices=["streamable-http", "stdio"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.transport == "stdio":
        anyio.run(build_server().run_stdio_async)
    else:
        asyncio.run(serve_http(args.port))


if __name__ == "__main__":
    main()
