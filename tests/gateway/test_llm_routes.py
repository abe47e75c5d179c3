"""The gateway's `prompt` and `text-completion` routes (REST and WebSocket) in front of the real
prompt and text-completion services with a scripted LLM, and the config service's
`getvalues-all-ws`; every body checked against the OpenAPI document."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.gateway.test_gateway import start_gateway
from tests.gateway.test_openapi import check
from toolmesh.gateway import Gateway
from toolmesh.gateway.endpoints import prompt_request
from toolmesh.gateway.openapi import document
from toolmesh.llm import ScriptedLLM, TextCompletionService
from toolmesh.prompt import PromptService

ANSWER = "Paris is the capital of France."
FLOW = "/api/v1/flow/{flow}/service/"


@pytest.fixture
def llm() -> ScriptedLLM:
    # chunks of 5 characters: a streamed answer comes in several pieces
    return ScriptedLLM(default=ANSWER, chunk_size=5)


@pytest.fixture
async def gateway(tmp_path: Path, llm: ScriptedLLM) -> AsyncIterator[Gateway]:
    async for gw in start_gateway(tmp_path):
        async with TextCompletionService(gw.bus, llm), PromptService(gw.bus):
            yield gw


@pytest.fixture
async def bare(tmp_path: Path) -> AsyncIterator[Gateway]:
    """A gateway with a config service and nothing else."""
    async for gw in start_gateway(tmp_path):
        yield gw


async def post(http: aiohttp.ClientSession, gw: Gateway, service: str, body: dict[str, Any],
               status: int = 200) -> dict[str, Any]:
    """POST to a per-flow route of the default flow; the answer, checked against the document."""
    async with http.post(f"{gw.url}api/v1/flow/default/service/{service}", json=body) as r:
        assert r.status == status, await r.text()
        answer = await r.json()
    check(document(), FLOW + service, "post", status, answer)
    return answer


async def frames(ws: aiohttp.ClientWebSocketResponse, request_id: str) -> list[dict[str, Any]]:
    """Every frame answering ``request_id``, up to its last."""
    got: list[dict[str, Any]] = []
    async with asyncio.timeout(10):
        while not got or not got[-1]["complete"]:
            frame = json.loads(await ws.receive_str())
            assert frame["id"] == request_id, frame
            got.append(frame)
    return got


@contextlib.asynccontextmanager
async def socket(http: aiohttp.ClientSession,
                 gw: Gateway) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    async with http.ws_connect(gw.url + "api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": ""})
        assert json.loads(await ws.receive_str())["type"] == "auth-ok"
        yield ws


def words(*texts: str) -> int:
    """The scripted LLM's token count: whitespace-separated words (its documented rule)."""
    return sum(len(t.split()) for t in texts)


# -- text-completion ----------------------------------------------------------------------

async def test_rest_text_completion_answers_with_the_usage(
        gateway: Gateway, http: aiohttp.ClientSession, llm: ScriptedLLM) -> None:
    body = await post(http, gateway, "text-completion",
                      {"system": "Be brief.", "prompt": "Capital of France?"})
    assert body == {"response": ANSWER, "in_token": words("Be brief.", "Capital of France?"),
                    "out_token": words(ANSWER), "model": "scripted", "end_of_stream": True}
    assert llm.prompts == [("Be brief.", "Capital of France?")]


async def test_rest_joins_a_streamed_completion(gateway: Gateway,
                                                http: aiohttp.ClientSession) -> None:
    body = await post(http, gateway, "text-completion",
                      {"prompt": "Capital of France?", "streaming": True})
    assert body == {"response": ANSWER, "in_token": words("Capital of France?"),
                    "out_token": words(ANSWER), "model": "scripted", "end_of_stream": True}


async def test_websocket_streams_a_completion_in_pieces(gateway: Gateway,
                                                        http: aiohttp.ClientSession) -> None:
    async with socket(http, gateway) as ws:
        await ws.send_json({"id": "c1", "service": "text-completion", "flow": "default",
                            "request": {"system": "", "prompt": "Capital?", "streaming": True}})
        got = await frames(ws, "c1")
        pieces, last = [f["response"] for f in got[:-1]], got[-1]["response"]
        assert len(pieces) > 1 and all(not f["complete"] for f in got[:-1])
        assert all(p["end_of_stream"] is False and "in_token" not in p for p in pieces)
        assert "".join(p["response"] for p in pieces) == ANSWER
        # the last frame: the end of the stream, with the usage (null fields left out)
        assert last == {"response": "", "in_token": 1, "out_token": words(ANSWER),
                        "model": "scripted", "end_of_stream": True}
        await ws.send_json({"id": "c2", "service": "text-completion",
                            "request": {"system": "", "prompt": "Capital?"}})
        [whole] = await frames(ws, "c2")
        assert whole["response"]["response"] == ANSWER and whole["complete"] is True


async def test_an_llm_failure_is_a_service_error(bare: Gateway,
                                                 http: aiohttp.ClientSession) -> None:
    async with TextCompletionService(bare.bus, ScriptedLLM()):  # nothing to answer with
        body = await post(http, bare, "text-completion", {"prompt": "anyone?"})
    assert body["error"]["type"] == "llm-error" and "no response" in body["error"]["message"]


# -- prompt -------------------------------------------------------------------------------

async def test_rest_prompt_takes_trustgraphs_variables(
        gateway: Gateway, http: aiohttp.ClientSession, llm: ScriptedLLM) -> None:
    body = await post(http, gateway, "prompt",
                      {"id": "question", "variables": {"question": "Capital of France?"}})
    assert body == {"text": ANSWER, "in_token": words(*llm.prompts[-1]),
                    "out_token": words(ANSWER), "model": "scripted", "end_of_stream": True}
    assert "Capital of France?" in llm.prompts[-1][1]
    # the service's own wire: each term as JSON text
    body = await post(http, gateway, "prompt",
                      {"id": "question", "terms": {"question": json.dumps("Capital of Italy?")}})
    assert body["text"] == ANSWER and "Capital of Italy?" in llm.prompts[-1][1]


async def test_rest_prompt_joins_a_streamed_answer(gateway: Gateway,
                                                   http: aiohttp.ClientSession) -> None:
    body = await post(http, gateway, "prompt", {"id": "question", "streaming": True,
                                                "variables": {"question": "Capital?"}})
    assert body["text"] == ANSWER and body["out_token"] == words(ANSWER)


async def test_websocket_streams_a_prompt_answer(gateway: Gateway,
                                                 http: aiohttp.ClientSession) -> None:
    async with socket(http, gateway) as ws:
        await ws.send_json({"id": 7, "service": "prompt", "flow": "default",
                            "request": {"id": "question", "streaming": True,
                                        "variables": {"question": "Capital?"}}})
        got = await frames(ws, 7)
    assert len(got) > 2 and "".join(f["response"]["text"] for f in got) == ANSWER
    assert got[-1]["response"]["model"] == "scripted" and got[-1]["complete"] is True


async def test_prompt_errors(gateway: Gateway, http: aiohttp.ClientSession) -> None:
    body = await post(http, gateway, "prompt", {"id": "no-such-template", "variables": {}})
    assert body["error"]["type"] == "prompt-error" and "no-such-template" in \
        body["error"]["message"]
    body = await post(http, gateway, "prompt", {"id": "question", "variables": "question"},
                      status=400)
    assert body["error"]["type"] == "bad-request" and "'variables'" in body["error"]["message"]


@pytest.mark.parametrize(("service", "body", "process"), [
    ("prompt", {"id": "question", "variables": {"question": "?"}}, "toolmesh run prompt"),
    ("text-completion", {"prompt": "?"}, "toolmesh run text-completion"),
])
async def test_a_missing_service_is_named(bare: Gateway, http: aiohttp.ClientSession,
                                          service: str, body: dict[str, Any],
                                          process: str) -> None:
    answer = await post(http, bare, service, body, status=503)
    assert answer["error"]["type"] == "service-unavailable"
    assert process in answer["error"]["message"]
    async with http.post(f"{bare.url}api/v1/flow/nope/service/{service}", json=body) as r:
        assert r.status == 404 and (await r.json())["error"]["type"] == "unknown-flow"


# -- config: getvalues-all-ws ---------------------------------------------------------------

async def test_getvalues_all_ws_reads_one_type_of_every_workspace(
        gateway: Gateway, http: aiohttp.ClientSession) -> None:
    config = gateway.url + "api/v1/config"
    for workspace, id in [("default", "weather"), ("ws2", "calc"), ("ws3", "other")]:
        value = {"url": f"http://{id}.example/mcp", "auth-token": f"secret-{id}"}
        put = {"operation": "put", "workspace": workspace, "values": [
            {"type": "mcp", "key": id, "value": json.dumps(value)}]}
        if workspace == "ws3":  # holds no mcp item
            put["values"][0]["type"] = "tool-service-notes"
        async with http.post(config, json=put) as r:
            assert r.status == 200 and "error" not in await r.json()
    async with http.post(config, json={"operation": "getvalues-all-ws", "type": "mcp"}) as r:
        assert r.status == 200
        body = await r.json()
    check(document(), "/api/v1/config", "post", 200, body)
    assert body["version"] == 3
    assert [(v["workspace"], v["type"], v["key"], json.loads(v["value"])) for v in
            body["values"]] == [
        ("default", "mcp", "weather", {"url": "http://weather.example/mcp", "auth-token": "***"}),
        ("ws2", "mcp", "calc", {"url": "http://calc.example/mcp", "auth-token": "***"})]
    async with http.post(config, json={"operation": "getvalues-all-ws"}) as r:
        assert (await r.json())["error"]["type"] == "config-error"


def test_variables_become_terms_as_trustgraphs_gateway_sends_them() -> None:
    """The bus carries the prompt service's own wire, so TrustGraph's prompt service could
    answer behind this gateway too."""
    sent = prompt_request({"id": "t", "variables": {"s": "ü", "n": 2, "l": [1]},
                           "terms": {"s": '"ignored"'}}, "ws2", "default")
    assert sent == {"id": "t", "terms": {"s": '"ü"', "n": "2", "l": "[1]"}, "workspace": "ws2"}
    assert prompt_request({"id": "t", "terms": {"s": '"x"'}, "workspace": "w"}, "d", "f") == {
        "id": "t", "terms": {"s": '"x"'}, "workspace": "w"}
