"""The gateway's ``agent-services`` route: every tool service, configured or announced, with
its live instances and tools, over REST and the WebSocket — answered by a real agent that
hears a real self-announcing tool service; a scoped token sees its own workspaces only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.gateway.test_gateway import start_gateway
from tests.gateway.test_openapi import check
from toolmesh.agent.service import AgentService
from toolmesh.gateway.openapi import document
from toolmesh.tools.services.joke import JokeService

ROUTE = "/api/v1/flow/{flow}/service/agent-services"
PATH = "api/v1/flow/default/service/agent-services"
ADMIN = "adm-s3cret"
OTHER_RQ = "non-persistent://tg/request/other"


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def post(http: aiohttp.ClientSession, url: str, body: Any,
               token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with http.post(url, json=body, headers=headers) as r:
        return r.status, await r.json()


async def announced(agent: AgentService, key: str, *, workspace: str = "default") -> None:
    async with asyncio.timeout(10):
        await agent.wait_for_tools(lambda t: key in t.tools, workspace=workspace)


async def test_rest_and_websocket_list_configured_and_announced_services(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    async for gateway in start_gateway(tmp_path):
        async with AgentService(gateway.bus) as agent, JokeService(gateway.bus):
            await announced(agent, "tell-joke")
            status, put = await post(http, gateway.url + "api/v1/config", {
                "operation": "put", "values": [{"type": "tool-service", "key": "other",
                                                "value": json.dumps({
                                                    "id": "other", "request-queue": OTHER_RQ,
                                                    "response-queue": OTHER_RQ + "-out"})}]})
            assert status == 200 and "error" not in put, put
            status, body = await post(http, gateway.url + PATH, {"version": put["version"]})
            async with http.ws_connect(gateway.url + "api/v1/socket") as ws:
                await ws.send_json({"id": "s1", "service": "agent-services", "flow": "default",
                                    "request": {}})
                frame = await ws.receive_json(timeout=10)
    assert status == 200, body
    check(document(), ROUTE, "post", 200, body)
    assert (body["workspace"], body["version"], body["accepts-announcements"]) == (
        "default", put["version"], True)
    joke, other = body["services"]
    assert (joke["id"], joke["configured"], joke["announced"], joke["live"]) == (
        "joke-service", False, True, 1)
    assert len(joke["instances"]) == 1
    assert joke["tools"] == [{"key": "tell-joke", "name": "tell-joke", "source": "announced",
                              "status": "offered"}]
    assert other == {"id": "other", "configured": True, "announced": False, "enabled": True,
                     "request-queue": OTHER_RQ,
                     "descriptor": {"id": "other", "request-queue": OTHER_RQ,
                                    "response-queue": OTHER_RQ + "-out"},
                     "live": None, "instances": [], "last-seen": None,
                     "tools": []}
    assert frame == {"id": "s1", "response": body, "complete": True}


async def test_a_scoped_token_lists_only_its_workspaces(tmp_path: Path,
                                                        http: aiohttp.ClientSession) -> None:
    async for gateway in start_gateway(tmp_path, token=ADMIN):
        async with AgentService(gateway.bus) as agent, \
                JokeService(gateway.bus, workspace="ws2"):
            await announced(agent, "tell-joke", workspace="ws2")
            status, made = await post(http, gateway.url + "api/v1/token", {
                "operation": "create", "workspaces": ["ws2"], "capabilities": ["agent"]}, ADMIN)
            assert status == 200, made
            token = made["plaintext"]
            # a request naming no workspace goes to the token's
            status, own = await post(http, gateway.url + PATH, {}, token)
            denied = await post(http, gateway.url + PATH, {"workspace": "default"}, token)
            async with http.ws_connect(gateway.url + f"api/v1/socket?token={token}") as ws:
                await ws.send_json({"id": "s1", "service": "agent-services",
                                    "workspace": "default", "request": {}})
                refused = await ws.receive_json(timeout=10)
            _, default = await post(http, gateway.url + PATH, {}, ADMIN)
    assert status == 200, own
    assert own["workspace"] == "ws2"
    assert [(s["id"], s["live"]) for s in own["services"]] == [("joke-service", 1)]
    assert denied[0] == 403 and denied[1]["error"]["type"] == "forbidden", denied
    check(document(), ROUTE, "post", 403, denied[1])
    assert refused["error"]["type"] == "forbidden", refused
    # announced in ws2, so not in the default workspace
    assert (default["workspace"], default["services"]) == ("default", [])


async def test_without_an_agent_the_route_says_which_process_to_start(
        tmp_path: Path, http: aiohttp.ClientSession) -> None:
    async for gateway in start_gateway(tmp_path):
        status, body = await post(http, gateway.url + PATH, {})
    assert status == 503, body
    check(document(), ROUTE, "post", 503, body)
    assert body["error"]["type"] == "service-unavailable"
    assert "toolmesh run agent" in body["error"]["message"]
