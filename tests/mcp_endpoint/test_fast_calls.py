"""Calls answered as one JSON body (mcp_endpoint/fast_calls.py), seen from the wire: raw
JSON-RPC over HTTP against a real ``toolmesh serve`` with a streaming tool service."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.dialogs.test_embedded_restart import _offered
from tests.mcp_endpoint.test_endpoint import INITIALIZE, MCP_HEADERS
from tests.servers import Served, serving, toolmesh_serve

SERVICES = Path(__file__).parent / "services"


async def open_session(http: httpx2.AsyncClient, url: str, token: str | None = None,
                       ) -> dict[str, str]:
    """Open a session as a client would: the headers of its later requests."""
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    opened = await http.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **auth})
    assert opened.status_code == 200, opened.text
    headers = {**MCP_HEADERS, **auth, "mcp-session-id": opened.headers["mcp-session-id"],
               "mcp-protocol-version": "2025-06-18"}
    done = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                           headers=headers)
    assert done.status_code == 202
    return headers


def call(id: int, word: str, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "spell", "arguments": {"word": word}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


@pytest.fixture(scope="module")
def speller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One ``toolmesh serve`` with the speller for the module's tests."""
    with serving(tmp_path_factory.mktemp("speller"), "--tool-service", "speller:Speller",
                 cwd=SERVICES) as served:
        yield served


@pytest.fixture
async def opened(speller: Served) -> AsyncIterator[tuple[httpx2.AsyncClient, str, dict[str, str]]]:
    """A client, the endpoint's URL, and the headers of a session it opened there."""
    await _offered(speller.url, "spell")
    async with httpx2.AsyncClient(timeout=30) as http:
        url = speller.url + "mcp"
        yield http, url, await open_session(http, url)


async def test_a_call_without_progress_is_one_json_body_one_with_progress_a_stream(
        opened: tuple[httpx2.AsyncClient, str, dict[str, str]]) -> None:
    http, url, headers = opened
    plain = await http.post(url, json=call(2, "mcp"), headers=headers)
    streamed = await http.post(url, json=call(3, "abc", progressToken="p"), headers=headers)
    wrong = await http.post(url, json={**call(4, "x"), "params": {
        "name": "spell", "arguments": {"word": 7}}}, headers=headers)
    older = await http.post(url, json=call(5, "ok"), headers={
        **headers, "mcp-protocol-version": "2025-03-26"})
    assert plain.status_code == 200
    assert plain.headers["content-type"].startswith("application/json")
    assert plain.headers["mcp-session-id"] == headers["mcp-session-id"]
    assert plain.json() == {"jsonrpc": "2.0", "id": 2, "result": {
        "content": [{"type": "text", "text": "mcp"}], "isError": False}}
    # progress asked for: the SDK's stream, with a report a letter, then the result
    assert streamed.headers["content-type"].startswith("text/event-stream")
    sent = events(streamed.text)
    assert [m["params"]["message"] for m in sent if m.get("method") == "notifications/progress"
            ] == ["a", "b", "c"]
    assert sent[-1]["result"]["content"][0]["text"] == "abc"
    # a tool's refusal is a result with isError, as the SDK's would be
    assert wrong.json()["result"]["isError"] is True
    assert "invalid arguments" in wrong.json()["result"]["content"][0]["text"]
    # a revision this does not answer for goes to the SDK, which streams
    assert older.headers["content-type"].startswith("text/event-stream")
    assert events(older.text)[-1]["result"]["content"][0]["text"] == "ok"


async def test_sessions_the_sdk_did_not_open_or_ended_are_not_answered(
        opened: tuple[httpx2.AsyncClient, str, dict[str, str]]) -> None:
    http, url, headers = opened
    made_up = await http.post(url, json=call(2, "no"), headers={
        **headers, "mcp-session-id": "0123456789abcdef0123456789abcdef"})
    ended = await http.delete(url, headers=headers)
    after = await http.post(url, json=call(3, "no"), headers=headers)
    assert made_up.status_code == 404 and "result" not in made_up.text
    assert ended.status_code == 200
    assert after.status_code == 404 and "result" not in after.text


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_cancelled_call_ends_at_once(
        opened: tuple[httpx2.AsyncClient, str, dict[str, str]]) -> None:
    http, url, headers = opened
    began = time.monotonic()
    # 400 letters, 10 ms each: four seconds unless cancelled
    slow = asyncio.create_task(http.post(url, json=call(7, "z" * 400), headers=headers))
    await asyncio.sleep(0.5)
    cancelled = await http.post(url, json={
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "changed my mind"}}, headers=headers)
    answer = await slow
    took = time.monotonic() - began
    # the session goes on: the same request id may be used again
    again = await http.post(url, json=call(7, "ok"), headers=headers)
    assert cancelled.status_code == 202
    assert answer.status_code == 202 and "result" not in answer.text
    assert took < 2.5
    assert again.json()["result"]["content"][0]["text"] == "ok"


async def test_a_client_that_hangs_up_after_each_answer_still_gets_json(tmp_path: Path) -> None:
    """As curl does (a connection per request, closed once the answer is read): the session
    it opened is known to the fast path although the gateway's handler is cancelled then."""
    async with toolmesh_serve(tmp_path) as served, httpx2.AsyncClient(timeout=30) as http:
        await _offered(served.url, "tell-joke")
        host, port = served.url.split("//", 1)[1].rstrip("/").split(":")
        body = json.dumps(INITIALIZE).encode()
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: " + f"{host}:{port}".encode()
                     + b"\r\nAccept: application/json, text/event-stream\r\n"
                     b"Content-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        answer = await reader.readuntil(b"\r\n0\r\n\r\n")  # the end of the chunked answer
        writer.close()  # at once, as curl does
        session = next(line.split(b":", 1)[1].strip().decode()
                       for line in answer.split(b"\r\n")
                       if line.lower().startswith(b"mcp-session-id:"))
        headers = {**MCP_HEADERS, "mcp-session-id": session,
                   "mcp-protocol-version": "2025-11-25"}
        await asyncio.sleep(0.2)  # the gateway has noticed the hang-up
        called = await http.post(served.url + "mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "tell-joke", "arguments": {"topic": "cats"}}})
    assert called.headers["content-type"].startswith("application/json"), called.text
    assert called.json()["result"]["content"][0]["text"].startswith("Hey trustgraph! ")
