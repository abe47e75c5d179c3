"""`toolmesh serve`, and each part that `toolmesh run` starts alone, is ready without having
loaded the MCP SDK (``mcp``, ``mcp_types``, ``httpx2``): it costs about half a second of CPU
at every start, and most starts never call an MCP server. It loads when first needed: the
first request to ``/mcp``, the first call of an MCP server (bench figures: the commit that
made it so). :mod:`tests.cli.test_startup_imports` checks the commands that call nothing.

What a process imported is read from its own ``-X importtime`` report (the environment's
``PYTHONPROFILEIMPORTTIME``), which it writes to stderr, interleaved with its log: every
module it names before the ``ready:`` line was imported during start-up.
"""

from __future__ import annotations

from pathlib import Path

import httpx2

from tests.processes import run_toolmesh, start_toolmesh
from tests.servers import toolmesh_serve

#: the MCP SDK and the HTTP client it brings (each name also stands for its submodules)
SDK = ("mcp", "mcp_types", "httpx2", "httpcore2")
REPORT = {"PYTHONPROFILEIMPORTTIME": "1"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "0"}}}


def imported(lines: list[str]) -> list[str]:
    """The modules the ``-X importtime`` report in ``lines`` names, in order."""
    # "import time:       312 |        312 |   mcp.types" (the header names no module)
    return [line.rsplit("|", 1)[1].strip() for line in lines
            if line.startswith("import time:") and line.count("|") == 2
            and "imported package" not in line]


def of_the_sdk(modules: list[str]) -> list[str]:
    return sorted({m for m in modules if any(m == n or m.startswith(n + ".") for n in SDK)})


def until_ready(lines: list[str]) -> list[str]:
    """``lines`` up to and with the first ``ready:`` line."""
    ready = next(i for i, line in enumerate(lines) if "ready: " in line)
    return lines[:ready + 1]


async def test_serve_is_ready_without_the_mcp_sdk_which_the_first_mcp_request_loads(
        tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, extra_env=REPORT) as served:
        started = until_ready(served.log)
        assert "toolmesh.gateway.server" in imported(started)  # the report is read
        assert of_the_sdk(imported(started)) == []
        async with httpx2.AsyncClient(timeout=30) as http:
            opened = await http.post(served.url + "mcp", json=INITIALIZE, headers={
                "Accept": "application/json, text/event-stream"})
        assert opened.status_code == 200, opened.text
        assert opened.headers.get("mcp-session-id")
    # the endpoint, built at its first request, loaded the SDK's server then
    later = imported(served.log[len(started):])
    assert "mcp.server.lowlevel" in later and "toolmesh.mcp_endpoint.endpoint" in later


async def test_the_gateway_run_alone_is_ready_without_the_mcp_sdk(tmp_path: Path) -> None:
    # the other parts that could load it (mcp-tool, agent) start in `serve` above; run alone
    # on a memory bus, with no config service to answer, they wait 30 s before they are ready
    process, log = await start_toolmesh("run", "gateway", "--bus", "memory://", "--port", "0",
                                        extra_env=REPORT, cwd=tmp_path)
    try:
        modules = imported(until_ready(log))
        assert "toolmesh.gateway.server" in modules  # the report is read
        assert of_the_sdk(modules) == []
    finally:
        process.terminate()
        await process.wait()


async def test_a_configured_mcp_server_has_the_sdk_loaded_before_its_first_call(
        tmp_path: Path) -> None:
    # the agent gives a first describe a second: loading the SDK then (half a second of CPU,
    # more on a loaded machine) would spend it, so an mcp item loads it at once, on a thread
    item = '{"url": "http://127.0.0.1:9/mcp"}'  # never called: the test makes no request
    async with toolmesh_serve(tmp_path) as served:
        code, _, err = await run_toolmesh("config", "put", "mcp/far", "-u", served.url,
                                          stdin_text=item)
        assert code == 0, err
    # started again with the item stored: it is read before `ready:`, and the load begun then
    # is awaited by the stop, so the report holds it whether or not it ended before `ready:`
    async with toolmesh_serve(tmp_path, extra_env=REPORT) as served:
        started = len(until_ready(served.log))
    modules = imported(served.log)
    assert "mcp" in modules and "toolmesh.mcp.connection" in modules, served.log[started:][-20:]
    assert any("MCP tools of workspace 'default': far" in line for line in served.log)
