"""Malformed messages to /mcp (mcp_endpoint/jsonrpc.py) against a real ``toolmesh serve``: a
request whose id is ``true``, an object, ``1.5`` or ``null`` got an empty 202 (taken for a
notification), and other shapes got pydantic's text (``6 validation errors for
union[JSONRPCRequest,...]``, ``input_value=``, a link to pydantic's site). Now each gets a
JSON-RPC error in our words, and no error message of any answer carries the validator's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway import fuzz_strategies as fz
from tests.mcp_endpoint.test_endpoint import INITIALIZE, MCP_HEADERS
from tests.servers import Served, serving

#: what pydantic's messages carry and ours never do
PYDANTIC = ("pydantic", "validation error", "input_value", "input_type", "[type=",
            "for further information", "union[")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("malformed")) as served:
        yield served


@pytest.fixture(scope="module")
def http() -> Iterator[httpx2.Client]:
    with httpx2.Client(timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def headers(served: Served, http: httpx2.Client) -> dict[str, dict[str, str]]:
    """The headers of a request in an open session, of one without a session, and of one of
    the revision without sessions (2026-07-28)."""
    opened = http.post(served.url + "mcp", json=INITIALIZE, headers=MCP_HEADERS)
    assert opened.status_code == 200, opened.text
    session = {**MCP_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"],
               "mcp-protocol-version": "2025-06-18"}
    done = http.post(served.url + "mcp", json={"jsonrpc": "2.0",
                                               "method": "notifications/initialized"},
                     headers=session)
    assert done.status_code == 202
    return {"session": session, "none": dict(MCP_HEADERS),
            "2026-07-28": {**MCP_HEADERS, "mcp-protocol-version": "2026-07-28"}}


def errors(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC errors an answer carries (a JSON body or the events of an SSE stream)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in response.text.splitlines()
                    if line.startswith("data:") and line[5:].strip()]
    elif response.content:
        messages = [response.json()]
    else:
        messages = []
    return [m["error"] for m in messages if isinstance(m, dict) and "error" in m]


@pytest.mark.parametrize("mode", ["session", "none", "2026-07-28"])
@pytest.mark.parametrize("id", [True, False, {"a": 1}, 1.5, None, [1]])
def test_a_request_with_an_invalid_id_is_an_invalid_request(
        served: Served, http: httpx2.Client, headers: dict[str, dict[str, str]], mode: str,
        id: Any) -> None:
    answer = http.post(served.url + "mcp", headers=headers[mode],
                       json={"jsonrpc": "2.0", "id": id, "method": "tools/list"})
    assert answer.status_code == 400
    body = answer.json()
    assert body["id"] is None and body["error"]["code"] == -32600
    assert '"id" must be a string or an integer' in body["error"]["message"]


@pytest.mark.parametrize(("body", "code", "says"), [
    (b"{", -32700, "not JSON"),
    (b"", -32700, "not JSON"),
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600, "batch"),
    (b'"ping"', -32600, "a JSON object"),
    (b'{"id": 1, "method": "ping"}', -32600, '"jsonrpc": "2.0"'),
    (b'{"jsonrpc": "2.0", "id": 1, "method": 5}', -32600, '"method" must be a string'),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": []}', -32600, '"params"'),
    (b'{"jsonrpc": "2.0", "id": 1}', -32600, 'needs a "method"'),
    (b'{"jsonrpc": "2.0", "id": 1, "error": "x"}', -32600, '"error" must be an object'),
    (b'{"jsonrpc": "2.0", "id": 1.5, "result": {}}', -32600, 'response\'s "id"'),
])
def test_a_malformed_message_is_told_what_is_wrong_in_our_words(
        served: Served, http: httpx2.Client, headers: dict[str, dict[str, str]],
        body: bytes, code: int, says: str) -> None:
    answer = http.post(served.url + "mcp", content=body, headers={
        **headers["session"], "content-type": "application/json"})
    assert answer.status_code == 400
    [error] = errors(answer)
    assert error["code"] == code and says in error["message"]
    assert not any(word in error["message"].lower() for word in PYDANTIC)


#: MCP messages of every shape: mostly of the right one, with fields of every wrong type
messages = fz.objects({
    "jsonrpc": (9, fz.field("2.0")),
    "id": (7, fz.field(1, "a", 2 ** 40)),
    "method": (8, fz.field("tools/list", "tools/call", "ping", "initialize",
                           "notifications/initialized", "notifications/cancelled",
                           "resources/list", "logging/setLevel", "nope")),
    "params": (6, fz.weighted((4, st.fixed_dictionaries({}, optional={
        "name": fz.field("tell-joke"), "arguments": fz.field({}, {"topic": "x"}),
        "_meta": fz.field({}, {"progressToken": 1}), "protocolVersion": fz.field("2025-06-18"),
        "capabilities": fz.field({}), "clientInfo": fz.field({"name": "x", "version": "0"}),
        "cursor": fz.field("c"), "requestId": fz.field(1), "level": fz.field("info")})),
        (1, fz.wrong_types))),
    "result": (1, fz.field({})),
    "error": (1, fz.field({"code": 1, "message": "m"})),
})


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(body=fz.bodies(messages), mode=st.sampled_from(["session", "none", "2026-07-28"]))
def test_no_answer_carries_the_validators_text(
        served: Served, http: httpx2.Client, headers: dict[str, dict[str, str]],
        body: bytes, mode: str) -> None:
    answer = http.post(served.url + "mcp", content=body, headers={
        **headers[mode], "content-type": "application/json"})
    assert answer.status_code < 500, answer.text
    for error in errors(answer):
        text = json.dumps(error).lower()
        assert not any(word in text for word in PYDANTIC), error
