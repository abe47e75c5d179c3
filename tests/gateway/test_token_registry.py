"""How fast a gateway learns of token changes made elsewhere, what each request needs, and
what the config service records for requests that come straight from the bus."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from toolmesh import connect
from toolmesh.bus.memory import new_memory_url
from toolmesh.config.client import ConfigClient
from toolmesh.config.service import ConfigService
from toolmesh.config.store import open_store
from toolmesh.gateway import Gateway, GatewayOptions
from toolmesh.gateway.scopes import carries, need
from toolmesh.gateway.tokens import TokenRegistry


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def deployment(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """One config service and two gateways on one bus, as separate processes would be."""
    bus = await connect(new_memory_url())
    store = await open_store(str(tmp_path / "config.db"))
    async with contextlib.AsyncExitStack() as stack:
        service = await stack.enter_async_context(ConfigService(bus, store))
        a = await stack.enter_async_context(Gateway(bus, GatewayOptions(port=0, token="adm")))
        b = await stack.enter_async_context(Gateway(bus, GatewayOptions(port=0, token="adm")))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        client = await stack.enter_async_context(ConfigClient(bus, timeout=5))
        yield {"a": a, "b": b, "http": http, "bus": bus, "store": store, "service": service,
               "client": client}
    await store.close()
    await bus.close()


async def call(http: aiohttp.ClientSession, gateway: Gateway, path: str, body: dict[str, Any],
               token: str) -> tuple[int, dict[str, Any]]:
    async with http.post(gateway.url + path, json=body,
                         headers={"Authorization": f"Bearer {token}"}) as r:
        return r.status, await r.json()


async def test_a_token_revoked_through_one_gateway_is_refused_by_another_at_once(
        deployment: dict[str, Any]) -> None:
    a, b, http = deployment["a"], deployment["b"], deployment["http"]
    status, made = await call(http, a, "api/v1/token", {
        "operation": "create", "workspaces": ["ws2"], "capabilities": ["config:read"]}, "adm")
    assert status == 200, made
    token, id = made["plaintext"], made["token"]["id"]
    read = {"operation": "config", "workspace": "ws2"}
    assert (await call(http, b, "api/v1/config", read, token))[0] == 200  # b loads its table
    status, body = await call(http, a, "api/v1/token", {"operation": "revoke", "id": id}, "adm")
    assert (status, body) == (200, {"version": 0, "revoked": id})
    # b never saw the revocation request: the config service's push told it
    assert (await call(http, b, "api/v1/config", read, token))[0] == 401
    assert (await call(http, a, "api/v1/config", read, token))[0] == 401


async def test_a_token_made_through_one_gateway_works_on_another_at_once(
        deployment: dict[str, Any]) -> None:
    a, b, http = deployment["a"], deployment["b"], deployment["http"]
    assert (await call(http, b, "api/v1/config", {"operation": "config"}, "adm"))[0] == 200
    _, made = await call(http, a, "api/v1/token", {
        "operation": "create", "workspaces": ["default"], "capabilities": "config:read"}, "adm")
    status, body = await call(http, b, "api/v1/config", {"operation": "config"},
                              made["plaintext"])
    assert status == 200, body


async def test_without_a_push_the_table_is_reloaded_within_max_age(
        deployment: dict[str, Any]) -> None:
    clock = Clock()
    registry = TokenRegistry(deployment["bus"], max_age=10, clock=clock,
                             push_queue="notify:tg:nobody-pushes-here")
    await registry.start()
    try:
        made = await deployment["client"].request({
            "operation": "token-create", "workspaces": ["w"], "capabilities": ["agent"]})
        token = made["plaintext"]
        who = await registry.identify(token)
        assert who is not None and who.id == made["token"]["id"] and who.workspaces == ("w",)
        # revoked behind the registry's back (a lost push)
        await deployment["store"].remove_token(who.id, actor="test")
        clock.now += 9.9
        assert await registry.identify(token) is not None  # still the cached table
        clock.now += 0.2
        assert await registry.identify(token) is None
        assert await registry.current(who) is None
    finally:
        await registry.stop()


async def test_a_token_cannot_be_checked_while_the_config_service_is_down(
        tmp_path: Path) -> None:
    bus = await connect(new_memory_url())
    async with Gateway(bus, GatewayOptions(port=0, token="adm")) as gw, \
            aiohttp.ClientSession() as http:
        status, body = await call(http, gw, "api/v1/config", {"operation": "config"},
                                  "tmk_0123456789ab_" + "x" * 43)
        assert status == 503 and "cannot check the token now" in body["error"]["message"]
        # the admin token needs no table: the request goes on (and finds no config service)
        status, body = await call(http, gw, "api/v1/config", {"operation": "config"}, "adm")
        assert status == 503 and body["error"]["type"] == "service-unavailable"
    await bus.close()


async def test_changes_sent_on_the_bus_are_recorded_as_the_bus(
        deployment: dict[str, Any]) -> None:
    client = deployment["client"]
    await client.put({("other", "t"): "{}"}, workspace="w")
    await client.request({"operation": "put", "workspace": "w", "actor": "tooling",
                          "values": [{"type": "x", "key": "k", "value": "1"}]})
    history = (await client.request({"operation": "history", "workspace": "w"}))["history"]
    assert [(e["actor"], e["type"]) for e in history] == [("tooling", "x"), ("bus", "other")]
    with pytest.raises(Exception, match="limit must be a whole number"):
        await client.request({"operation": "history", "limit": 0})


@pytest.mark.parametrize(("service", "request_", "capability", "everywhere"), [
    ("config", {"operation": "get"}, "config:read", False),
    ("config", {"operation": "list"}, "config:read", False),
    ("config", {"operation": "getvalues"}, "config:read", False),
    ("config", {"operation": "config"}, "config:read", False),
    ("config", {"operation": "history"}, "config:read", False),
    ("config", {"operation": "history", "all-workspaces": True}, "admin", True),
    ("config", {"operation": "put", "values": [{"type": "tool", "key": "k", "value": "{}"}]},
     "config:write", False),
    ("config", {"operation": "delete"}, "config:write", False),
    ("config", {"operation": "getvalues-all-ws"}, "admin", True),
    ("config", {"operation": "list-workspaces"}, "admin", True),
    ("config", {"operation": "something-new"}, "admin", True),
    ("flow", {"operation": "list-flows"}, "config:read", False),
    ("agent", {}, "agent", False),
    ("agent-tools", {}, "agent", False),
    ("agent-services", {}, "agent", False),
    ("prompt", {}, "agent", False),
    ("text-completion", {}, "agent", False),
    ("mcp-tool", {}, "tools:invoke", False),
    ("tool-service", {}, "tools:invoke", False),
    ("token", {"operation": "list"}, "admin", False),
    ("iam", {"operation": "whoami"}, None, False),
    ("iam", {"operation": "list-workspaces"}, "admin", True),
    ("a-service-added-later", {}, "admin", True),
])
def test_what_each_request_needs(service: str, request_: dict[str, Any], capability: str | None,
                                 everywhere: bool) -> None:
    needed = need(service, request_)
    assert (needed.capability, needed.everywhere, needed.refused) == (capability, everywhere,
                                                                       None)


@pytest.mark.parametrize(("type", "value", "carried"), [
    ("mcp", '{"url": "https://h/mcp", "auth-token": "t"}', "a secret (mcp/k: 'auth-token')"),
    ("mcp", '{"url": "https://h/mcp", "auth-token": "***"}', None),
    ("mcp", '{"transport": "stdio", "command": "uvx"}', "a stdio MCP item (mcp/k runs a command)"),
    ("mcp", '{"transport": "stdio", "command": "x", "env": {"K": "***"}}',
     "a stdio MCP item (mcp/k runs a command)"),
    ("tool", '{"type": "tool-service", "api-key": "k"}', "a secret (tool/k: 'api-key')"),
    ("tool", '{"type": "tool-service", "style": "pun"}', None),
    ("other", '{"endpoint": "https://u:p@h/"}', "a secret (other/k: a URL's credentials)"),
    ("other", "https://h/?token=abc", "a secret (other/k: a URL's credentials)"),
    ("other", '{"endpoint": "https://u:***@h/"}', None),
    ("other", "not json", None),
])
def test_what_makes_a_put_need_admin(type: str, value: str, carried: str | None) -> None:
    assert carries([{"type": type, "key": "k", "value": value}]) == carried
    needed = need("config", {"operation": "put", "values": [
        {"type": type, "key": "k", "value": value}]})
    assert (needed.capability, needed.also) == (
        ("admin", "config:write") if carried else ("config:write", None))


def test_token_operations_are_never_forwarded_to_the_config_service() -> None:
    for op in ("token-create", "token-list", "token-revoke", "token-table"):
        assert need("config", {"operation": op}).refused
