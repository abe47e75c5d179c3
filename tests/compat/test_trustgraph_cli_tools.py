"""trustgraph-cli's own tool and MCP-tool commands against a running `toolmesh serve`.

trustgraph-cli exits 0 even when it fails (it prints ``Exception: ...`` to stdout), so these
tests judge it by what it prints and by what toolmesh then holds (`toolmesh config get`).
toolmesh validates tools on put, and the real tg-set-tool stores ``description: null`` when
``--description`` is not given, so the valid cases here always pass one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cli.test_tool_cli import tables
from tests.compat.test_trustgraph_cli_config import tg
from tests.forkserver import spawn_script
from tests.processes import run_toolmesh
from tests.servers import Served, keys, stored, stored_raw, toolmesh_serve

SECRET = "s3cr3t-T0KEN-value"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with toolmesh_serve(tmp_path) as s:
        yield s


async def tg_raw(bin: Path, command: str, *args: str) -> str:
    """stdout of a trustgraph-cli command that is expected to fail (it still exits 0)."""
    proc = await spawn_script(
        bin / command, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return out.decode()


async def test_the_real_mcp_tool_commands(tg_bin: Path, served: Served) -> None:
    u = ["-u", served.url]
    out = await tg(tg_bin, "tg-set-mcp-tool", "-i", "weather", "-r", "get_weather",
                   "--tool-url", "https://mcp.example/mcp", "--auth-token", SECRET, *u)
    assert out == ""
    assert stored_raw(served, "mcp/weather") == {
        "remote-name": "get_weather", "url": "https://mcp.example/mcp", "auth-token": SECRET}
    assert (await stored(served, "mcp/weather"))["auth-token"] == "***"  # reads are masked
    assert await tg(tg_bin, "tg-set-mcp-tool", "--id", "calc", "--tool-url", "http://h:9/mcp",
                    *u) == ""
    assert await stored(served, "mcp/calc") == {"remote-name": "calc", "url": "http://h:9/mcp"}
    # an entry written by toolmesh's own CLI reads back in the real one
    code, _, err = await run_toolmesh("mcp", "set", "events", "--url", "http://h/sse",
                                      "--transport", "sse", "-u", served.url)
    assert code == 0, err

    out = await tg(tg_bin, "tg-show-mcp-tools", *u)
    assert SECRET not in out
    assert tables(out) == [
        {"id": "calc", "remote-name": "calc", "url": "http://h:9/mcp", "auth": "No"},
        {"id": "events", "remote-name": "events", "url": "http://h/sse", "auth": "No"},
        {"id": "weather", "remote-name": "get_weather", "url": "https://mcp.example/mcp",
         "auth": "Yes (configured)"}]

    out = await tg(tg_bin, "tg-delete-mcp-tool", "--id", "weather", *u)
    assert out.strip() == "MCP tool 'weather' deleted successfully."
    assert await keys(served, "mcp") == ["calc", "events"]
    out = await tg(tg_bin, "tg-delete-mcp-tool", "--id", "weather", *u)
    assert out.strip() == "MCP tool 'weather' not found."


async def test_the_real_tool_commands(tg_bin: Path, served: Served) -> None:
    u = ["-u", served.url]
    out = await tg(tg_bin, "tg-set-tool", "--id", "calc", "--name", "calculate",
                   "--type", "mcp-tool", "--description", "Do math", "--mcp-tool", "calculator",
                   "--argument", "expression:string:Math expr", "n:number:A number",
                   "--group", "math", "admin", "--state", "done", "--applicable-states", "*", *u)
    assert out.strip() == "Tool set."
    assert await stored(served, "tool/calc") == {
        "name": "calculate", "description": "Do math", "type": "mcp-tool",
        "mcp-tool": "calculator",
        "arguments": [{"name": "expression", "type": "string", "description": "Math expr"},
                      {"name": "n", "type": "number", "description": "A number"}],
        "group": ["math", "admin"], "state": "done", "applicable-states": ["*"]}
    await tg(tg_bin, "tg-set-tool", "--id", "sum", "--name", "summarise", "--type", "prompt",
             "--description", "Summarise a text", "--template", "summary",
             "--argument", "text:string:The text", *u)
    # TrustGraph's query types call services toolmesh does not run: the put is refused, and
    # the real client shows why (it still exits 0, as it does on any failure)
    out = await tg_raw(tg_bin, "tg-set-tool", "--id", "ask", "--name", "ask_kb",
                       "--type", "knowledge-query", "--description", "Ask the knowledge base",
                       "--collection", "docs", *u)
    assert out.startswith("Exception: config-error: invalid field 'type' of tool/ask: tool type "
                          "'knowledge-query' is not available in this deployment"), out
    # a tool-service tool, which the real tg-set-tool cannot write, written by toolmesh's
    code, _, err = await run_toolmesh("config", "put", "tool/tell-joke", "--url", served.url,
                                      stdin_text=json.dumps({
                                          "type": "tool-service", "name": "tell-joke",
                                          "description": "Tell a joke", "service": "joke-service",
                                          "style": "pun"}))
    assert code == 0, err

    out = await tg(tg_bin, "tg-show-tools", *u)
    assert tables(out) == [
        {"id": "calc", "name": "calculate", "description": "Do math", "type": "mcp-tool",
         "mcp-tool": "calculator", "groups": "math, admin", "next state": "done",
         "available in": "all states"},
        {"id": "sum", "name": "summarise", "description": "Summarise a text", "type": "prompt",
         "template": "summary", "arg 0": "text: string\nThe text"},
        {"id": "tell-joke", "name": "tell-joke", "description": "Tell a joke",
         "type": "tool-service"}]

    out = await tg(tg_bin, "tg-delete-tool", "--id", "calc", *u)
    assert out.strip() == "Tool 'calc' deleted successfully."
    assert await keys(served, "tool") == ["sum", "tell-joke"]
    out = await tg(tg_bin, "tg-delete-tool", "--id", "calc", *u)
    assert out.strip() == "Tool configuration for 'calc' not found."


async def test_the_real_client_shows_toolmesh_config_errors(tg_bin: Path, served: Served) -> None:
    u = ["-u", served.url]
    # without --description the real tg-set-tool stores "description": null
    out = await tg_raw(tg_bin, "tg-set-tool", "--id", "bad", "--name", "bad",
                       "--type", "text-completion", *u)
    assert out.strip() == ("Exception: config-error: invalid field 'description' of tool/bad: "
                           "is required")
    out = await tg_raw(tg_bin, "tg-set-tool", "--id", "bad", "--name", "bad",
                       "--description", "d", "--type", "prompt", *u)
    assert out.strip() == ("Exception: config-error: invalid field 'template' of tool/bad: "
                           "is required")
    out = await tg_raw(tg_bin, "tg-set-mcp-tool", "--id", "bad", "--tool-url", "ftp://h/", *u)
    assert out.strip().startswith("Exception: config-error: invalid field 'url' of mcp/bad")
    assert await keys(served, "tool") == [] and await keys(served, "mcp") == []
