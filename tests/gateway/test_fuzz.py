"""Fuzzing the gateway of a real ``toolmesh serve``: whatever a client sends, over REST or the
WebSocket, the gateway answers — soon, in its documented shapes, without a traceback.

One server (with a bearer token, the joke tool service, the tell-joke tool and an MCP item
whose server is down; see ``fuzz_harness.py``) serves the whole module. The property-based
tests are plain synchronous Hypothesis tests (derandomized, no example database) that send one
request per example.

Properties, for every request:

* no 5xx status except the documented 503 (server busy) and 504 (timeout);
* every status >= 400 has the body ``{"error": {"type": str, "message": str}}``; every 200
  has a JSON object;
* an answer within 5 s (10 s for the agent, which runs the offline demo model);
* on the WebSocket: every request frame that has an id (a string or an integer) gets a frame
  with that id and ``"complete": true`` — also when the frame is refused — and input never
  makes the server close the socket;
* the server's log gains no ``Traceback``, no ``ERROR`` line and no ``Task exception was never
  retrieved``.

Each fuzz test records every distinct failure and fails once at the end, listing them (see
``fuzz_harness.Findings``); ``TOOLMESH_FUZZ_SHRINK=1`` instead stops at the first failure and
lets Hypothesis shrink it.

The focused tests in ``test_fuzz_findings.py`` pin down each failure the fuzzers found, one
behaviour each. Run: ``python -m pytest -q tests/gateway/test_fuzz.py`` (~35 s).
"""

from __future__ import annotations

import asyncio
import collections
import json
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.gateway import fuzz_strategies as fz
from tests.gateway.fuzz_harness import (
    AGENT_LIMIT,
    LIMIT,
    ONLY_IN_DEFAULT,
    AuthBypass,
    BadFrame,
    Findings,
    Headers,
    IdLost,
    NoAnswer,
    Server,
    SocketClosed,
    assert_healthy_with_a_clean_log,
    assert_log_clean,
    check,
    fuzz_settings,
    fuzzing,
    is_error_shape,
    module_server,
    path_segment,
    post,
    remove_fuzz_config,
    rest,
    signature_of,
)
from tests.gateway.fuzz_socket import Socket, ping, usable_id
from tests.gateway.fuzz_strategies import TOKEN, Frame, compact, dumps

server = module_server("fuzz")


# -- REST fuzzing ----------------------------------------------------------------------------

@pytest.mark.slow  # seconds, measured (tests/conftest.py)
def test_fuzz_config_route(server: Server) -> None:
    def fuzz(findings: Findings) -> None:
        @fuzz_settings(400)
        @given(body=fz.bodies(fz.config_requests()))
        def example(body: bytes) -> None:
            # a put of a prompt makes the prompt service reload: let it happen in this example
            findings.example(rest(server, "/api/v1/config", body),
                             settle=0.05 if b"prompt" in body else 0.0)
        try:
            example()
        finally:
            remove_fuzz_config(server)

    fuzzing(server, fuzz)


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
def test_fuzz_config_put_values(server: Server) -> None:
    """Puts of well-formed items whose values are any JSON text: what the config service
    validates (tool, mcp, tool-service), what other services parse (prompt), and the rest."""
    def fuzz(findings: Findings) -> None:
        @fuzz_settings(150)
        @given(request=fz.config_puts)
        def example(request: dict[str, Any]) -> None:
            body = fz.Body(dumps(request).encode())
            findings.example(rest(server, "/api/v1/config", body),
                             settle=0.05 if b"prompt" in body else 0.0)
        try:
            example()
        finally:
            remove_fuzz_config(server)

    fuzzing(server, fuzz)


def test_fuzz_agent_route(server: Server) -> None:
    def fuzz(findings: Findings) -> None:
        @fuzz_settings(150)
        @given(body=fz.bodies(fz.agent_requests))
        def example(body: bytes) -> None:
            findings.example(rest(server, "/api/v1/flow/default/service/agent", body,
                                  limit=AGENT_LIMIT))
        example()

    fuzzing(server, fuzz)


def test_fuzz_mcp_tool_route(server: Server) -> None:
    def fuzz(findings: Findings) -> None:
        @fuzz_settings(150)
        @given(body=fz.bodies(fz.mcp_requests))
        def example(body: bytes) -> None:
            findings.example(rest(server, "/api/v1/flow/default/service/mcp-tool", body))
        example()

    fuzzing(server, fuzz)


def test_fuzz_tool_service_route(server: Server) -> None:
    def fuzz(findings: Findings) -> None:
        @fuzz_settings(300)
        @given(body=fz.bodies(fz.tool_service_requests))
        def example(body: bytes) -> None:
            findings.example(rest(server, "/api/v1/flow/default/service/tool-service", body))
        example()

    fuzzing(server, fuzz)


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
def test_fuzz_flow_names_and_unknown_routes(server: Server) -> None:
    flows = st.one_of(fz.strings, st.text(min_size=1, max_size=200),
                      st.sampled_from(["a" * 4000, "%2F", "..", ".", "default"])
                      ).filter(lambda f: f != "")
    services = st.one_of(st.sampled_from(["tool-service", "nonsense", "config"]), fz.strings)

    def fuzz(findings: Findings) -> None:
        @fuzz_settings(150)
        @given(route=st.sampled_from(["flow", "global", "other"]), flow=flows,
               service=services, body=fz.bodies(fz.tool_service_requests))
        def example(route: str, flow: str, service: str, body: bytes) -> None:
            if route == "flow":
                if service in ONLY_IN_DEFAULT or service == "":
                    service = "nonsense"
                path = f"/api/v1/flow/{path_segment(flow)}/service/{path_segment(service)}"
            elif route == "global":
                path = f"/api/v1/{path_segment(service)}"
            else:
                path = f"/api/v1/flow/{path_segment(flow)}/{path_segment(service)}/x"
            findings.example(rest(server, path, body))
        example()

    fuzzing(server, fuzz)


def test_fuzz_headers(server: Server) -> None:
    body = dumps({"operation": "list", "type": "fuzz"}).encode()

    def fuzz(findings: Findings) -> None:
        @fuzz_settings(200)
        @given(auth=st.one_of(st.none(), fz.authorizations),
               content_type=st.one_of(st.just(b"application/json"), fz.content_types),
               origin=st.one_of(st.none(), fz.origins),
               workspace=st.one_of(st.none(), fz.header_bytes))
        def example(auth: bytes | None, content_type: bytes, origin: bytes | None,
                    workspace: bytes | None) -> None:
            headers: Headers = {"Authorization": auth, "Content-Type": content_type,
                                "Origin": origin, "X-Workspace": workspace}

            def run() -> str:
                reply = check(post(server, "/api/v1/config", body, headers=headers))
                shown = f"headers {headers!r}: {reply!r}"
                if reply.status == 200 and (auth is None or TOKEN.encode() not in auth):
                    raise AuthBypass(f"served without the token: {shown}", "served")
                if auth == b"Bearer " + TOKEN.encode() and content_type == b"application/json" \
                        and origin is None and reply.status == 401:
                    raise AuthBypass(f"the right token was refused: {shown}", "refused")
                return shown

            findings.example(run)
        example()

    fuzzing(server, fuzz)


# -- WebSocket -------------------------------------------------------------------------------

async def exchange(srv: Server, frames: list[Frame]) -> str:
    """Send each frame followed by a ping (a config request); the ping's answer shows the
    socket still serves, and that the frame's own refusal, if any, has been sent (the gateway
    refuses a frame before it reads the next). Then every frame with an id must complete."""
    async with await Socket.open(srv) as sock:
        expected: collections.Counter[tuple[type, Any]] = collections.Counter()
        ids: dict[tuple[type, Any], Any] = {}
        agent = False
        for i, frame in enumerate(frames):
            anonymous = sock.anonymous_errors()
            await sock.send(frame)
            await sock.send(ping(i))
            answered = await sock.wait(lambda: sock.completed(f"__ping__{i}") > 0, LIMIT)
            if sock.closed:
                raise SocketClosed(f"{sock.closed}, after frame {i}: {frame!r}",
                                   signature_of(sock.closed))
            if not answered:
                raise NoAnswer(f"no answer within {LIMIT:g} s to a config request sent after "
                               f"frame {i}: {frame!r}", "the ping after a frame")
            request_id = usable_id(frame)
            if request_id is None:
                continue
            agent = agent or '"agent"' in str(frame.data)
            key = (type(request_id), request_id)
            expected[key] += 1
            ids[key] = request_id
            if sock.anonymous_errors() > anonymous and not sock.with_id(request_id):
                refusal = [f for f in sock.frames if isinstance(f, dict)
                           and f.get("id") is None][-1]
                raise IdLost(f"frame {frame!r} with id {request_id!r} was refused with "
                             f"{compact(refusal, 300)}",
                             signature_of(str(refusal.get("error", {}).get("message"))))
        limit = AGENT_LIMIT if agent else LIMIT
        done = await sock.wait(lambda: all(sock.completed(ids[k]) >= n
                                           for k, n in expected.items()), limit)
        if sock.closed:
            raise SocketClosed(f"{sock.closed}, after all {len(frames)} frames: {frames!r}",
                               signature_of(sock.closed))
        if not done:
            missing = [ids[k] for k, n in expected.items() if sock.completed(ids[k]) < n]
            raise NoAnswer(f"no complete frame within {limit:g} s for ids {missing!r:.300} of "
                           f"{frames!r}", "a request frame")
        sock.check_frames()
        return f"{frames!r}"


def test_fuzz_socket_frames(server: Server) -> None:
    def fuzz(findings: Findings) -> None:
        @fuzz_settings(120)
        @given(frames=st.lists(fz.frames(), min_size=1, max_size=5))
        def example(frames: list[Frame]) -> None:
            findings.example(lambda: server.run(exchange(server, frames), 60))
        example()

    fuzzing(server, fuzz)


async def authenticate(srv: Server, frame: Frame) -> str:
    """An auth frame, then the right token, then a request: the odd frame is answered
    (auth-failed, or an error frame), the socket stays open, and the right token works."""
    async with await Socket.open(srv, token=False) as sock:
        await sock.send(frame)
        await sock.wait(lambda: len(sock.frames) > 0, LIMIT)
        if sock.closed:
            raise SocketClosed(f"{sock.closed}, after {frame!r}", signature_of(sock.closed))
        if not sock.frames:
            raise NoAnswer(f"no answer within {LIMIT:g} s to {frame!r}", "the auth frame")
        reply = sock.frames[0]
        try:
            token = json.loads(frame.data).get("token")
        except (ValueError, RecursionError, AttributeError):
            token = None
        if isinstance(reply, dict) and reply.get("type") == "auth-ok" and token != TOKEN:
            raise AuthBypass(f"{frame!r} was accepted: {reply!r}", "a wrong token accepted")
        if not (isinstance(reply, dict) and (reply.get("type") in ("auth-ok", "auth-failed")
                                             or is_error_shape(reply.get("error")))):
            raise BadFrame(f"{frame!r} was answered {compact(reply, 300)}", "auth answer")
        await sock.send({"type": "auth", "token": TOKEN})
        ok = await sock.wait(lambda: any(isinstance(f, dict) and f.get("type") == "auth-ok"
                                         for f in sock.frames[1:]), LIMIT)
        if sock.closed:
            raise SocketClosed(f"{sock.closed}, after the right token, after {frame!r}",
                               signature_of(sock.closed))
        if not ok:
            raise AuthBypass(f"the right token was not accepted after {frame!r}: "
                             f"{compact(sock.frames, 500)}", "the right token refused")
        await sock.send(ping("after-auth"))
        if not await sock.wait(lambda: sock.completed("__ping__after-auth") > 0, LIMIT):
            raise NoAnswer(f"no answer to a request after authenticating, after {frame!r}: "
                           f"{sock.closed or ''}", "a request after authenticating")
        sock.check_frames()
        return f"{frame!r} -> {compact(reply, 300)}"


def test_fuzz_socket_auth_frames(server: Server) -> None:
    def fuzz(findings: Findings) -> None:
        @fuzz_settings(60)
        @given(token=fz.auth_tokens, extra=st.dictionaries(
            st.sampled_from(["id", "workspace"]), fz.any_json, max_size=2))
        def example(token: Any, extra: dict[str, Any]) -> None:
            frame = Frame(dumps({"type": "auth", "token": token, **extra}))
            findings.example(lambda: server.run(authenticate(server, frame), 60))
        example()

    fuzzing(server, fuzz)


def flood_request(i: int) -> dict[str, Any]:
    kind = i % 5
    if kind == 0:
        return {"id": i, "service": "config", "request": {"operation": "config"}}
    if kind == 1:
        return {"id": i, "service": "tool-service", "request": {
            "id": fz.JOKE_SERVICE, "arguments": {"topic": "food"}}}
    if kind == 2:
        return {"id": i, "service": "agent", "request": {"question": "tell me a joke",
                                                         "streaming": i % 2 == 0}}
    if kind == 3:
        return {"id": i, "service": "mcp-tool", "request": {"name": fz.FUZZ_MCP}}
    return {"id": i, "service": "nonsense", "request": {}}


async def flood(srv: Server, count: int) -> int:
    """``count`` requests sent at once on one socket: each completes (some with
    too-many-requests), the socket stays open; how many were refused as too many."""
    async with await Socket.open(srv) as sock:
        for i in range(count):
            await sock.send(flood_request(i))
        done = await sock.wait(lambda: all(sock.completed(i) for i in range(count)), 30)
        if sock.closed:
            raise SocketClosed(sock.closed, signature_of(sock.closed))
        missing = [i for i in range(count) if not sock.completed(i)]
        assert done, f"no complete frame for {len(missing)} of {count}: {missing[:20]}"
        sock.check_frames()
        return sum(1 for f in sock.frames if isinstance(f, dict)
                   and (f.get("error") or {}).get("type") == "too-many-requests")


async def hang_up(srv: Server) -> None:
    """Requests in flight, then the client leaves (over the WebSocket, and over REST)."""
    for _ in range(3):
        sock = await Socket.open(srv)
        for i in range(40):
            await sock.send(flood_request(i))
        await sock.close()
    async with aiohttp.ClientSession() as http:
        for _ in range(10):
            try:
                async with http.post(srv.url + "api/v1/flow/default/service/agent",
                                     json={"question": "tell me a joke"},
                                     headers={"Authorization": f"Bearer {TOKEN}"},
                                     timeout=aiohttp.ClientTimeout(total=0.005)):
                    pass
            except TimeoutError:
                pass
    await asyncio.sleep(1)


def test_many_socket_requests_at_once(server: Server) -> None:
    async def scenario() -> None:
        await flood(server, 300)
        await asyncio.gather(*(flood(server, 60) for _ in range(10)))
        await hang_up(server)

    start = len(server.log)
    server.run(scenario(), 120)
    assert_log_clean(server, start)


# -- after it all ----------------------------------------------------------------------------

def test_after_the_fuzzing_the_server_is_healthy_and_its_log_is_clean(server: Server) -> None:
    """Runs last (pytest keeps the file's order)."""
    assert_healthy_with_a_clean_log(server)
