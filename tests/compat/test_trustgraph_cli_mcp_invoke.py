"""The real `tg-invoke-mcp-tool` against `toolmesh serve` and a real MCP server."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.forkserver import spawn_script
from tests.mcp.servers import running_server
from tests.processes import run_toolmesh
from tests.servers import toolmesh_serve


async def test_tg_invoke_mcp_tool_with_parameters(tg_bin: Path, tmp_path: Path) -> None:
    async with running_server("streamable-http", name="tg-invoke") as mcp, \
            toolmesh_serve(tmp_path) as served:
        for id in ("weather", "add", "fail"):
            code, _, err = await run_toolmesh("mcp", "set", id, "--url", mcp.url, "-u", served.url)
            assert code == 0, err

        async def invoke(*args: str) -> str:
            proc = await spawn_script(
                tg_bin / "tg-invoke-mcp-tool", "-u", served.url, *args,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, _ = await asyncio.wait_for(proc.communicate(), 60)
            return out.decode()

        assert (await invoke("-n", "weather", "-P", '{"city": "Paris", "days": 2}')).strip() == \
            "Paris: sunny for 2 days"
        assert (await invoke("-n", "add", "-P", '{"a": 1, "b": 2}')).strip() == "3"
        out = await invoke("-n", "fail")
        assert "Exception: tool-error:" in out and "the weather station is on fire" in out
        out = await invoke("-n", "nope")
        assert "Exception: mcp-error:" in out and "'nope'" in out
