"""What `toolmesh serve` says when it starts: where MCP clients connect (``/mcp`` on the
gateway's address), and a count of services that matches the "serving" lines above it (the
agent serves several queues: its dialogs, tools, approvals...). A part run alone counts the
same way."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.processes import start_toolmesh
from tests.servers import toolmesh_serve

SERVING = re.compile(r"\b\w+ serving \S+ -> \S+")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_serve_prints_the_mcp_url_and_counts_what_it_serves(tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path) as served:
        log = list(served.log)
    serving = [line for line in log if SERVING.search(line)]
    [ready] = [line for line in log if "ready: " in line]
    assert len(serving) > 7  # the parts hold more services than there are parts
    assert f"ready: {len(serving)} services serving and the gateway; stop with Ctrl-C or " \
           "SIGTERM" in ready, ready
    assert any(f"MCP clients: {served.url}mcp (streamable HTTP" in line for line in log), log


async def test_a_part_run_alone_counts_its_one_service(tmp_path: Path) -> None:
    process, log = await start_toolmesh("run", "config", "--config-store",
                                        str(tmp_path / "config.db"))
    try:
        serving = [line for line in log if SERVING.search(line)]
        assert len(serving) == 1, log
        assert "ready: 1 service serving; stop with" in log[-1], log[-1]
    finally:
        process.terminate()
        await process.wait()
