"""The OpenAPI document against the gateway that serves it: valid OpenAPI 3.1, every route
documented and nothing documented that is not served, real responses valid against the
schemas it declares, and the copy in docs/ current."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema
import pytest
from openapi_spec_validator import OpenAPIV31SpecValidator, validate
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import toolmesh
from tests.gateway.test_gateway import PUT
from toolmesh.gateway import Gateway
from toolmesh.gateway.openapi import document, render

DOCS_COPY = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
DOC_URI = "urn:toolmesh:openapi"


def pointer(*parts: str) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def body_validator(doc: dict[str, Any], path: str, method: str, status: int,
                   ) -> jsonschema.Draft202012Validator:
    """A validator for the body the document declares for ``status`` of an operation; fails
    the test when the operation does not declare that status."""
    responses = doc["paths"][path][method]["responses"]
    assert str(status) in responses, f"{method.upper()} {path} does not declare {status}"
    response = responses[str(status)]
    where = (response["$ref"].removeprefix("#").split("/")[1:] if "$ref" in response
             else ["paths", path, method, "responses", str(status)])
    registry = Registry().with_resource(
        DOC_URI, Resource.from_contents(doc, default_specification=DRAFT202012))
    schema = {"$ref": DOC_URI + "#" + pointer(*where, "content", "application/json", "schema")}
    return jsonschema.Draft202012Validator(schema, registry=registry)


def check(doc: dict[str, Any], path: str, method: str, status: int, body: Any) -> None:
    body_validator(doc, path, method, status).validate(body)


async def fetch_document(http: aiohttp.ClientSession, gw: Gateway,
                         **kwargs: Any) -> dict[str, Any]:
    async with http.get(gw.url + "api/v1/openapi.json", **kwargs) as r:
        assert r.status == 200 and r.content_type == "application/json", await r.text()
        return await r.json()


# -- the document -------------------------------------------------------------------------

async def test_the_served_document_is_valid_openapi_3_1(gateway: Gateway,
                                                        http: aiohttp.ClientSession) -> None:
    doc = await fetch_document(http, gateway)
    validate(doc, cls=OpenAPIV31SpecValidator)
    assert doc["openapi"].startswith("3.1.")
    assert doc == document()
    assert doc["info"]["version"] == toolmesh.__version__


def test_the_validator_would_notice_a_broken_document() -> None:
    broken = document()
    broken["paths"]["/api/v1/health"]["get"]["responses"]["200"] = {"content": {}}  # no description
    with pytest.raises(Exception, match="description"):
        validate(broken, cls=OpenAPIV31SpecValidator)


def test_the_docs_copy_is_current() -> None:
    assert DOCS_COPY.read_text(encoding="utf-8") == render(), (
        "docs/openapi.json is stale: python -m toolmesh.gateway.openapi > docs/openapi.json")


async def test_the_regenerate_command_prints_the_document() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toolmesh.gateway.openapi",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0 and err == b"", err.decode()
    assert out.decode("utf-8") == render()


# -- routes and paths ---------------------------------------------------------------------

def served(gw: Gateway) -> set[tuple[str, str]]:
    """``(method, path)`` of every route the gateway's app registers, with ``{service}``
    spelled out as each service the gateway forwards to on that route."""
    out = set()
    for route in gw.app().router.routes():
        if route.method == "HEAD":
            continue  # aiohttp adds a HEAD beside every GET: the same answer without a body
        path = route.resource.canonical  # type: ignore[union-attr]
        if "{service}" not in path:
            out.add((route.method.lower(), path))
            continue
        per_flow = "{flow}" in path
        out |= {(route.method.lower(), path.replace("{service}", name))
                for name, endpoint in gw.endpoints.items() if endpoint.per_flow == per_flow}
    return out


def documented(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method, path) for path, item in doc["paths"].items() for method in item
            if method in METHODS}


async def test_every_route_the_gateway_serves_is_documented(gateway: Gateway) -> None:
    routes = served(gateway)
    assert ("get", "/api/v1/openapi.json") in routes
    assert ("post", "/api/v1/config") in routes and \
        ("post", "/api/v1/flow/{flow}/service/tool-service") in routes
    assert routes - documented(document()) == set()


async def test_every_documented_route_is_served(gateway: Gateway) -> None:
    assert documented(document()) - served(gateway) == set()


# -- real responses -----------------------------------------------------------------------

async def test_real_responses_match_their_schemas(gateway: Gateway,
                                                  http: aiohttp.ClientSession) -> None:
    doc = document()
    base = gateway.url + "api/v1/"
    config = base + "config"

    async def post(url: str, path: str, body: Any, status: int, **kwargs: Any) -> Any:
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
        async with http.post(url, data=body, headers=headers, **kwargs) as r:
            assert r.status == status, await r.text()
            answer = await r.json()
        check(doc, path, "post", status, answer)
        return answer

    async with http.get(base + "health") as r:
        assert r.status == 200
        check(doc, "/api/v1/health", "get", 200, await r.json())
    await post(config, "/api/v1/config", PUT, 200)
    listed = await post(config, "/api/v1/config", {"operation": "list", "type": "tool"}, 200)
    assert listed["directory"] == ["tell-joke"]
    got = await post(config, "/api/v1/config", {"operation": "get", "keys": [
        {"type": "tool", "key": "tell-joke"}, {"type": "tool", "key": "absent"}]}, 200)
    assert got["values"][1]["value"] is None
    await post(config, "/api/v1/config", {"operation": "getvalues", "type": "tool"}, 200)
    whole = await post(config, "/api/v1/config", {"operation": "config"}, 200)
    assert set(whole["config"]) == {"tool", "tool-service"}
    await post(config, "/api/v1/config", {"operation": "delete", "keys": [
        {"type": "tool", "key": "tell-joke"}]}, 200)
    refused = await post(config, "/api/v1/config", {"operation": "frobnicate"}, 200)
    assert refused["error"]["type"] == "config-error"
    flows = await post(base + "flow", "/api/v1/flow", {"operation": "list-flows"}, 200)
    assert flows == {"flow-ids": ["default"]}
    flow = await post(base + "flow", "/api/v1/flow", {"operation": "get-flow",
                                                     "flow-id": "default"}, 200)
    assert json.loads(flow["flow"])["interfaces"]
    nope = await post(base + "flow", "/api/v1/flow", {"operation": "get-flow", "flow-id": "nope"},
                      200)
    assert nope["error"]["type"] == "unknown-flow"
    unknown = await post(base + "flow/default/service/tool-service",
                         "/api/v1/flow/{flow}/service/tool-service", {"id": "absent"}, 200)
    assert unknown["error"]["type"] == "unknown-tool-service"
    # POST /api/v1/{service} for a service there is not: the route config is served by
    assert (await post(base + "nonsense", "/api/v1/config", {}, 404))["error"]["type"] \
        == "unknown-service"
    await post(base + "flow/default/service/nonsense",
               "/api/v1/flow/{flow}/service/agent", {}, 404)
    absent = await post(base + "flow/nope/service/agent", "/api/v1/flow/{flow}/service/agent",
                        {"question": "hi"}, 404)
    assert absent["error"]["type"] == "unknown-flow"
    # no agent service runs behind this gateway
    idle = await post(base + "flow/default/service/agent", "/api/v1/flow/{flow}/service/agent",
                      {"question": "hi"}, 503)
    assert idle["error"]["type"] == "service-unavailable"
    late = await post(config, "/api/v1/config", {"operation": "config"}, 504,
                      headers={"X-Timeout": "1e-9"})
    assert late["error"]["type"] == "timeout"
    await post(config, "/api/v1/config", {"operation": "config"}, 400,
               headers={"X-Timeout": "soon"})
    await post(config, "/api/v1/config", b"{not json", 400)
    await post(config, "/api/v1/config", b"[1]", 400)
    await post(config, "/api/v1/config", b"{}", 415, headers={"Content-Type": "text/plain"})
    forbidden = await post(config, "/api/v1/config", {"operation": "config"}, 403,
                           headers={"Host": "evil.example"})
    assert forbidden["error"]["type"] == "forbidden-host"
    async with http.get(base + "socket") as r:  # a plain GET, not an upgrade
        assert r.status == 400
        check(doc, "/api/v1/socket", "get", 400, await r.json())


async def test_responses_of_a_gateway_with_a_token_match_their_schemas(
        guarded: Gateway, http: aiohttp.ClientSession) -> None:
    doc = document()
    config = guarded.url + "api/v1/config"
    async with http.post(config, json={"operation": "config"}) as r:
        assert r.status == 401
        check(doc, "/api/v1/config", "post", 401, await r.json())
    big = {"operation": "put", "values": [{"type": "x", "key": "k", "value": "v" * 5000}]}
    async with http.post(config, json=big, headers={"Authorization": "Bearer s3cret"}) as r:
        assert r.status == 413
        check(doc, "/api/v1/config", "post", 413, await r.json())


def test_the_schemas_refuse_what_the_gateway_must_not_send() -> None:
    """The checks above would fail on a wrong body: the schemas are not vacuous."""
    doc = document()
    wrong = [
        ("/api/v1/health", "get", 200, {"status": "ok", "services": [], "extra": 1}),
        ("/api/v1/config", "post", 404, {"error": {"type": "auth-failed", "message": "x"}}),
        ("/api/v1/config", "post", 400, {"error": {"type": "bad-request"}}),
        ("/api/v1/config", "post", 200, {"version": "1"}),
        ("/api/v1/flow/{flow}/service/agent", "post", 200, {"message_type": "answer"}),
    ]
    for path, method, status, body in wrong:
        with pytest.raises(jsonschema.ValidationError):
            check(doc, path, method, status, body)


# -- access -------------------------------------------------------------------------------

async def test_the_document_needs_no_token_but_passes_the_origin_and_host_checks(
        guarded: Gateway, http: aiohttp.ClientSession) -> None:
    assert (await fetch_document(http, guarded))["paths"]
    # the exemption is for this one route: the others still want the token
    async with http.post(guarded.url + "api/v1/config", json={"operation": "config"}) as r:
        assert r.status == 401
    for header in ({"Origin": "https://evil.example"}, {"Host": "evil.example"}):
        async with http.get(guarded.url + "api/v1/openapi.json", headers=header) as r:
            assert r.status == 403
