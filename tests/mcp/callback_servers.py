"""MCP servers that call back into the client while a tool runs — progress notifications and
sampling requests — written with the ``mcp`` SDK and run as separate processes.

    python -m tests.mcp.callback_servers --transport stdio|streamable-http [--port N]

An HTTP server prints ``listening on URL`` to stderr once it accepts connections; it is
started, stopped and killed with the runner of :mod:`tests.mcp.servers`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from tests.mcp.servers import ServerProcess, child_env, running_server, serve_asgi

MODULE = "tests.mcp.callback_servers"


def build_server(name: str = "callbacks") -> MCPServer:
    seen: dict[str, Any] = {"cancelled": []}
    any_cancelled = anyio.Event()
    mcp = MCPServer(name, log_level="WARNING")

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
            "args": ["-m", MODULE, "--transport", "stdio"],
            "env": child_env(), **extra}


def running_http_server(timeout: float = 30) -> AbstractAsyncContextManager[ServerProcess]:
    """This server over streamable HTTP, in a child process, for a ``with`` block."""
    return running_server("streamable-http", name="callbacks", timeout=timeout, module=MODULE)


def main() -> None:
    parser = argparse.ArgumentParser(description="an MCP server that sends progress and "
                                                 "asks for sampling")
    parser.add_argument("--transport", choices=["streamable-http", "stdio"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--name", default="callbacks")
    args = parser.parse_args()
    if args.transport == "stdio":
        anyio.run(build_server(args.name).run_stdio_async)
    else:
        asyncio.run(serve_asgi(build_server(args.name).streamable_http_app(), args.port))


if __name__ == "__main__":
    main()
