"""End to end through the gateway: an MCP server process, `toolmesh serve` with an
OpenAI-compatible LLM (the local test server, scripted), tools set with the CLI."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path

import aiohttp
import pytest

from tests.cli.test_config_cli import script
from tests.llm.openai_server import OpenAITestServer
from tests.mcp.servers import running_server
from tests.processes import run_toolmesh
from tests.servers import toolmesh_serve


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_dialog_through_the_gateway_calls_an_mcp_tool_with_arguments(tmp_path: Path) -> None:
    answers = ['Thought: I need the forecast\nAction: get-weather\nArgs: {"city": "Paris", "days": 3}',
               "Thought: I have it\nFinal Answer: The forecast says: Paris: sunny for 3 days"]
    async with running_server("streamable-http", name="weather-e2e") as mcp, \
            OpenAITestServer(answers=answers) as llm, \
            toolmesh_serve(tmp_path, "--llm", llm.base_url, "--model", "m",
                           "--tool-calling", "react") as served:
        u = ["-u", served.url]
        code, _, err = await run_toolmesh("mcp", "set", "weather", "--url", mcp.url, *u)
        assert code == 0, err
        code, _, err = await script(
            "tg-set-tool", "--id", "w", "--name", "get-weather", "--type", "mcp-tool",
            "--mcp-tool", "weather", "--description", "Weather forecast for a city",
            "--argument", "city:string:The city", "days:integer:How many days", *u)
        assert code == 0, err

        # the tool works on its own first
        code, out, err = await run_toolmesh("mcp", "invoke", "weather", "-P",
                                            '{"city": "Rome", "days": 1}', *u)
        assert (code, out.strip()) == (0, "Rome: sunny for 1 day"), err

        # and over the WebSocket, as service "mcp-tool"
        async with aiohttp.ClientSession() as session, \
                session.ws_connect(served.url + "api/v1/socket") as ws:
            await ws.send_json({"type": "auth", "token": ""})
            assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
            await ws.send_json({"id": "m1", "service": "mcp-tool", "flow": "default",
                                "request": {"name": "weather", "parameters": {"city": "Oslo"}}})
            frame = await ws.receive_json(timeout=30)
        assert (frame["id"], frame["complete"]) == ("m1", True)
        assert frame["response"]["text"] == "Oslo: sunny for 1 day"
        assert "error" not in frame and "error" not in frame["response"]

        request = urllib.request.Request(
            served.url + "api/v1/flow/default/service/agent", method="POST",
            data=json.dumps({"question": "What's the weather in Paris?"}).encode(),
            headers={"Content-Type": "application/json"})
        body = await asyncio.to_thread(lambda: json.loads(urllib.request.urlopen(request, timeout=60).read()))
    assert body["answer"] == "The forecast says: Paris: sunny for 3 days"
    first, second = llm.requests
    assert ("Tool: get-weather\nDescription: Weather forecast for a city\nArguments:\n"
            "- city (string, required) — The city\n- days (integer; default 1) — How many days"
            ) in first.prompt
    assert 'Args: {"city": "Paris", "days": 3}\nObservation: Paris: sunny for 3 days' in second.prompt
