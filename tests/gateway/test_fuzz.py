"""Fuzzing the gateway of a real ``toolmesh serve``: whatever a client sends, over REST or the
WebSocket, the gateway answers — soon, in its documented shapes, without a traceback.

One server (with a bearer token, the joke tool service, the tell-joke tool and an MCP item
whose server is down) serves the whole module; it runs on an event loop in a background
thread, which also runs the WebSocket clients. The property-based tests are plain synchronous
Hypothesis tests (derandomized, no example database) that send one request per example.

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

Hypothesis stops generating at a test's first failing example, which would hide all but one
of several failures; so each fuzz test records every distinct failure (grouped by cause, with
its shortest example and the log lines it caused) and fails once at the end, listing them.
``TOOLMESH_FUZZ_SHRINK=1`` instead stops at the first failure and lets Hypothesis shrink it.

The focused tests after the fuzzers pin down each failure the fuzzers found, one behaviour
each (see their names). Run: ``python -m pytest -q tests/gateway/test_fuzz.py`` (~45 s).
"""

from __future__ import annotations

import asyncio
import collections
import http.client
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway import fuzz_strategies as fz
from tests.gateway.fuzz_strategies import TOKEN, Frame, compact, dumps
from tests.servers import Served, toolmesh_serve

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
#: seconds within which config, mcp-tool, tool-service and unknown routes must answer
LIMIT = 5.0
#: the agent runs the offline demo model: fast, but a whole dialog
AGENT_LIMIT = 10.0
DOCUMENTED_5XX = (503, 504)
DEEP = "[" * 5000 + "]" * 5000
HUGE_INT = "1" + "0" * 5000  # beyond Python's 4,300-digit int conversion limit


# -- the failures the properties look for (one class each, so Hypothesis reports each kind
#    of failure with its own minimal example) -------------------------------------------------

class GatewayFailure(AssertionError):
    """A property of the gateway does not hold; ``signature`` groups failures of one cause."""

    def __init__(self, message: str, signature: str = "") -> None:
        super().__init__(message)
        self.signature = signature


class ServerError(GatewayFailure):
    """A 5xx other than the documented 503/504."""


class BadErrorBody(GatewayFailure):
    """A status >= 400 whose body is not {"error": {"type": str, "message": str}}."""


class BadBody(GatewayFailure):
    """A 2xx whose body is not a JSON object."""


class TooSlow(GatewayFailure):
    """An answer, but later than the limit."""


class NoAnswer(GatewayFailure):
    """No answer at all within the limit (or the connection dropped without one)."""


class SocketClosed(GatewayFailure):
    """The server closed the WebSocket because of what the client sent."""


class IdLost(GatewayFailure):
    """A request frame with an id was refused with an error frame that does not carry it."""


class BadFrame(GatewayFailure):
    """A frame from the server that is not JSON or not in the documented shape."""


class LogProblem(GatewayFailure):
    """The server logged a traceback, an ERROR, or an unretrieved task exception."""


class AuthBypass(GatewayFailure):
    """A request without the token was served (or one with it refused)."""


# -- the server ------------------------------------------------------------------------------

class Background:
    """An event loop in a thread: runs the ``toolmesh serve`` process's log reader and the
    WebSocket clients, while the synchronous tests wait for them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fuzz-loop",
                                       daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        async def drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.loop.shutdown_asyncgens()

        self.run(drain(), 10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@dataclass
class Server:
    served: Served
    bg: Background
    host: str
    port: int

    @property
    def url(self) -> str:
        return self.served.url

    @property
    def log(self) -> list[str]:
        return self.served.log

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return self.bg.run(coro, timeout)

    def fence(self) -> None:
        """Return once every line the server logged before now is in :attr:`log`: ask for a
        config operation that the config service logs by name, and wait for that line."""
        marker = f"fence-{uuid.uuid4().hex}"
        post(self, "/api/v1/config", dumps({"operation": marker}).encode())
        deadline = time.monotonic() + 10
        while not any(marker in line for line in self.log[-50:]):
            if time.monotonic() > deadline:
                raise AssertionError(f"the log did not show {marker} within 10 s")
            time.sleep(0.005)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    bg = Background()
    serving = toolmesh_serve(tmp_path_factory.mktemp("fuzz"),
                             extra_env={"TOOLMESH_GATEWAY_TOKEN": TOKEN})
    try:
        served = bg.run(serving.__aenter__(), 60)
    except BaseException:
        bg.close()
        raise
    host, port = served.url.split("//")[1].strip("/").rsplit(":", 1)
    srv = Server(served, bg, host, int(port))
    try:
        _configure(srv)
        yield srv
    finally:
        try:
            bg.run(serving.__aexit__(None, None, None), 60)
        finally:
            bg.close()


def _configure(srv: Server) -> None:
    """The joke tool service and tool, and an MCP item whose server is not there."""
    joke = (ROOT / "examples/joke/joke-service.json").read_text()
    tool = (ROOT / "examples/joke/tell-joke.json").read_text()
    mcp = json.dumps({"url": "http://127.0.0.1:1/mcp"})
    reply = post(srv, "/api/v1/config", dumps({"operation": "put", "values": [
        {"type": "tool-service", "key": fz.JOKE_SERVICE, "value": joke},
        {"type": "tool", "key": "tell-joke", "value": tool},
        {"type": "mcp", "key": fz.FUZZ_MCP, "value": mcp}]}).encode())
    assert reply.status == 200 and "error" not in reply.json(), reply
    # the agent applies the change on its push: wait until it tells jokes
    deadline = time.monotonic() + 10
    while True:
        answer = post(srv, "/api/v1/flow/default/service/agent",
                      dumps({"question": "tell me a joke about food"}).encode(),
                      timeout=AGENT_LIMIT).json()
        if "Here's a pun" in str(answer.get("answer")):
            return
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)


# -- REST ------------------------------------------------------------------------------------

@dataclass
class Reply:
    method: str
    path: str
    request: bytes
    status: int
    content_type: str
    body: bytes
    elapsed: float

    def json(self) -> Any:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return (f"{self.method} {compact(self.path, 300)} {compact(self.request)} -> "
                f"{self.status} [{self.content_type}] {compact(self.body, 400)} in "
                f"{self.elapsed:.2f} s")


Headers = dict[str, "str | bytes | None"]


def post(srv: Server, path: str, body: bytes, *, headers: Headers | None = None,
         method: str = "POST", timeout: float = LIMIT + 1) -> Reply:
    """One request on a fresh connection; JSON content type and the token unless ``headers``
    says otherwise (a ``None`` value leaves that header out)."""
    sent: Headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}",
                     **(headers or {})}
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=timeout)
    start = time.monotonic()
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for name, value in sent.items():
            if value is not None:
                conn.putheader(name, value)
        if method != "GET":
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body if method != "GET" else None)
        response = conn.getresponse()
        data = response.read()
    except TimeoutError:
        raise NoAnswer(f"no answer within {timeout:g} s to {method} {compact(path, 300)} "
                       f"{compact(body)}", "no answer in time") from None
    except (ConnectionError, http.client.HTTPException) as e:
        raise NoAnswer(f"the connection failed without an answer to {method} "
                       f"{compact(path, 300)} {compact(body)}: {e!r}",
                       f"connection failed: {type(e).__name__}") from None
    finally:
        conn.close()
    return Reply(method, path, body, response.status, response.getheader("Content-Type") or "",
                 data, time.monotonic() - start)


def error_of(body: Any) -> Any:
    return body.get("error") if isinstance(body, dict) else None


def is_error_shape(error: Any) -> bool:
    return isinstance(error, dict) and isinstance(error.get("type"), str) \
        and isinstance(error.get("message"), str)


def check(reply: Reply, limit: float = LIMIT) -> Reply:
    """The properties every REST answer must have."""
    try:
        body = reply.json()
    except ValueError:
        body = None
    error = error_of(body)
    kind = error.get("type") if isinstance(error, dict) else None
    if reply.status >= 500 and reply.status not in DOCUMENTED_5XX:
        raise ServerError(repr(reply), f"{reply.status} {kind}")
    if reply.status >= 400:
        if not is_error_shape(error):
            raise BadErrorBody(repr(reply), f"{reply.status} {reply.content_type}")
    elif not isinstance(body, dict):
        raise BadBody(repr(reply), f"{reply.status} {reply.content_type}")
    if reply.elapsed > limit:
        raise TooSlow(repr(reply), f"{reply.status} {kind}")
    return reply


# -- the server's log ------------------------------------------------------------------------

PROBLEM = re.compile(r"Traceback|Task exception was never retrieved| ERROR | CRITICAL ")


def summarize(lines: list[str]) -> list[str]:
    """One summary per distinct problem in ``lines``: the line that announced it and the
    exception that ended its traceback, with how often it came."""
    found: collections.Counter[str] = collections.Counter()
    first: dict[str, str] = {}  # signature -> its first instance
    for i, line in enumerate(lines):
        followed_by_traceback = i + 1 < len(lines) and lines[i + 1].startswith("Traceback")
        if line.startswith(("Traceback", "During handling", "The above exception", " ")) \
                or not (PROBLEM.search(line) or followed_by_traceback):
            continue
        ending = ""
        if followed_by_traceback:
            for after in lines[i + 2:]:
                if not after.startswith((" ", "\t", "Traceback", "The above", "During",
                                         "\n")):
                    ending = " => " + after.strip()[:300]
                    break
        announced = re.sub(r"^\S+ \S+ ", "", line.strip())  # without the timestamp
        announced = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<id>", announced)[:300]
        text = announced + ending
        first.setdefault(signature_of(text), text)
        found[signature_of(text)] += 1
    if lines and lines[0].startswith("Traceback"):
        first.setdefault("-", "a traceback (its first line is before this test)")
        found["-"] += 1
    return [f"{n}x {first[key]}" for key, n in found.most_common()]


def log_problems(srv: Server, start: int, *, settle: float = 0.3) -> list[str]:
    """What went wrong in the log since line ``start``, once what the server did so far
    (and, ``settle`` seconds later, what it does after answering: config pushes) is in."""
    srv.fence()
    if settle:
        time.sleep(settle)
        srv.fence()
    return summarize(srv.log[start:])


def assert_log_clean(srv: Server, start: int) -> None:
    problems = log_problems(srv, start)
    assert not problems, "the server's log shows:\n" + "\n".join(problems)


def signature_of(text: str) -> str:
    """Failures that differ only in numbers, ids or quoted values have one signature."""
    text = re.sub(r"^\d+x ", "", text)
    text = re.sub(r"(answering [A-Z]+ )\S+", r"\1<path>", text)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    return re.sub(r"\d+(\.\d+)?", "N", text)[:400]


@dataclass
class Finding:
    kind: str
    signature: str
    example: str
    log: list[str]
    count: int = 1


#: set TOOLMESH_FUZZ_SHRINK=1 to have Hypothesis stop at the first failure of each fuzz test
#: and shrink it to a minimal example (instead of collecting every distinct failure)
SHRINK = os.environ.get("TOOLMESH_FUZZ_SHRINK") == "1"


class Findings:
    """Every distinct failure of one fuzz test, with its shortest example.

    Hypothesis stops generating at the first failing example; with the gateway's many known
    failures that would hide all but one per test. So each example's failure (and what it
    made the server log) is recorded here and the test fails once, at the end, listing them.
    """

    def __init__(self, srv: Server) -> None:
        self.srv = srv
        self.found: dict[tuple[str, str], Finding] = {}
        self.examples = 0

    def example(self, run: Callable[[], str], *, settle: float = 0.0) -> None:
        """Run one example (``run`` returns a description of what it did, or raises a
        :class:`GatewayFailure`) and record what failed, in its answer or in the log."""
        self.examples += 1
        start = len(self.srv.log)
        failure: GatewayFailure | None = None
        try:
            what = run()
        except GatewayFailure as e:
            failure, what = e, str(e)
        logged = log_problems(self.srv, start, settle=settle)
        if failure is not None:
            kind = type(failure).__name__
            signature = failure.signature or signature_of(str(failure))
        elif logged:
            kind, signature = "LogProblem", signature_of(logged[0])
        else:
            return
        if logged and failure is not None:
            signature += " | log: " + signature_of(logged[0])
        self.add(kind, signature, what, logged)
        if SHRINK:
            raise failure or LogProblem(what + "\nserver log:\n" + "\n".join(logged))

    def add(self, kind: str, signature: str, example: str, log: list[str]) -> None:
        known = self.found.get((kind, signature))
        if known is None:
            self.found[(kind, signature)] = Finding(kind, signature, example, log)
            return
        known.count += 1
        if len(example) < len(known.example):
            known.example, known.log = example, log

    def report(self, after: int) -> None:
        """Fail with every finding (and what the log shows after the last example)."""
        late = log_problems(self.srv, after)
        for problem in late:
            self.add("LogProblem", signature_of(problem), "(after the examples)", [problem])
        if not self.found:
            return
        parts = [f"{len(self.found)} distinct failure(s) in {self.examples} examples:"]
        for f in sorted(self.found.values(), key=lambda f: (f.kind, -f.count)):
            parts.append(f"\n[{f.kind}] {f.signature}\n  seen {f.count}x; shortest example:"
                         f"\n  {f.example}")
            parts += [f"  server log: {line}" for line in f.log]
        raise GatewayFailure("\n".join(parts))


def fuzzing(srv: Server, fuzz: Callable[[Findings], None]) -> None:
    """Run the Hypothesis test ``fuzz`` (which runs its examples through the findings), then
    fail if anything was found."""
    findings = Findings(srv)
    fuzz(findings)
    findings.report(len(srv.log))


#: ``TOOLMESH_FUZZ_SCALE=3 TOOLMESH_FUZZ_RANDOM=1`` for a longer, randomized hunt (CI runs the
#: fixed, derandomized examples so that a failure reproduces)
SCALE = float(os.environ.get("TOOLMESH_FUZZ_SCALE", "1"))
RANDOM = os.environ.get("TOOLMESH_FUZZ_RANDOM") == "1"


def fuzz_settings(examples: int) -> settings:
    return settings(max_examples=int(examples * SCALE), deadline=None, derandomize=not RANDOM,
                    database=None,
                    print_blob=False, report_multiple_bugs=True,
                    suppress_health_check=list(HealthCheck))


# -- REST fuzzing ----------------------------------------------------------------------------

def rest(srv: Server, path: str, body: bytes, *, limit: float = LIMIT,
         headers: Headers | None = None) -> Callable[[], str]:
    """An example: one request, checked."""
    def run() -> str:
        return repr(check(post(srv, path, body, headers=headers, timeout=limit + 1), limit))
    return run


def remove_fuzz_config(srv: Server) -> None:
    """Delete what the config fuzzing stored (a bad item must not outlive the test that put
    it: a prompt item the prompt service cannot parse breaks every later prompt change)."""
    for type in fz.CONFIG_TYPES:
        listed = post(srv, "/api/v1/config", dumps({"operation": "list", "type": type}).encode())
        keys = [k for k in listed.json().get("directory") or []
                if k.startswith(fz.CONFIG_KEY_PREFIX)]
        if keys:
            post(srv, "/api/v1/config", dumps({"operation": "delete", "keys": [
                {"type": type, "key": k} for k in keys]}).encode())


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


def path_segment(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


#: services that exist only in flow "default": any other flow is left to
#: test_a_request_for_a_flow_that_does_not_exist_is_answered_promptly
ONLY_IN_DEFAULT = ("agent", "mcp-tool")


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

class Socket:
    """A client WebSocket whose frames are read as they come, by a task of its own."""

    def __init__(self, session: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse):
        self.session = session
        self.ws = ws
        self.frames: list[Any] = []
        self.closed: str | None = None
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, srv: Server, *, token: bool = True) -> Socket:
        session = aiohttp.ClientSession()
        try:
            query = f"?token={TOKEN}" if token else ""
            ws = await session.ws_connect(srv.url + "api/v1/socket" + query, autoclose=False,
                                          max_msg_size=0)
        except BaseException:
            await session.close()
            raise
        return cls(session, ws)

    async def _read(self) -> None:
        try:
            while True:
                message = await self.ws.receive()
                if message.type == aiohttp.WSMsgType.TEXT:
                    try:
                        self.frames.append(json.loads(message.data))
                    except ValueError:
                        self.frames.append(BadFrame(f"not JSON: {message.data[:300]!r}"))
                elif message.type == aiohttp.WSMsgType.BINARY:
                    self.frames.append(BadFrame(f"a binary frame: {message.data[:300]!r}"))
                else:
                    if message.type == aiohttp.WSMsgType.ERROR:
                        self.closed = f"the connection failed: {message.data!r}"
                    else:
                        self.closed = (f"closed by the server: {message.type.name} code "
                                       f"{self.ws.close_code} {message.extra!r}")
                    return
                self._changed.set()
        finally:
            self.closed = self.closed or "closed"
            self._changed.set()

    async def close(self) -> None:
        if not self.ws.closed:
            await self.ws.close()
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        await self.session.close()

    async def __aenter__(self) -> Socket:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send(self, frame: Frame | dict[str, Any]) -> None:
        data = frame.data if isinstance(frame, Frame) else dumps(frame)
        if self.closed:
            return
        try:
            if isinstance(data, bytes):
                await self.ws.send_bytes(data)
            else:
                await self.ws.send_str(data)
        except ConnectionError:
            pass  # the reader reports the close

    async def wait(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``done()`` or the socket closes; whether ``done()``."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not done():
            if self.closed:
                return done()
            self._changed.clear()
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return False
            try:
                async with asyncio.timeout(left):
                    await self._changed.wait()
            except TimeoutError:
                return done()
        return True

    # -- what came back

    def with_id(self, request_id: Any) -> list[dict[str, Any]]:
        return [f for f in self.frames if isinstance(f, dict) and "id" in f
                and f["id"] == request_id and type(f["id"]) is type(request_id)]

    def completed(self, request_id: Any) -> int:
        return sum(1 for f in self.with_id(request_id) if f.get("complete") is True)

    def anonymous_errors(self) -> int:
        return sum(1 for f in self.frames if isinstance(f, dict) and f.get("id") is None
                   and "error" in f and f.get("type") != "auth-failed")

    def check_frames(self) -> None:
        for f in self.frames:
            if isinstance(f, BadFrame):
                raise f
            if not isinstance(f, dict):
                raise BadFrame(f"a frame that is not an object: {f!r:.300}")
            if f.get("type") in ("auth-ok", "auth-failed"):
                continue
            if f.get("error") is not None and not is_error_shape(f["error"]):
                raise BadFrame(f"an error not in the documented shape: {f!r:.400}")
            if "complete" not in f:
                raise BadFrame(f"a frame without 'complete': {f!r:.400}")


def usable_id(frame: Frame) -> str | int | None:
    """The id the gateway must answer ``frame`` with, if it has one the gateway accepts (a
    string or an integer) and the test can read (Python's json parses the frame)."""
    if isinstance(frame.data, bytes):
        return None
    try:
        parsed = json.loads(frame.data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict) or parsed.get("type") == "auth":
        return None
    request_id = parsed.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return None
    if isinstance(request_id, str) and fz.has_surrogate(request_id):
        return None
    return request_id


def ping(i: Any) -> dict[str, Any]:
    return {"id": f"__ping__{i}", "service": "config",
            "request": {"operation": "list", "type": "fuzz"}}


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


# -- focused tests: one per failure the fuzzers found ----------------------------------------

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

def test_after_the_fuzzing_the_server_is_healthy_and_its_log_is_clean(server: Server) -> None:
    """Runs last (pytest keeps the file's order): health, a config round trip, and the log of
    the whole module."""
    health = check(post(server, "/api/v1/health", b"", method="GET"))
    assert health.status == 200 and health.json()["status"] == "ok", health
    value = json.dumps({"after": "fuzzing"})
    put = check(post(server, "/api/v1/config", dumps({"operation": "put", "values": [
        {"type": "fuzz", "key": "fuzz-cfg-round-trip", "value": value}]}).encode()))
    assert "error" not in put.json(), put
    got = check(post(server, "/api/v1/config", dumps({"operation": "get", "keys": [
        {"type": "fuzz", "key": "fuzz-cfg-round-trip"}]}).encode()))
    assert got.json()["values"][0]["value"] == value, got
    assert_log_clean(server, 0)

