"""Flows are known or refused: ``default`` always, others when a ``flow/<id>`` item defines
them; anything else is a 404 at once, and no name a caller sends opens a subscription."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.gateway.test_gateway import start_gateway
from tests.rabbit import RABBITMQ_URL, rabbitmqctl
from toolmesh import Service, connect
from toolmesh.bus.rabbitmq import RabbitMQBus
from toolmesh.config.service import ConfigService
from toolmesh.config.store import open_store
from toolmesh.gateway import Gateway, GatewayOptions
from toolmesh.gateway.endpoints import FlowEndpoint
from toolmesh.rpc.service import Reply


class Answerer(Service):
    """An agent stand-in for one flow: answers ``{"answer": <flow>, "end_of_dialog": true}``."""

    def __init__(self, bus: Any, flow: str) -> None:
        super().__init__(bus, request_queue=f"request:tg:agent:{flow}",
                         response_queue=f"response:tg:agent:{flow}",
                         subscription=f"agent-{flow}", drain_timeout=0.1)
        self.flow = flow

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        await reply({"message_type": "answer", "content": self.flow, "end_of_message": True,
                     "end_of_dialog": True})


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    async for gw in start_gateway(tmp_path):
        yield gw


def subscriptions(gw: Gateway) -> int:
    return sum(len(e._flows) for e in gw.endpoints.values() if isinstance(e, FlowEndpoint))


async def post(http: aiohttp.ClientSession, url: str, body: dict[str, Any],
               **kwargs: Any) -> tuple[int, dict[str, Any]]:
    async with http.post(url, json=body, **kwargs) as r:
        return r.status, await r.json()


async def test_an_unknown_flow_is_a_404_at_once_and_opens_nothing(gateway: Gateway) -> None:
    async with aiohttp.ClientSession() as http:
        before = subscriptions(gateway)
        for flow in ("nosuch", "a:b", "x" * 200, "has space", "-dash", "a://b"):
            started = time.monotonic()
            status, body = await post(
                http, gateway.url + f"api/v1/flow/{aiohttp.helpers.quote(flow, safe='')}"
                                    "/service/agent", {"question": "hi"})
            elapsed = time.monotonic() - started
            assert status == 404, (flow, body)
            assert body["error"]["type"] == "unknown-flow"
            assert elapsed < 0.5, f"{flow!r}: {elapsed:.2f} s"
        async with http.ws_connect(gateway.url + "api/v1/socket") as ws:
            await ws.send_json({"id": 7, "service": "mcp-tool", "flow": "nosuch",
                                "request": {"name": "x"}})
            frame = await ws.receive_json(timeout=5)
        assert frame["id"] == 7 and frame["complete"] is True
        assert frame["error"]["type"] == "unknown-flow"
        assert "toolmesh config put flow/nosuch" in frame["error"]["message"]
        assert subscriptions(gateway) == before


async def test_a_flow_defined_in_config_is_served_at_once_and_refused_once_deleted(
        gateway: Gateway) -> None:
    url = gateway.url + "api/v1/flow/research/service/agent"
    async with aiohttp.ClientSession() as http, Answerer(gateway.bus, "research"):
        status, body = await post(http, url, {"question": "hi"})
        assert status == 404
        status, _ = await post(http, gateway.url + "api/v1/config", {
            "operation": "put", "values": [{"type": "flow", "key": "research",
                                            "value": json.dumps({"description": "R&D"})}]})
        assert status == 200
        status, body = await post(http, url, {"question": "hi"})
        assert (status, body.get("content")) == (200, "research"), body
        status, flows = await post(http, gateway.url + "api/v1/flow",
                                   {"operation": "list-flows"})
        assert flows == {"flow-ids": ["default", "research"]}
        status, got = await post(http, gateway.url + "api/v1/flow",
                                 {"operation": "get-flow", "flow-id": "research"})
        definition = json.loads(got["flow"])
        assert definition["description"] == "R&D"
        assert definition["interfaces"]["agent"]["request"] == "request:tg:agent:research"
        await post(http, gateway.url + "api/v1/config", {
            "operation": "delete", "keys": [{"type": "flow", "key": "research"}]})
        status, body = await post(http, url, {"question": "hi"})
        assert status == 404 and body["error"]["type"] == "unknown-flow"


async def test_a_workspace_the_store_cannot_hold_is_a_refused_field_not_a_failed_service(
        gateway: Gateway) -> None:
    # found by schemathesis: a NUL in the body's workspace came back as a 502 config-error
    async with aiohttp.ClientSession() as http:
        for operation in ({"operation": "list-flows"},
                          {"operation": "get-flow", "flow-id": "research"}):
            status, body = await post(http, gateway.url + "api/v1/flow",
                                      {**operation, "workspace": "a\x00b"})
            assert status == 200 and body["error"]["type"] == "bad-request", body
            assert "NUL" in body["error"]["message"]
        # and the service goes on answering
        status, flows = await post(http, gateway.url + "api/v1/flow", {"operation": "list-flows"})
        assert (status, flows) == (200, {"flow-ids": ["default"]})


async def test_a_flow_item_with_a_name_no_queue_can_carry_is_refused_on_put(
        gateway: Gateway) -> None:
    async with aiohttp.ClientSession() as http:
        status, body = await post(http, gateway.url + "api/v1/config", {
            "operation": "put", "values": [{"type": "flow", "key": "a:b", "value": "{}"}]})
    assert status == 502 or status == 200
    assert body["error"]["type"] == "config-error"
    assert "flow id" in body["error"]["message"]


async def test_the_default_flow_needs_no_config_service(tmp_path: Path) -> None:
    # `default` is known without asking: a gateway whose config service is down still
    # reaches the default agent
    async for gw in start_gateway(tmp_path, with_config=False):
        async with aiohttp.ClientSession() as http, Answerer(gw.bus, "default"):
            status, body = await post(http, gw.url + "api/v1/flow/default/service/agent",
                                      {"question": "hi"})
        assert (status, body.get("content")) == (200, "default")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_thousands_of_flow_names_keep_the_gateway_small(gateway: Gateway) -> None:
    async with aiohttp.ClientSession() as http:
        statuses = await asyncio.gather(*(
            post(http, gateway.url + f"api/v1/flow/f{i}/service/agent", {"question": "q"})
            for i in range(3000)))
    assert {s for s, _ in statuses} == {404}
    assert subscriptions(gateway) == 0
    assert len(gateway.flows._known) == 1  # one workspace asked about


@pytest.mark.rabbitmq
async def test_3000_flow_names_on_rabbitmq_leave_the_channel_count_flat(tmp_path: Path) -> None:
    name = f"toolmesh-test-flows-{uuid.uuid4().hex[:8]}"
    bus = await RabbitMQBus.connect(RABBITMQ_URL, name=name)
    config_bus = await connect(RABBITMQ_URL)
    store = await open_store(str(tmp_path / "config.db"))
    try:
        async with ConfigService(config_bus, store), \
                Gateway(bus, GatewayOptions(port=0)) as gw, \
                aiohttp.ClientSession() as http:
            before = await channels(name)
            started = time.monotonic()
            results: list[int] = []
            for batch in range(0, 3000, 100):
                results += [s for s, _ in await asyncio.gather(*(
                    post(http, gw.url + f"api/v1/flow/n{i}/service/agent", {"question": "q"})
                    for i in range(batch, batch + 100)))]
            elapsed = time.monotonic() - started
            after = await channels(name)
            status, body = await post(http, gw.url + "api/v1/config", {"operation": "list",
                                                                     "type": "tool"})
        assert set(results) == {404}
        assert after == before, f"channels {before} -> {after}"
        assert status == 200, body
        print(f"\n3000 unknown flows on RabbitMQ: {elapsed:.2f} s, "
              f"{elapsed / 3000 * 1000:.2f} ms each; channels {before} -> {after}")
    finally:
        await store.close()
        await config_bus.close()
        await bus.close()


async def channels(connection_name: str) -> int:
    out = await rabbitmqctl("list_connections", "--no-table-headers", "channels",
                            "client_properties")
    counts = [int(line.split("\t")[0]) for line in out.splitlines()
              if f'{{"connection_name","{connection_name}"}}' in line]
    assert counts, f"no connection named {connection_name}"
    return sum(counts)
