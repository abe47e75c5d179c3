"""One test per failure the gateway fuzzers (``test_fuzz.py``) found, each pinning down one
behaviour (see their names), against one real ``toolmesh serve`` for the module (the fuzzers'
server: ``fuzz_harness.fuzz_server``), whose log must stay clean to the end."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import pytest

from tests.gateway import fuzz_strategies as fz
from tests.gateway.fuzz_harness import (
    AGENT_LIMIT,
    LIMIT,
    ONLY_IN_DEFAULT,
    GatewayFailure,
    Server,
    assert_healthy_with_a_clean_log,
    assert_log_clean,
    check,
    module_server,
    post,
)
from tests.gateway.fuzz_socket import Socket, ping
from tests.gateway.fuzz_strategies import Frame, dumps

server = module_server("fuzz-findings")

DEEP = "[" * 5000 + "]" * 5000
HUGE_INT = "1" + "0" * 5000  # beyond Python's 4,300-digit int conversion limit


def tool_service(**fields: Any) -> bytes:
    return dumps({"id": fz.JOKE_SERVICE, **fields}).encode()


@pytest.mark.parametrize("path", [
    "/api/v1/config",
    "/api/v1/flow/default/service/tool-service",
    "/api/v1/flow/default/service/agent",
])
def test_an_integer_too_long_for_python_is_a_400_not_a_500(server: Server, path: str) -> None:
    reply = post(server, path, b'{"operation": "list", "type": "x", "question": "q", '
                               b'"id": "joke-service", "n": ' + HUGE_INT.encode() + b"}")
    assert reply.status == 400, reply
    assert reply.json()["error"]["type"] == "bad-request", reply


@pytest.mark.parametrize("field", ["arguments", "config"])
def test_tool_service_json_text_nested_too_deep_is_a_bad_request(server: Server,
                                                                 field: str) -> None:
    start = len(server.log)
    reply = post(server, "/api/v1/flow/default/service/tool-service", tool_service(
        **{field: DEEP}))
    assert reply.status < 500, reply
    assert reply.json()["error"]["type"] == "bad-request", reply
    assert_log_clean(server, start)


@pytest.mark.parametrize("field", ["arguments", "config"])
def test_tool_service_json_text_with_a_lone_surrogate_is_a_bad_request(server: Server,
                                                                       field: str) -> None:
    start = len(server.log)
    text = '{"topic": "\\ud800", "style": "\\ud800"}'  # JSON text holding "\ud800" escapes
    reply = post(server, "/api/v1/flow/default/service/tool-service", tool_service(
        **{field: text}))
    assert reply.status < 500, reply
    assert reply.json()["error"]["type"] == "bad-request", reply
    assert_log_clean(server, start)


@pytest.mark.parametrize("history", [5, True, 1.5, "abc", {"thought": "t"}])
def test_agent_history_that_is_not_a_list_is_a_bad_request(server: Server,
                                                           history: Any) -> None:
    start = len(server.log)
    reply = post(server, "/api/v1/flow/default/service/agent",
                 dumps({"question": "tell me a joke", "history": history}).encode(),
                 timeout=AGENT_LIMIT)
    assert reply.status < 500, reply
    error = reply.json()["error"]
    assert error["type"] == "bad-request" and "history" in error["message"], reply
    assert_log_clean(server, start)


@pytest.mark.parametrize("value", [DEEP, '{"name": ' + HUGE_INT + "}"],
                         ids=["nested-too-deep", "integer-too-long"])
@pytest.mark.parametrize("type", ["tool", "mcp", "tool-service"])
def test_a_config_value_python_cannot_parse_is_refused_naming_the_item(
        server: Server, type: str, value: str) -> None:
    start = len(server.log)
    reply = post(server, "/api/v1/config", dumps({"operation": "put", "values": [
        {"type": type, "key": "fuzz-cfg-unparsable", "value": value}]}).encode())
    assert reply.status == 200, reply
    error = reply.json()["error"]
    assert error["type"] == "config-error", reply
    assert f"{type}/fuzz-cfg-unparsable" in error["message"], reply
    assert_log_clean(server, start)


@pytest.mark.parametrize("value", [DEEP, '{"prompt": "p", "n": ' + HUGE_INT + "}"],
                         ids=["nested-too-deep", "integer-too-long"])
def test_a_prompt_item_python_cannot_parse_does_not_break_applying_prompts(
        server: Server, value: str) -> None:
    start = len(server.log)
    try:
        reply = post(server, "/api/v1/config", dumps({"operation": "put", "values": [
            {"type": "prompt", "key": "fuzz-cfg-unparsable", "value": value}]}).encode())
        assert reply.status == 200, reply
        # refused, or stored; then the prompt service must skip it, not fail the whole config
        assert_log_clean(server, start)
    finally:
        post(server, "/api/v1/config", dumps({"operation": "delete", "keys": [
            {"type": "prompt", "key": "fuzz-cfg-unparsable"}]}).encode())


@pytest.mark.parametrize("flow", ["x%3A%2F%2Fy", "%3A%2F%2F"])
@pytest.mark.parametrize("service", ONLY_IN_DEFAULT)
def test_a_flow_name_that_cannot_name_a_queue_is_a_4xx_not_a_500(server: Server, flow: str,
                                                                 service: str) -> None:
    start = len(server.log)
    reply = check(post(server, f"/api/v1/flow/{flow}/service/{service}",
                       b'{"name": "x", "question": "q"}'))
    assert 400 <= reply.status < 500, reply
    assert_log_clean(server, start)


def test_a_socket_flow_that_cannot_name_a_queue_is_not_an_internal_error(
        server: Server) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with await Socket.open(server) as sock:
            for i, service in enumerate(ONLY_IN_DEFAULT):
                await sock.send({"id": i, "service": service, "flow": "x://y",
                                 "request": {"name": "x", "question": "q"}})
            await sock.wait(lambda: all(sock.completed(i) for i in range(2)), LIMIT)
            return [f for f in sock.frames if isinstance(f, dict)]

    start = len(server.log)
    frames = server.run(scenario())
    for i in range(len(ONLY_IN_DEFAULT)):
        answer = [f for f in frames if f.get("id") == i and f.get("complete")]
        assert answer, f"request {i}: no answer in {frames!r}"
        assert answer[0]["error"]["type"] != "internal-error", answer
    assert_log_clean(server, start)


#: flow names no service serves (toolmesh runs its agent and mcp-tool in flow "default" only)
NO_SUCH_FLOWS = ["no-such-flow", "\u00fcn\u00efc\u00f8d\u00e9-\u6d41", "a" * 2000, "a%2Fb",
                 "%ED%A0%80", "%00"]


def test_a_request_for_a_flow_that_does_not_exist_is_answered_promptly(
        server: Server) -> None:
    """Over REST and the WebSocket; all at once, so the test takes ~LIMIT seconds."""
    def rest(case: tuple[str, str]) -> str | None:
        flow, service = case
        try:
            reply = check(post(server, f"/api/v1/flow/{quote(flow, safe='%')}/service/{service}",
                               b'{"name": "x", "question": "q"}', timeout=LIMIT + 1))
        except GatewayFailure as e:
            return f"{type(e).__name__}: {e}"
        return None if 400 <= reply.status < 500 else f"not a 4xx: {reply!r}"

    async def socket() -> list[str]:
        async with await Socket.open(server) as sock:
            cases = [(flow, service) for flow in ["no-such-flow", "a/b", "\u00e9"]
                     for service in ONLY_IN_DEFAULT]
            for i, (flow, service) in enumerate(cases):
                await sock.send({"id": i, "service": service, "flow": flow,
                                 "request": {"name": "x", "question": "q"}})
            await sock.wait(lambda: all(sock.completed(i) for i in range(len(cases))), LIMIT)
            return [f"socket: no answer within {LIMIT:g} s to {service} in flow {flow!r}"
                    for i, (flow, service) in enumerate(cases) if not sock.completed(i)]

    cases = [(flow, service) for flow in NO_SUCH_FLOWS for service in ONLY_IN_DEFAULT]
    with ThreadPoolExecutor(len(cases)) as pool:
        over_socket = pool.submit(server.run, socket(), 60)
        failures = [f"{service} in flow {flow[:40]!r}: {problem}"
                    for (flow, service), problem in zip(cases, pool.map(rest, cases))
                    if problem is not None]
        failures += over_socket.result()
    assert not failures, "\n".join(failures)


def test_a_workspace_header_that_is_not_utf8_is_a_400(server: Server) -> None:
    reply = check(post(server, "/api/v1/config", b'{"operation": "list", "type": "x"}',
                       headers={"X-Workspace": b"\xff\xfe"}))
    assert reply.status == 400, reply
    assert reply.json()["error"]["type"] == "bad-request", reply


def test_a_plain_get_of_the_socket_route_gets_a_json_error(server: Server) -> None:
    reply = post(server, "/api/v1/socket", b"", method="GET")
    assert 400 <= reply.status < 500, reply
    check(reply)


@pytest.mark.parametrize("frame", [
    '{"id": "deep", "service": "config", "request": {"operation": "config", "x": '
    + "[" * 150 + "]" * 150 + "}}",
    '{"id": "surrogate", "service": "config", "request": {"operation": "list", '
    '"type": "\\ud800"}}',
    '{"id": 7, "service": "agent", "request": {"question": "\\udc80"}}',
], ids=["nested-too-deep", "lone-surrogate", "integer-id"])
def test_a_socket_frame_refused_for_its_content_still_carries_its_id(server: Server,
                                                                    frame: str) -> None:
    request_id = json.loads(frame)["id"]

    async def scenario() -> list[Any]:
        async with await Socket.open(server) as sock:
            await sock.send(Frame(frame))
            await sock.send(ping(0))
            await sock.wait(lambda: sock.completed("__ping__0") > 0, LIMIT)
            return sock.frames

    frames = server.run(scenario())
    answer = [f for f in frames if f.get("id") == request_id and f.get("complete") is True]
    assert answer, f"no frame with id {request_id!r}: {frames!r:.600}"
    assert answer[0]["error"]["type"] == "bad-request", answer


def test_an_integer_too_long_for_python_does_not_kill_the_socket(server: Server) -> None:
    async def scenario() -> tuple[list[Any], str | None]:
        async with await Socket.open(server) as sock:
            await sock.send(Frame('{"id": "n", "service": "config", "request": '
                                  '{"operation": "list", "type": "x", "n": ' + HUGE_INT + "}}"))
            await sock.send(ping(0))
            await sock.wait(lambda: sock.completed("__ping__0") > 0, LIMIT)
            return sock.frames, sock.closed

    start = len(server.log)
    frames, closed = server.run(scenario())
    assert closed is None, closed
    assert any(f.get("id") == "__ping__0" for f in frames), frames
    refusal = [f for f in frames if f.get("error") and f.get("id") in ("n", None)]
    assert refusal and refusal[0]["error"]["type"] == "bad-request", frames
    assert_log_clean(server, start)


# -- after it all ----------------------------------------------------------------------------

def test_after_it_all_the_server_is_healthy_and_its_log_is_clean(server: Server) -> None:
    """Runs last (pytest keeps the file's order)."""
    assert_healthy_with_a_clean_log(server)
