"""`tg-show-tools` when no agent answers for the flow: the config is still shown, and each
tool's status row says why it is unknown (a gateway with a config service and no agent)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.cli.test_tool_cli import tables
from tests.gateway.test_gateway import start_gateway
from toolmesh.cli import tg_tools
from toolmesh.gateway import Gateway


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    async for gw in start_gateway(tmp_path):
        yield gw


async def test_without_an_agent_the_status_row_says_why_it_is_unknown(
        gateway: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    put = {"operation": "put", "values": [{"type": "tool", "key": "ask", "value": json.dumps(
        {"type": "text-completion", "name": "ask", "description": "Ask the LLM"})}]}
    async with aiohttp.ClientSession() as http, \
            http.post(gateway.url + "api/v1/config", json=put) as r:
        assert r.status == 200, await r.text()
    # the command is synchronous: in a thread, so the gateway on this loop can answer it
    code = await asyncio.to_thread(tg_tools.show_tools, ["-u", gateway.url])
    out = capsys.readouterr().out
    assert code == 0
    (ask,) = tables(out)
    assert ask["id"] == "ask"
    status = ask["status"].replace("\n", " ")
    assert status.startswith("unknown (gateway error 503: service-unavailable:"), status
    assert "toolmesh run agent" in status
