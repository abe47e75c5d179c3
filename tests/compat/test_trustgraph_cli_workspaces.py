"""Workspaces through the real trustgraph-cli: config written with ``-w ws2`` is what
``-w ws2`` dialogs and MCP calls use, and nothing of one workspace shows in another."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_agent_cli import JOKE
from tests.compat.test_trustgraph_cli_agent import invoke as invoke_agent
from tests.compat.test_trustgraph_cli_config import tg
from tests.compat.test_trustgraph_cli_tools import tg_raw
from tests.mcp.servers import running_server
from tests.processes import run_toolmesh
from tests.servers import toolmesh_serve
from toolmesh.llm.demo import HELP

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "joke"


async def test_dialogs_and_mcp_calls_use_their_own_workspace(tg_bin: Path, tmp_path: Path) -> None:
    async with running_server("streamable-http", name="tg-ws") as mcp, \
            toolmesh_serve(tmp_path) as served:
        u = ["-u", served.url]
        ws2 = [*u, "-w", "ws2"]
        # the joke tool only in ws2
        for item, file in [("tool-service/joke-service", "joke-service.json"),
                           ("tool/tell-joke", "tell-joke.json")]:
            type, key = item.split("/")
            out = await tg(tg_bin, "tg-put-config-item", "--type", type, "--key", key,
                           "--value", (EXAMPLES / file).read_text(), *ws2)
            assert out.strip() == f"Configuration item set: {item}"
        # serve's joke service announces itself in default: this workspace turns
        # announcements off, so only configured items count here
        out = await tg(tg_bin, "tg-put-config-item", "--type", "settings", "--key",
                       "workspace", "--value", '{"accept-announcements": false}', *u)
        assert out.strip() == "Configuration item set: settings/workspace"
        # the same MCP id in both, naming different remote tools
        assert await tg(tg_bin, "tg-set-mcp-tool", "--id", "tg-echo", "-r", "echo",
                        "--tool-url", mcp.url, *ws2) == ""
        assert await tg(tg_bin, "tg-set-mcp-tool", "--id", "tg-echo", "-r", "hello",
                        "--tool-url", mcp.url, *u) == ""
        assert await tg(tg_bin, "tg-set-mcp-tool", "--id", "ws2-only", "-r", "echo",
                        "--tool-url", mcp.url, *ws2) == ""

        in_ws2 = await invoke_agent(tg_bin, *ws2, "-q", "Tell me a joke about food")
        in_default = await invoke_agent(tg_bin, *u, "-q", "Tell me a joke about food")
        echo = await tg_raw(tg_bin, "tg-invoke-mcp-tool", *ws2, "-n", "tg-echo",
                            "-P", '{"text": "from ws2"}')
        hello = await tg_raw(tg_bin, "tg-invoke-mcp-tool", *u, "-n", "tg-echo")
        missing = await tg_raw(tg_bin, "tg-invoke-mcp-tool", *u, "-n", "ws2-only")
        # and toolmesh's own CLI
        ours = await run_toolmesh("agent", "Tell me a joke about food", *ws2)
        tools = await run_toolmesh("tools", *ws2)
    assert in_ws2.strip() == JOKE
    assert in_default.strip() == HELP  # the default workspace has no joke tool
    assert echo.strip() == "from ws2"
    assert hello.strip() == "hello from tg-ws"
    # the default workspace's error lists its own ids only, never ws2's
    assert "Exception: mcp-error:" in missing
    assert "in workspace 'default' (configured: tg-echo)" in missing, missing
    assert ours[:2] == (0, JOKE + "\n"), ours
    assert tools[0] == 0 and "tell-joke" in tools[1], tools
