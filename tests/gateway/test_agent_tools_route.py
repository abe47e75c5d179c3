"""The gateway's ``agent-tools`` route: the agent's tools, each offered or not and why, over
REST and the WebSocket, answered by a real agent service on the bus."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.gateway.test_gateway import start_gateway
from tests.gateway.test_openapi import check
from toolmesh.agent.service import AgentService
from toolmesh.gateway import Gateway
from toolmesh.gateway.openapi import document

ROUTE = "/api/v1/flow/{flow}/service/agent-tools"
TOOLS = {"operation": "put", "values": [
    {"type": "tool", "key": "ask", "value": json.dumps({
        "type": "text-completion", "name": "ask", "description": "Ask the LLM"})},
    {"type": "tool", "key": "w", "value": json.dumps({
        "type": "mcp-tool", "name": "get-weather", "description": "Weather",
        "mcp-tool": "weather"})}]}


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    async for gw in start_gateway(tmp_path):
        yield gw


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with http.post(url, json=body) as r:
        return r.status, await r.json()


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_rest_and_websocket_show_each_tool_and_why_it_is_not_offered(
        gateway: Gateway, http: aiohttp.ClientSession) -> None:
    async with AgentService(gateway.bus) as agent:
        # no LLM on this bus: each request waits out the detection of how it calls tools
        # (three budgets) and answers without it; a short budget keeps that wait short
        agent.tool_status.refresh_budget = 0.5
        status, put = await post(http, gateway.url + "api/v1/config", TOOLS)
        assert status == 200, put
        await agent.wait_for_config(put["version"])
        status, body = await post(http, gateway.url + "api/v1/flow/default/service/agent-tools",
                                  {})
        async with http.ws_connect(gateway.url + "api/v1/socket") as ws:
            await ws.send_json({"id": "t1", "service": "agent-tools", "flow": "default",
                                "request": {}})
            frame = await ws.receive_json(timeout=10)
    assert status == 200, body
    check(document(), ROUTE, "post", 200, body)
    assert body == {"workspace": "default", "version": put["version"], "tools": [
        {"key": "ask", "name": "ask", "type": "text-completion", "status": "available",
         "source": "configured"},
        {"key": "w", "name": "get-weather", "type": "mcp-tool", "status": "not-offered",
         "reason": "tool/w uses MCP tool 'weather', but there is no config item mcp/weather",
         "source": "configured"}]}
    assert frame == {"id": "t1", "response": body, "complete": True}


async def test_without_an_agent_the_route_says_which_process_to_start(
        gateway: Gateway, http: aiohttp.ClientSession) -> None:
    status, body = await post(http, gateway.url + "api/v1/flow/default/service/agent-tools", {})
    assert status == 503, body
    check(document(), ROUTE, "post", 503, body)
    assert body["error"]["type"] == "service-unavailable"
    assert "toolmesh run agent" in body["error"]["message"]
