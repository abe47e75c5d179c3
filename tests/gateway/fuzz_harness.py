"""The harness for fuzzing the gateway of a real ``toolmesh serve`` (used by ``test_fuzz.py``,
whose requests and frames come from the strategies in ``fuzz_strategies.py``, and by
``test_fuzz_findings.py``).

* :func:`fuzz_server` starts one server — with a bearer token, the joke tool service, the
  tell-joke tool and an MCP item whose server is down — on an event loop in a background
  thread (:class:`Background`), which also runs the WebSocket clients, so the property-based
  tests can be plain synchronous Hypothesis tests; a test gets it as a :class:`Server`.
* :func:`post` sends one REST request on a fresh connection; :func:`check` checks what every
  answer must be (no 5xx but the documented 503 and 504, the error shape for a status >= 400,
  a JSON object for a 200, an answer within :data:`LIMIT`); :func:`rest` is one such request
  as a fuzz example.
* The WebSocket client the socket tests use is in ``fuzz_socket.py``.
* :func:`assert_healthy_with_a_clean_log`: what each module checks last.
* :func:`log_problems` and :func:`assert_log_clean`: what the server logged since a given line
  — a ``Traceback``, an ``ERROR`` line, a ``Task exception was never retrieved`` — summarized
  one line per distinct problem.
* The failures (:class:`GatewayFailure` and one subclass per kind, so each kind is reported
  with its own example) and :class:`Findings`: Hypothesis stops generating at a test's first
  failing example, which would hide all but one of several failures; so each fuzz test
  (through :func:`fuzzing`) records every distinct failure, grouped by cause, with its
  shortest example and the log lines it caused, and fails once at the end, listing them.
  ``TOOLMESH_FUZZ_SHRINK=1`` instead stops at the first failure and lets Hypothesis shrink it.
* :func:`fuzz_settings`: derandomized, no example database; ``TOOLMESH_FUZZ_SCALE`` and
  ``TOOLMESH_FUZZ_RANDOM`` for a longer, randomized hunt.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import http.client
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, settings

from tests.gateway import fuzz_strategies as fz
from tests.gateway.fuzz_strategies import TOKEN, compact, dumps
from tests.servers import Served, toolmesh_serve

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
#: seconds within which config, mcp-tool, tool-service and unknown routes must answer
LIMIT = 5.0
#: the agent runs the offline demo model: fast, but a whole dialog
AGENT_LIMIT = 10.0
DOCUMENTED_5XX = (503, 504)


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


@contextlib.contextmanager
def fuzz_server(directory: Path) -> Iterator[Server]:
    """A configured ``toolmesh serve`` in ``directory``, for the duration of a ``with`` block
    (a test module's ``server`` fixture)."""
    bg = Background()
    # the fuzzer sends thousands of odd tokens from one address, each followed by the right
    # one: the failed-auth throttle (tests/gateway/test_throttle.py) would refuse that right
    # token, so it is off here; what is fuzzed is how tokens are read and checked
    serving = toolmesh_serve(directory, extra_env={"TOOLMESH_GATEWAY_TOKEN": TOKEN,
                                                   "TOOLMESH_AUTH_FAILURE_RATE": "0"})
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


def module_server(name: str) -> Any:
    """A module-scoped fixture of a :func:`fuzz_server` of the module's own, its data in a
    temporary folder named ``name``: ``server = module_server("fuzz")``."""
    @pytest.fixture(scope="module")
    def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
        with fuzz_server(tmp_path_factory.mktemp(name)) as srv:
            yield srv

    return server


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


def assert_healthy_with_a_clean_log(srv: Server) -> None:
    """After a module's tests: health, a config round trip, and nothing wrong in the whole
    log."""
    health = check(post(srv, "/api/v1/health", b"", method="GET"))
    assert health.status == 200 and health.json()["status"] == "ok", health
    value = json.dumps({"after": "fuzzing"})
    put = check(post(srv, "/api/v1/config", dumps({"operation": "put", "values": [
        {"type": "fuzz", "key": "fuzz-cfg-round-trip", "value": value}]}).encode()))
    assert "error" not in put.json(), put
    got = check(post(srv, "/api/v1/config", dumps({"operation": "get", "keys": [
        {"type": "fuzz", "key": "fuzz-cfg-round-trip"}]}).encode()))
    assert got.json()["values"][0]["value"] == value, got
    assert_log_clean(srv, 0)


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


# -- REST examples ---------------------------------------------------------------------------

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


def path_segment(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


#: services that exist only in flow "default" (toolmesh runs its agent and mcp-tool there only)
ONLY_IN_DEFAULT = ("agent", "mcp-tool")
