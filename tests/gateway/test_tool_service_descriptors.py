"""The gateway keeps the ``tool-service`` descriptors it read, and never serves a stale one:
a put through the gateway applies to the very next call; a put made elsewhere applies once its
config push arrives; a config service that restarts empties the cache — with the real config
service, real HTTP and the joke service, on every bus backend."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import Backend
from tests.gateway.test_tool_service_route import descriptor, joke
from toolmesh.config.client import ConfigClient
from toolmesh.config.service import ConfigService
from toolmesh.config.store import open_store
from toolmesh.gateway import Gateway, GatewayOptions
from toolmesh.gateway.tool_service import MISSING, DescriptorCache, ToolServiceEndpoint
from toolmesh.tools.service import DynamicToolService
from toolmesh.tools.services.joke import JokeService

CALL = {"id": "jokes", "arguments": {"topic": "food"}, "config": {"style": "pun"}}
JOKE = joke("trustgraph", "pun", "food")


class Other(DynamicToolService):
    """Another service: what it answers tells which descriptor a call used."""

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        return "the other service"


@dataclass
class Setup:
    gateway: Gateway
    endpoint: ToolServiceEndpoint
    http: aiohttp.ClientSession
    config: ConfigClient
    topic: str

    async def post(self, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        async with self.http.post(self.gateway.url + path, json=body) as r:
            return r.status, await r.json()

    async def call(self) -> str:
        """The joke the route answers, or the type of its error."""
        status, body = await self.post("api/v1/flow/default/service/tool-service", CALL)
        if "error" in body:
            return body["error"]["type"]
        assert status == 200, body
        return body["response"]

    def plain(self) -> str:
        """The descriptor of the joke service."""
        return descriptor("jokes", f"{self.topic}-joke")

    def other(self) -> str:
        """The same id on the queues of :class:`Other`."""
        return descriptor("jokes", f"{self.topic}-other")


@pytest.fixture
async def setup(backend: Backend, tmp_path: Path) -> AsyncIterator[Setup]:
    """A gateway on a config service of its own (every queue of it, the push queue too)."""
    t = backend.topic("tsd")
    queues = {"request_queue": f"request:tg:{t}-config",
              "response_queue": f"response:tg:{t}-config"}
    push_queue = f"notify:tg:{t}-config"
    async with AsyncExitStack() as stack:
        store = await open_store(str(tmp_path / "config.db"))
        await stack.enter_async_context(ConfigService(await backend.connect(), store, **queues,
                                                      push_queue=push_queue))
        await stack.enter_async_context(JokeService(await backend.connect(), topic=f"{t}-joke"))
        await stack.enter_async_context(Other(await backend.connect(), topic=f"{t}-other"))
        config = await stack.enter_async_context(
            ConfigClient(await backend.connect(), timeout=10, **queues))
        endpoint = ToolServiceEndpoint(await backend.connect(),
                                       config_queues={**queues, "push_queue": push_queue})
        gateway = await stack.enter_async_context(Gateway(
            await backend.connect(), GatewayOptions(port=0, extra_endpoints=(endpoint,))))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        yield Setup(gateway, endpoint, http, config, t)


async def test_a_put_made_elsewhere_applies_once_its_push_arrives(setup: Setup) -> None:
    await setup.config.put({("tool-service", "jokes"): setup.plain()})
    assert await setup.call() == JOKE
    cache = setup.endpoint.descriptors
    assert cache.get("default", "jokes") == setup.plain()  # kept: the next call reads no config
    assert await setup.call() == JOKE

    version = await setup.config.put({("tool-service", "jokes"): setup.other()})
    await cache.caught_up(version)
    assert cache.get("default", "jokes") is MISSING
    assert await setup.call() == "the other service"
    assert cache.get("default", "jokes") == setup.other()

    version = await setup.config.delete([("tool-service", "jokes")])
    await cache.caught_up(version)
    assert await setup.call() == "unknown-tool-service"


async def test_a_put_through_the_gateway_applies_to_the_next_call(backend: Backend,
                                                                 tmp_path: Path) -> None:
    """The gateway's own config route reaches the default config queues: a config service
    on them, on a bus of the test's own."""
    if backend.name != "memory":
        pytest.skip("the default config queues are shared on a broker; memory:// is private")
    async with AsyncExitStack() as stack:
        t = backend.topic("tsg")
        bus = await backend.connect()
        store = await open_store(str(tmp_path / "config.db"))
        await stack.enter_async_context(ConfigService(bus, store))
        await stack.enter_async_context(JokeService(bus, topic=f"{t}-joke"))
        await stack.enter_async_context(Other(bus, topic=f"{t}-other"))
        gateway = await stack.enter_async_context(Gateway(bus, GatewayOptions(port=0)))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        endpoint = gateway.endpoints["tool-service"]
        assert isinstance(endpoint, ToolServiceEndpoint)
        # the push subscription is stopped: only the route's own view of versions is left
        await endpoint.descriptors.stop()
        setup = Setup(gateway, endpoint, http, ConfigClient(bus), t)

        async def put(value: str) -> None:
            status, body = await setup.post("api/v1/config", {"operation": "put", "values": [
                {"type": "tool-service", "key": "jokes", "value": value}]})
            assert status == 200 and "error" not in body, body

        await put(setup.plain())
        assert await setup.call() == JOKE
        # the very next call after the put's answer uses the new descriptor
        await put(setup.other())
        assert await setup.call() == "the other service"
        await put(setup.plain())
        assert await setup.call() == JOKE


async def test_after_a_restart_versions_follow_the_new_config_service() -> None:
    """A new store may count from lower: its versions are the ones that count now (otherwise
    no entry read from it would ever be fresh)."""
    from toolmesh.bus.base import Message
    from toolmesh.bus.memory import MemoryBus

    cache = DescriptorCache(MemoryBus())
    cache.put("default", "a", "{}", version=1_000)
    await cache._on_push(Message(b'{"version": 3, "changes": {}}'))
    assert (cache.latest, cache.get("default", "a")) == (3, MISSING)
    cache.put("default", "a", "{}", version=3)
    assert cache.get("default", "a") == "{}"
    await cache._on_push(Message(b'{"version": 4, "changes": {"tool": ["default"]}}'))
    assert cache.get("default", "a") is MISSING
    cache.put("default", "a", "{}", version=4)
    await cache._on_push(Message(b"{not json"))  # not understood: nothing is kept
    assert cache.get("default", "a") is MISSING


def test_the_cache_is_bounded_and_keeps_only_versioned_reads() -> None:
    from toolmesh.bus.memory import MemoryBus

    cache = DescriptorCache(MemoryBus(), limit=3)
    for i in range(5):
        cache.put("default", f"s{i}", json.dumps({"id": f"s{i}"}), version=1)
    assert [cache.get("default", f"s{i}") is MISSING for i in range(5)] == \
        [True, True, False, False, False]
    cache.put("default", "none", None, version=1)  # "no such item" is kept too
    assert cache.get("default", "none") is None
    cache.put("default", "unversioned", "{}", version=None)  # no version: not kept
    assert cache.get("default", "unversioned") is MISSING
