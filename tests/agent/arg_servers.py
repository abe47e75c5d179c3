"""An MCP server (``mcp`` SDK, streamable HTTP, its own process) for the argument tests: the
seed 002 bank tool and a trip planner with a nested schema. It records the raw ``arguments``
of every ``tools/call`` before the SDK parses them (no defaults filled in), so a test can
check that the server received exactly what the LLM wrote.

    python -m tests.agent.arg_servers [--port N]     # prints "listening on URL" to stderr

:func:`running` runs it with :func:`tests.mcp.servers.running_server`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

from tests.mcp.servers import running_server, serve_asgi

MODULE = "tests.agent.arg_servers"


class Traveler(BaseModel):
    name: str = Field(description="Full name")
    age: int | None = Field(None, ge=0, le=150)
    seat: Literal["window", "aisle"] | None = None


def build_server(name: str = "arg-server") -> MCPServer:
    calls: list[dict[str, Any]] = []

    async def record(ctx: Any, call_next: Any) -> Any:
        # ctx.params is the request as sent, before validation fills in defaults
        if ctx.method == "tools/call" and ctx.params.get("name") != "received":
            calls.append({"tool": ctx.params.get("name"),
                             "arguments": ctx.params.get("arguments")})
        return await call_next(ctx)

    mcp = MCPServer(name, log_level="WARNING", middleware=[record])

    @mcp.tool()
    def get_bank_balance(account_id: str, date: str | None = None) -> str:
        """Get bank account balance (the seed 002 example)."""
        return f"Balance of {account_id}{f' on {date}' if date else ''}: 1234.56 EUR"

    @mcp.tool()
    def plan_trip(travelers: Annotated[list[Traveler], Field(min_length=1,
                                                             description="Who travels")],
                  destination: str,
                  mode: Annotated[Literal["fast", "slow"], Field(description="How to travel")] = "fast",
                  nights: Annotated[int, Field(ge=1, le=30)] = 1) -> str:
        """Plan a trip."""
        return f"{len(travelers)} to {destination} ({mode}, {nights} nights)"

    @mcp.tool()
    def received() -> str:
        """Every tools/call this server received, with its raw arguments."""
        return json.dumps(calls)  # one text block, whatever the count

    return mcp


@contextlib.asynccontextmanager
async def running(timeout: float = 30) -> AsyncIterator[str]:
    """Run the server as a child process; yield its MCP URL."""
    async with running_server(name="arg-server", timeout=timeout, module=MODULE) as server:
        yield server.url


def main() -> None:
    parser = argparse.ArgumentParser(description="the argument tests' MCP server")
    parser.add_argument("--transport", choices=["streamable-http"], default="streamable-http")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--name", default="arg-server")
    args = parser.parse_args()
    asyncio.run(serve_asgi(build_server(args.name).streamable_http_app(), args.port))


if __name__ == "__main__":
    main()
