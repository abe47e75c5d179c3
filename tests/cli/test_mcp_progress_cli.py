"""`toolmesh mcp invoke --timeout` through `toolmesh serve`: the MCP server's progress shows on
stderr while the call runs, and each report grants the call more time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.callback_servers import running_http_server
from tests.processes import run_toolmesh
from tests.servers import toolmesh_serve


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_mcp_invoke_shows_progress_and_each_report_renews_the_timeout(tmp_path: Path) -> None:
    async with running_http_server() as mcp, toolmesh_serve(tmp_path) as served:
        u = ["-u", served.url]
        code, _, err = await run_toolmesh("mcp", "set", "count", "--url", mcp.url, *u)
        assert code == 0, err
        # connect once: the time to connect counts against the short timeouts below
        code, out, err = await run_toolmesh("mcp", "invoke", "count", "-P",
                                            '{"steps": 1, "interval": 0}', *u)
        assert (code, out.strip()) == (0, "counted to 1"), err

        # 3 reports 0.5 s apart: 1.5 s in all, past the 0.9 s timeout that each report renews
        code, out, err = await run_toolmesh("mcp", "invoke", "count", "--timeout", "0.9",
                                            "-P", '{"steps": 3, "interval": 0.5}', *u)
        assert (code, out.strip()) == (0, "counted to 3"), err
        assert [line for line in err.splitlines() if line.startswith("progress:")] == [
            "progress: 1/3 step 1", "progress: 2/3 step 2", "progress: 3/3 step 3"]

        # no report within the timeout: the call ends there
        code, out, err = await run_toolmesh("mcp", "invoke", "count", "--timeout", "0.9",
                                            "-P", '{"steps": 1, "interval": 3}', *u)
        assert code != 0 and out == ""
        assert "timed out after 0.9 s" in err and "progress:" not in err, err

        # reports forever cannot pass --max-timeout
        code, out, err = await run_toolmesh("mcp", "invoke", "count", "--timeout", "0.9",
                                            "--max-timeout", "2", "-P",
                                            '{"steps": 100, "interval": 0.3}', *u)
        # (a little under 2 s: each hop keeps a margin so that its error reaches the caller)
        assert code != 0 and "the most it may take while reporting progress" in err, err
        assert "progress: 4/100 step 4" in err and "progress: 7/100" not in err
