"""docs/clients.md as a reader runs it: every shell block, in order, against a real ``toolmesh
serve`` that requires a token (then one that does not), with the real MCP Inspector 2.12.0
from npm and the real trustgraph-cli 2.11.1 (tests/compat/tgcli.py's venv).

A block is marked with a comment just above it; besides tests/docs/shell_blocks.py's
``foreground``, ``background "READY"`` and ``restart "READY"``:

* ``<!-- run: shows "TEXT" ... -->`` — runs, exits 0, and prints each TEXT (``"!TEXT"``: does
  not print it). trustgraph-cli exits 0 when it fails, so what it prints is what counts;
* ``<!-- run: fails "TEXT" -->`` — exits non-zero, printing TEXT: a failure the page documents;
* ``<!-- run: fails-on-node-20 "TEXT" -->`` — fails so on a Node older than the Inspector's
  newest needs (22.19); not run on a newer one;
* ``<!-- run: install -->`` — trustgraph-cli's install: the venv tests/compat/tgcli.py built
  (the same version, checked) stands in for it, linked where the block puts it.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.compat import tgcli
from tests.docs.shell_blocks import Block, Reader, free_port
from tests.processes import ROOT
from toolmesh.cli.doctor import INSPECTOR, INSPECTOR_NODE, node_version

PAGE = ROOT / "docs" / "clients.md"
MARKED = re.compile(r'<!-- run: ([\w-]+)((?: "[^"]*")*) -->\n```bash\n(.*?)```', re.S)
ANY_BLOCK = re.compile(r"```(?:bash|sh|shell|console)\n(.*?)```", re.S)
KINDS = {"foreground", "background", "restart", "shows", "fails", "fails-on-node-20", "install"}


@dataclass(frozen=True)
class Step:
    """One marked block: how it is run, what it must (not) print, its text."""

    how: str
    texts: tuple[str, ...]
    text: str

    def block(self) -> Block:
        how = self.how if self.how in ("background", "restart") else "foreground"
        return Block(how, self.text, self.texts[0] if self.texts else "")


def steps(markdown: str) -> list[Step]:
    return [Step(how, tuple(re.findall(r'"([^"]*)"', texts)), text)
            for how, texts, text in MARKED.findall(markdown)]


def test_every_shell_block_of_the_page_is_marked_and_pinned() -> None:
    page = PAGE.read_text()
    found = steps(page)
    assert {s.how for s in found} <= KINDS, {s.how for s in found} - KINDS
    assert len(ANY_BLOCK.findall(page)) == len(found), "a shell block no test would run"
    # the versions the page names are the ones the tests install
    inspector = [s.text for s in found if "@modelcontextprotocol/inspector" in s.text]
    assert len(inspector) >= 4
    unpinned = [t for t in inspector if f"inspector@{INSPECTOR} " not in t]
    assert [s.how for s in found if s.text in unpinned] == ["fails-on-node-20"]
    [install] = [s.text for s in found if s.how == "install"]
    assert f"pip install {tgcli.TRUSTGRAPH_CLI}\n" in install


async def web_ui_tools(base: str, api_token: str) -> list[str]:
    """What the Inspector's web UI lists after **Connect** and **List Tools**: its page's calls
    to its own server (the saved server and header, connect, initialize, tools/list)."""
    import aiohttp

    auth = {"x-mcp-remote-auth": f"Bearer {api_token}"}
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(headers=auth, timeout=timeout) as http:
        async with http.get(base + "/api/servers") as r:
            [server] = (await r.json())["mcpServers"].values()
        assert server["headers"]["Authorization"].startswith("Bearer "), server
        settings = {"headers": [{"key": k, "value": v} for k, v in server["headers"].items()]}
        async with http.post(base + "/api/mcp/connect", json={
                "config": {"type": server["type"], "url": server["url"]},
                "settings": settings}) as r:
            connected = await r.json()
        assert "sessionId" in connected, connected
        session = connected["sessionId"]

        async def send(message: dict[str, Any]) -> None:
            async with http.post(base + "/api/mcp/send",
                                 json={"sessionId": session, "message": message}) as r:
                sent = await r.json()
            assert sent.get("ok"), sent

        async with http.get(base + "/api/mcp/events", params={"sessionId": session}) as events:
            await send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}})
            await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            async for raw in events.content:
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                if event.get("type") == "message" and event["data"].get("id") == 2:
                    return [t["name"] for t in event["data"]["result"]["tools"]]
    raise AssertionError("the web UI's event stream ended with no tools/list answer")


def run_web_ui_check(lines: list[str]) -> None:
    text = "".join(lines)
    m = re.search(r"(http://127\.0\.0\.1:\d+)\?MCP_INSPECTOR_API_TOKEN=([0-9a-f]+)", text)
    assert m, text
    assert "tell-joke" in asyncio.run(web_ui_tools(m.group(1), m.group(2)))


@pytest.mark.slow
def test_the_page_runs_as_written(tmp_path: Path) -> None:
    if shutil.which("npx") is None:
        pytest.fail("the page's Inspector steps need Node's npx (docs/testing.md)",
                    pytrace=False)
    home = tmp_path / "home"
    (home / ".venvs").mkdir(parents=True)
    old_node = (node_version() or (0, 0)) < INSPECTOR_NODE
    with Reader(cwd=ROOT, home=home, path=[Path(sys.executable).parent],
                ports={"8899": free_port()}) as me:
        for name in ("TOOLMESH_GATEWAY_TOKEN", "TRUSTGRAPH_URL", "TRUSTGRAPH_TOKEN",
                     "TRUSTGRAPH_WORKSPACE"):
            me.env.pop(name, None)  # the reader's shell has none of the suite's
        # the web UI's fixed ports, moved so that two runs do not collide
        for name in ("CLIENT_PORT", "MCP_SANDBOX_PORT", "MCP_APP_ORIGIN_PORT"):
            me.env[name] = str(free_port())
        for step in steps(PAGE.read_text()):
            if step.how in ("background", "restart"):
                started = me.start(step.block(), timeout=180)
                assert not any("Traceback" in line for line in started), "".join(started)
                if "--web" in step.text:
                    run_web_ui_check(started)
                continue
            if step.how == "install":
                (home / ".venvs" / "trustgraph").symlink_to(tgcli.install())
                continue
            if step.how == "fails-on-node-20" and not old_node:
                continue  # the newest Inspector runs here: the pinned one is what counts
            ran = me.run(step.block(), timeout=300)
            out = ran.stdout + ran.stderr
            shown = f"{step.text}\nexit {ran.code}\n{ran.stdout}\n{ran.stderr}"
            if step.how.startswith("fails"):
                assert ran.code != 0, shown
            else:
                assert ran.code == 0, shown
            assert "Traceback" not in out, shown
            for expected in step.texts:
                if expected.startswith("!"):
                    assert expected[1:] not in out, shown
                else:
                    assert expected in out, shown
