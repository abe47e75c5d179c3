"""The real trustgraph-cli sees secrets as ``***`` (toolmesh's gateway masks them), and its own
read-then-put round trip keeps them working."""

from __future__ import annotations

from pathlib import Path

from tests.compat.test_trustgraph_cli_config import tg
from tests.mcp.servers import running_server
from tests.processes import run_toolmesh
from tests.servers import toolmesh_serve

TOKEN = "tg-cli-TOKEN-93ab1e"
KEY = "tg-cli-KEY-4c5d6e"


async def test_trustgraph_cli_reads_masked_secrets_and_round_trips_them(
        tg_bin: Path, tmp_path: Path) -> None:
    async with running_server("streamable-http", name="tg-guarded", token=TOKEN) as mcp, \
            toolmesh_serve(tmp_path) as served:
        u = ["-u", served.url]
        code, _, err = await run_toolmesh("mcp", "set", "w", "--url", f"{mcp.url}?key={KEY}",
                                          "-r", "echo", "--auth-token", TOKEN, *u)
        assert code == 0, err
        outputs = [await tg(tg_bin, "tg-show-config", *u),
                   await tg(tg_bin, "tg-get-config-item", "--type", "mcp", "--key", "w", *u),
                   await tg(tg_bin, "tg-show-mcp-tools", *u)]
        for out in outputs:
            assert TOKEN not in out and KEY not in out
        assert '"auth-token": "***"' in outputs[1] and "key=***" in outputs[1]

        # their read, then their put of what they read: the server still gets the token
        await tg(tg_bin, "tg-put-config-item", "--type", "mcp", "--key", "w", "--value",
                 outputs[1].strip(), *u)
        out = await tg(tg_bin, "tg-invoke-mcp-tool", "-n", "w", "-P", '{"text": "still in"}', *u)
        assert out.strip() == "still in"
