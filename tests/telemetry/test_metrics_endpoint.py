"""Where metrics are served and who may read them: the gateway's /metrics behind its access
rules, a part's own metrics port, and the counts the gateway keeps per route and outcome."""

from __future__ import annotations

import json

import aiohttp
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from toolmesh.gateway import Gateway
from toolmesh.telemetry.exposition import MetricsError, MetricsServer
from toolmesh.telemetry.labels import OTHER, BoundedValues


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def families(text: str) -> set[str]:
    return {f.name for f in text_string_to_metric_families(text)}


async def test_the_gateway_serves_metrics_in_both_formats(
        gateway: Gateway, http: aiohttp.ClientSession) -> None:
    async with http.get(gateway.url + "metrics") as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        names = families(await r.text())
    assert {"toolmesh_gateway_requests", "toolmesh_bus_messages", "toolmesh_dialogs_started",
            "toolmesh_tool_call_duration_seconds", "process_cpu_seconds"} <= names
    async with http.get(gateway.url + "metrics",
                        headers={"Accept": "application/openmetrics-text"}) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        assert (await r.text()).rstrip().endswith("# EOF")


async def test_metrics_need_the_token_when_one_is_set(
        guarded: Gateway, http: aiohttp.ClientSession) -> None:
    async with http.get(guarded.url + "metrics") as r:
        assert r.status == 401
        assert (await r.json())["error"]["type"] == "auth-failed"
    async with http.get(guarded.url + "metrics",
                        headers={"Authorization": "Bearer s3cret"}) as r:
        assert r.status == 200 and "toolmesh_gateway_requests_total" in await r.text()


async def test_a_page_of_another_origin_cannot_read_them(
        gateway: Gateway, http: aiohttp.ClientSession) -> None:
    async with http.get(gateway.url + "metrics",
                        headers={"Origin": "http://evil.example"}) as r:
        assert r.status == 403


async def test_requests_are_counted_by_route_service_and_outcome(
        gateway: Gateway, http: aiohttp.ClientSession) -> None:
    ok = sample("toolmesh_gateway_requests_total", route="rest", service="config", outcome="ok")
    bad = sample("toolmesh_gateway_requests_total", route="rest", service="config",
                 outcome="config-error")
    socket_ok = sample("toolmesh_gateway_requests_total", route="socket", service="config",
                       outcome="ok")
    async with http.post(gateway.url + "api/v1/config",
                         json={"operation": "list", "type": "tool"}) as r:
        assert r.status == 200
    # the config service answers an unknown operation with an error: a call that failed
    async with http.post(gateway.url + "api/v1/config", json={"operation": "nope"}) as r:
        assert (await r.json())["error"]["type"] == "config-error"
    async with http.ws_connect(gateway.url + "api/v1/socket") as ws:
        await ws.send_str(json.dumps({"id": "1", "service": "config",
                                      "request": {"operation": "list", "type": "tool"}}))
        reply = json.loads((await ws.receive()).data)
        assert reply["id"] == "1" and "error" not in reply["response"], reply
    assert sample("toolmesh_gateway_requests_total", route="rest", service="config",
                  outcome="ok") == ok + 1
    assert sample("toolmesh_gateway_requests_total", route="rest", service="config",
                  outcome="config-error") == bad + 1
    assert sample("toolmesh_gateway_requests_total", route="socket", service="config",
                  outcome="ok") == socket_ok + 1
    assert sample("toolmesh_gateway_request_duration_seconds_count", route="rest",
                  service="config") >= 2


async def test_a_metrics_port_serves_only_metrics(http: aiohttp.ClientSession) -> None:
    server = MetricsServer(port=0)
    await server.start()
    try:
        async with http.get(server.url) as r:
            assert r.status == 200 and "toolmesh_bus_messages" in await r.text()
        async with http.get(server.url.removesuffix("metrics") + "api/v1/health") as r:
            assert r.status == 404
    finally:
        await server.stop()


async def test_a_metrics_port_with_a_token_refuses_scrapes_without_it(
        http: aiohttp.ClientSession) -> None:
    server = MetricsServer(port=0, token="scrape-s3cret")
    await server.start()
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "scrape-s3cret"}):
            async with http.get(server.url, headers=headers) as r:
                assert r.status == 401, headers
        async with http.get(server.url, headers={"Authorization": "Bearer scrape-s3cret"}) as r:
            assert r.status == 200
    finally:
        await server.stop()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
def test_beyond_loopback_a_metrics_port_needs_a_token(host: str) -> None:
    with pytest.raises(MetricsError, match="needs a token"):
        MetricsServer(host=host, port=0)
    MetricsServer(host=host, port=0, token="t0ken-for-scrapers")


async def test_a_taken_metrics_port_is_a_clear_error() -> None:
    first = MetricsServer(port=0)
    await first.start()
    try:
        port = int(first.url.rsplit(":", 1)[1].split("/")[0])
        with pytest.raises(MetricsError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            await MetricsServer(port=port).start()
    finally:
        await first.stop()


def test_label_values_are_bounded() -> None:
    values = BoundedValues(3)
    assert [values(v) for v in ("a", "b", "a", "c", "d", "e", "b")] == \
        ["a", "b", "a", "c", OTHER, OTHER, "b"]
    assert values("") == "" and values(None) == ""
    long = BoundedValues(5)("x" * 1000)
    assert len(long) == 120
