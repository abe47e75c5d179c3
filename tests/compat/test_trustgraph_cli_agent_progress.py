"""The real `tg-invoke-agent` against a dialog whose MCP tool reports progress: toolmesh's
``progress`` messages must not disturb TrustGraph's client (it skips types it does not know)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from tests.cli.test_config_cli import script
from tests.compat.test_trustgraph_cli_agent import invoke
from tests.llm.openai_server import OpenAITestServer
from tests.mcp.callback_servers import running_http_server
from tests.processes import run_toolmesh
from tests.servers import toolmesh_serve

ACT = 'Thought: I count\nAction: counter\nArgs: {"steps": 3, "interval": 0.2}'
DONE = "Thought: I have it\nFinal Answer: It counted to three."


async def test_tg_invoke_agent_with_a_tool_that_reports_progress(tg_bin: Path,
                                                                  tmp_path: Path) -> None:
    async with running_http_server() as mcp, OpenAITestServer(answers=[ACT, DONE] * 5) as llm, \
            toolmesh_serve(tmp_path, "--llm", llm.base_url, "--model", "m",
                           "--tool-calling", "react") as served:
        u = ["-u", served.url]
        code, _, err = await run_toolmesh("mcp", "set", "count", "--url", mcp.url, *u)
        assert code == 0, err
        code, _, err = await script("tg-set-tool", "--id", "c", "--name", "counter", "--type",
                                    "mcp-tool", "--mcp-tool", "count", "--description",
                                    "Counts slowly", *u)
        assert code == 0, err
        # the stream does carry progress messages: what TrustGraph's client must skip
        kinds = [m.get("message_type") for m in await dialog(served.url, "count to three")]
        assert kinds.count("progress") == 3 and kinds[-1] == "answer", kinds
        # our own CLI shows them with -v, a line each
        code, out, err = await run_toolmesh("agent", "count to three", "-v", *u)
        assert (code, out.strip()) == (0, "It counted to three."), err
        assert "⏳ counter: 1/3 step 1\n⏳ counter: 2/3 step 2\n⏳ counter: 3/3 step 3" in err, err

        out = await invoke(tg_bin, "-u", served.url, "-q", "count to three")
        assert out.strip() == "It counted to three."
        out = await invoke(tg_bin, "-u", served.url, "-q", "count to three", "-v")
        assert "It counted to three." in out and "counted to 3" in out  # the observation
        assert "step 1" not in out  # progress is not shown as a thought or an observation
        out = await invoke(tg_bin, "-u", served.url, "-q", "count to three", "--no-streaming")
        assert out.strip() == "It counted to three."


async def dialog(url: str, question: str) -> list[dict[str, Any]]:
    """Every message of one streamed dialog, over the gateway's WebSocket."""
    messages: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as session, \
            session.ws_connect(url + "api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": ""})
        assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
        await ws.send_json({"id": "d1", "service": "agent", "flow": "default",
                            "request": {"question": question, "streaming": True}})
        while not messages or not messages[-1].get("end_of_dialog"):
            messages.append((await ws.receive_json(timeout=30))["response"])
    return messages
