"""Self-announcing tool services across real processes on the real RabbitMQ (docs/announcements.md).

One deployment for the whole module, in a vhost of its own: ``toolmesh run config`` (SQLite),
``agent``, ``prompt``, ``text-completion`` (the offline demo model, which calls any tool it is
told to ``use TOOL with {JSON}``) and ``gateway``, each its own process, and **no config
written**. Then, each test starting and stopping its own tool services:

* ``toolmesh run wordtools:WordCount`` (the tool-services guide's example, run from its
  folder) is offered by the agent as soon as it is up, and a dialog calls it; SIGTERM (a
  goodbye) removes the tool at once, SIGKILL (silence) after about its ttl; of two replicas,
  one killed leaves the tool offered with one live instance;
* a tool service written with nothing but aio-pika, announcing itself on the exchange a
  non-Python author has to know, is offered and called like any other;
* a *configured* tool of a service that announced and is now gone fails at once with
  ``no live instance of tool service ...`` instead of waiting out the tool timeout;
* nothing the gateway accepts publishes on the announcement queue.

The agent's log line ``...: tools of workspace 'default': A, B`` is written right after it
installs a new tool set; tests wait on it (and on the registry's lines about instances), then
check what the gateway's status routes say. Nothing here sleeps to synchronise.

The wire, for a service in any language (what the raw-AMQP test does, in RabbitMQ terms):

* announce on the **fanout exchange ``tg.notify.tool-descriptors``** (durable; routing key
  empty) a JSON body ``{"id", "instance", "workspace", "descriptor", "tools", "ttl"}``, again
  every ``ttl / 3`` seconds, and ``{"id", "instance", "goodbye": true}`` when stopping;
* serve requests from a queue bound to the fanout exchange ``tg.request.<topic>`` (durable);
  a request's body is ``{"user", "config": "<JSON text>", "arguments": "<JSON text>"}`` and its
  AMQP header ``id`` names the call;
* answer on the fanout exchange ``tg.response.<topic>`` with the same ``id`` header and the
  body ``{"response": "<text>", "end_of_stream": true}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aio_pika
import aiohttp
import pytest
import pytest_asyncio

from tests.conftest import RUN_MARKER
from tests.e2e.cluster import Cluster, Proc, until
from tests.examples.loading import EXAMPLES
from tests.forkserver import spawn
from tests.processes import env, run_toolmesh
from tests.rabbit import own_vhost

pytestmark = [pytest.mark.rabbitmq, pytest.mark.asyncio(loop_scope="module")]

WORDCOUNT = EXAMPLES / "wordcount"
#: the ttl the tests' services announce (heartbeats every TTL / 3 s)
TTL = 2.0
#: the ttl of a service whose first announcement is timed: its heartbeats are far enough
#: apart (2 s) that being offered within half of that shows the first announcement did it,
#: not a heartbeat, even on a busy machine
SLOW_TTL = 6.0
#: SIGTERM says goodbye: the tool must be gone well within any ttl here
GONE_AFTER_GOODBYE = 1.0
#: a dialog whose tool fails at once (two completions of the demo model and a refused call)
FAST_DIALOG = 1.0
#: bound on every wait for something the deployment does "at once"
SOON = 15.0

#: the announcement exchange and the probe's, as RabbitMQ names them (toolmesh.bus.rabbitmq)
ANNOUNCEMENTS = "tg.notify.tool-descriptors"
#: the agent log line that lists its tools after each rebuild
TOOLS_LINE = re.compile(r"tools of workspace 'default': (.*)$")


# --- the deployment -------------------------------------------------------------------------

@dataclass
class Mesh:
    bus: str
    url: str
    cluster: Cluster
    agent: Proc
    http: aiohttp.ClientSession
    #: services started by the current test (stopped after it)
    started: list[Proc] = field(default_factory=list)
    _count: int = 0

    async def post(self, path: str, body: Any, *, timeout: float = 30) -> tuple[int, Any]:
        async with self.http.post(self.url + path, json=body,
                                  timeout=aiohttp.ClientTimeout(total=timeout)) as r:
            return r.status, await r.json(content_type=None)

    async def tools(self) -> dict[str, dict[str, Any]]:
        """The agent's tools by key (``agent-tools``: status, source, service)."""
        status, body = await self.post("api/v1/flow/default/service/agent-tools", {})
        assert status == 200, body
        return {tool["key"]: tool for tool in body["tools"]}

    async def offered(self) -> set[str]:
        return {key for key, tool in (await self.tools()).items()
                if tool["status"] == "available"}

    async def services(self) -> dict[str, dict[str, Any]]:
        """The tool services the agent knows, by id (``agent-services``)."""
        status, body = await self.post("api/v1/flow/default/service/agent-services", {})
        assert status == 200, body
        return {service["id"]: service for service in body["services"]}

    async def ask(self, question: str, *, timeout: float = 30) -> str:
        """One dialog over REST: the answer."""
        status, body = await self.post("api/v1/flow/default/service/agent",
                                       {"question": question}, timeout=timeout)
        assert status == 200, body
        return str(body["answer"])

    async def start_wordcount(self, *extra: str, ttl: float = TTL) -> Proc:
        """``toolmesh run wordtools:WordCount`` from the example's folder, as its author runs
        it; returns once it is ready (serving and announced)."""
        self._count += 1
        name = f"wordcount-{self._count}"
        proc = await spawn(
            "toolmesh.cli.main", "run", "wordtools:WordCount",
            "--bus", self.bus, "--announce-ttl", f"{ttl:g}", *extra, env=env(), cwd=WORDCOUNT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        p = self.cluster.procs[name] = Proc(name, proc)
        self.started.append(p)
        await p.wait_for(r"ready:", timeout=60)
        return p

    def tools_line(self, after: int) -> list[str] | None:
        """The agent's tools as its last rebuild from line ``after`` on logged them."""
        found = None
        for line in self.agent.lines[after:]:
            if m := TOOLS_LINE.search(line):
                found = [] if m.group(1).strip() == "(none)" else m.group(1).strip().split(", ")
        return found

    async def rebuilt(self, predicate: Callable[[list[str]], bool], *, after: int,
                      timeout: float = SOON) -> list[str]:
        """Wait until a rebuild logged from line ``after`` on has tools that satisfy
        ``predicate``; those tools."""
        def holds() -> bool:
            tools = self.tools_line(after)
            return tools is not None and predicate(tools)

        await until(holds, [self.agent], timeout=timeout)
        tools = self.tools_line(after)
        assert tools is not None
        return tools

    def mark(self) -> int:
        """The agent log's position now (to wait for what it says from here on)."""
        return len(self.agent.lines)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def deployment(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mesh]:
    data = tmp_path_factory.mktemp("announcements")
    async with own_vhost(f"{RUN_MARKER}-announce") as bus, aiohttp.ClientSession() as http:
        c = Cluster()
        try:
            parts = {
                "config": ["run", "config", "--config-store", f"sqlite:///{data}/config.db"],
                "agent": ["run", "agent"],
                "prompt": ["run", "prompt"],
                "text-completion": ["run", "text-completion"],
                "gateway": ["run", "gateway", "--port", "0"],
            }
            await asyncio.gather(*(c.toolmesh(name, *args, "--bus", bus)
                                   for name, args in parts.items()))
            m = await c.procs["gateway"].wait_for(r"gateway listening on (\S+)")
            mesh = Mesh(bus=bus, url=m.group(1), cluster=c, agent=c.procs["agent"], http=http)
            # the agent has built the default workspace's tools: none
            await mesh.rebuilt(lambda tools: True, after=0)
            yield mesh
        except BaseException:
            print(c.logs(), file=sys.stderr)
            raise
        finally:
            codes = await c.stop_all()
            bad = {name: code for name, code in codes.items() if code not in (0, -9)}
            assert not bad, (bad, c.logs())


@pytest_asyncio.fixture(loop_scope="module")
async def mesh(deployment: Mesh) -> AsyncIterator[Mesh]:
    """The deployment, offering no tools, for one test; the test's services stopped after it
    (a test prints the logs when it fails: :func:`evidence`)."""
    assert await deployment.offered() == set(), "a test before this one left tools offered"
    deployment.started = []
    try:
        yield deployment
    finally:
        for p in deployment.started:
            await p.stop()
        # what they offered is gone again (their goodbyes, or the ttl of killed ones; the
        # next test checks)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(TTL + SOON):
                while True:
                    seen = len(deployment.agent.lines)
                    if not await deployment.offered():
                        break
                    await deployment.agent.grown(seen)


@contextlib.asynccontextmanager
async def evidence(mesh: Mesh) -> AsyncIterator[None]:
    """Print every process's log when the block fails (pytest shows it with the failure)."""
    try:
        yield
    except BaseException:
        print(mesh.cluster.logs(), file=sys.stderr)
        raise


# --- toolmesh run wordtools:WordCount ------------------------------------------------------

async def test_a_service_is_offered_when_it_starts_and_gone_at_once_when_it_stops(
        mesh: Mesh) -> None:
    async with evidence(mesh):
        mark = mesh.mark()
        started = time.monotonic()
        service = await mesh.start_wordcount(ttl=SLOW_TTL)
        ready = time.monotonic()
        await mesh.rebuilt(lambda tools: "count-words" in tools, after=mark)
        offered = time.monotonic()
        print(f"\nprocess start -> ready {ready - started:.2f} s, ready -> offered by the "
              f"agent {offered - ready:.3f} s")
        # well before its first heartbeat (SLOW_TTL / 3 after ready): it announced itself
        # at start
        assert offered - ready < SLOW_TTL / 6, offered - ready
        tools = await mesh.tools()
        assert tools["count-words"]["status"] == "available", tools
        assert tools["count-words"]["source"] == "announced", tools
        assert tools["count-words"]["service"] == "word-count", tools
        # no config was written: it is all the announcement's
        code, out, err = await run_toolmesh("config", "list", "tool", "-u", mesh.url)
        assert (code, out.strip()) == (0, ""), (out, err)

        # the dialog, as a user runs it
        code, out, err = await run_toolmesh("agent", 'Use count-words with {"text": "a b c"}',
                                            "-u", mesh.url, as_user=True)
        assert (code, out.strip()) == (0, "3 words"), err

        # SIGTERM: the service says goodbye, the agent drops the tool at once
        mark = mesh.mark()
        stopped = time.monotonic()
        service.proc.send_signal(signal.SIGTERM)
        await mesh.rebuilt(lambda tools: "count-words" not in tools, after=mark)
        gone = time.monotonic() - stopped
        print(f"SIGTERM -> tool gone {gone:.3f} s (ttl {SLOW_TTL:g} s)")
        assert gone < GONE_AFTER_GOODBYE, gone
        # (a second SIGTERM while it stops would kill it: wait for the first to end it)
        assert await asyncio.wait_for(service.proc.wait(), SOON) == 0
        assert "count-words" not in await mesh.tools()
        services = await mesh.services()
        assert services["word-count"]["live"] == 0, services
        assert services["word-count"]["announced"] is True, services
        # the demo model is shown the tools: it says count-words is not among them
        answer = await mesh.ask('Use count-words with {"text": "a b c"}')
        assert "not offered" in answer, answer


async def test_a_killed_service_is_dropped_after_about_its_ttl(mesh: Mesh) -> None:
    async with evidence(mesh):
        mark = mesh.mark()
        service = await mesh.start_wordcount()
        await mesh.rebuilt(lambda tools: "count-words" in tools, after=mark)
        # alive, its heartbeats keep it past its ttl: nothing may expire for 1.5 ttl (this
        # wait is the span under test, for something that must not happen)
        mark = mesh.mark()
        with pytest.raises(TimeoutError):
            await mesh.agent.wait_for(r"not heard from in its ttl|tools of workspace",
                                      after=mark, timeout=1.5 * TTL)
        assert "count-words" in await mesh.offered()
        mark = mesh.mark()
        killed = time.monotonic()
        service.kill()  # no goodbye: only the missing heartbeats tell
        await mesh.rebuilt(lambda tools: "count-words" not in tools, after=mark,
                           timeout=TTL + SOON)
        gone = time.monotonic() - killed
        print(f"\nSIGKILL -> tool gone {gone:.2f} s (ttl {TTL:g} s)")
        # the last heartbeat was 0 .. TTL/3 before the kill: gone 2/3 TTL .. TTL after it
        assert TTL * 0.5 <= gone <= TTL + 2, gone
        assert "count-words" not in await mesh.tools()
        assert (await mesh.services())["word-count"]["live"] == 0


async def test_two_replicas_are_two_live_instances_and_one_killed_leaves_the_tool(
        mesh: Mesh) -> None:
    async with evidence(mesh):
        mark = mesh.mark()
        first, second = await asyncio.gather(mesh.start_wordcount(), mesh.start_wordcount())
        up = [rf"tool service word-count: instance \S+ \(\S+ pid {p.pid}\) is up"
              for p in (first, second)]
        for pattern in up:
            await mesh.agent.wait_for(pattern, after=mark, timeout=SOON)
        service = (await mesh.services())["word-count"]
        assert service["live"] == 2, service
        assert sorted(i["pid"] for i in service["instances"]) == sorted([first.pid, second.pid])
        assert {t["key"]: t["status"] for t in service["tools"]} == {"count-words": "offered"}

        mark = mesh.mark()
        first.kill()
        await mesh.agent.wait_for(r"tool service word-count: instance \S+ not heard from in its "
                                  r"ttl; counted as gone \(1 left\)", after=mark,
                                  timeout=TTL + SOON)
        # what is offered did not change: no rebuild, and the tool still works
        assert mesh.tools_line(mark) is None, mesh.agent.log()
        assert "count-words" in await mesh.offered()
        service = (await mesh.services())["word-count"]
        assert service["live"] == 1 and [i["pid"] for i in service["instances"]] \
            == [second.pid], service
        assert await mesh.ask('Use count-words with {"text": "one two"}') == "2 words"


# --- a tool service written without toolmesh ------------------------------------------------

class RawShout:
    """A tool service in plain aio-pika, as a non-Python author would write it from the wire
    (see the module docstring): it serves ``shout`` (the text in capitals) and announces
    itself until :meth:`close`, which says goodbye."""

    ID = "raw-shout"
    TTL = 10.0

    def __init__(self, url: str) -> None:
        self.url = url
        self.topic = f"raw-shout-{uuid.uuid4().hex[:6]}"
        self.instance = f"raw-{uuid.uuid4().hex[:8]}"
        self.calls: list[dict[str, Any]] = []
        self._beat: asyncio.Task[None] | None = None

    def announcement(self) -> dict[str, Any]:
        return {
            "id": self.ID, "instance": self.instance, "workspace": "default", "ttl": self.TTL,
            "descriptor": {"id": self.ID,
                           "request-queue": f"non-persistent://tg/request/{self.topic}",
                           "response-queue": f"non-persistent://tg/response/{self.topic}",
                           "config-params": []},
            "tools": {"shout": {
                "type": "tool-service", "service": self.ID, "name": "shout",
                "description": "Repeat a text in capitals",
                "arguments": [{"name": "text", "type": "string", "required": True,
                               "description": "The text to shout"}]}},
        }

    async def __aenter__(self) -> RawShout:
        self.connection = await aio_pika.connect_robust(self.url)
        channel = await self.connection.channel()
        fanout = aio_pika.ExchangeType.FANOUT
        self.requests = await channel.declare_exchange(f"tg.request.{self.topic}", fanout,
                                                       durable=True)
        self.responses = await channel.declare_exchange(f"tg.response.{self.topic}", fanout,
                                                        durable=True)
        self.announcements = await channel.declare_exchange(ANNOUNCEMENTS, fanout, durable=True)
        queue = await channel.declare_queue(f"tg.request.{self.topic}.{self.ID}", durable=False,
                                            auto_delete=True)
        await queue.bind(self.requests, routing_key="")
        await queue.consume(self._serve)
        await self._send(self.announcement())
        self._beat = asyncio.create_task(self._heartbeat())
        return self

    async def _send(self, body: dict[str, Any]) -> None:
        await self.announcements.publish(
            aio_pika.Message(json.dumps(body).encode(), content_type="application/json"),
            routing_key="")

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.TTL / 3)  # the heartbeat's period, not a wait for anything
            await self._send(self.announcement())

    async def _serve(self, message: aio_pika.abc.AbstractIncomingMessage) -> None:
        async with message.process():
            request = json.loads(message.body)
            self.calls.append(request)
            arguments = json.loads(request["arguments"])  # JSON text inside the JSON
            reply = {"response": arguments["text"].upper(), "end_of_stream": True}
            await self.responses.publish(
                aio_pika.Message(json.dumps(reply).encode(),
                                 headers={"id": message.headers["id"]}),
                routing_key="")

    async def __aexit__(self, *exc: object) -> None:
        if self._beat is not None:
            self._beat.cancel()
        await self._send({"id": self.ID, "instance": self.instance, "goodbye": True})
        await self.connection.close()


async def test_a_service_written_in_plain_amqp_announces_and_is_called(mesh: Mesh) -> None:
    async with evidence(mesh):
        mark = mesh.mark()
        async with RawShout(mesh.bus) as raw:
            await mesh.rebuilt(lambda tools: "shout" in tools, after=mark)
            tools = await mesh.tools()
            assert (tools["shout"]["source"], tools["shout"]["service"]) == \
                ("announced", "raw-shout"), tools
            answer = await mesh.ask('Use shout with {"text": "hello there"}')
            assert answer == "HELLO THERE", answer
            assert len(raw.calls) == 1
            assert json.loads(raw.calls[0]["arguments"]) == {"text": "hello there"}
            mark = mesh.mark()
            stopped = time.monotonic()
        await mesh.rebuilt(lambda tools: "shout" not in tools, after=mark)
        assert time.monotonic() - stopped < GONE_AFTER_GOODBYE  # its goodbye, not its ttl


# --- a configured tool of an announcing service that is gone --------------------------------

async def test_a_configured_tool_of_a_gone_service_fails_at_once(mesh: Mesh) -> None:
    items = {"tool-service/word-count": WORDCOUNT / "word-count.json",
             "tool/count-words": WORDCOUNT / "count-words.json"}
    question = 'Use count-words with {"text": "a b c"}'
    async with evidence(mesh):
        service = await mesh.start_wordcount()
        try:
            mark = mesh.mark()
            for item, path in items.items():
                code, _, err = await run_toolmesh("config", "put", item, str(path),
                                                  "-u", mesh.url)
                assert code == 0, err
            # the version of the last put: the first one's line names count-words too (the
            # service announces it), before the tool item is there
            version = re.search(r"\(version (\d+)\)", err).group(1)  # type: ignore[union-attr]
            await mesh.agent.wait_for(rf"config version {version}: tools of workspace "
                                      r"'default': count-words$", after=mark, timeout=SOON)
            tools = await mesh.tools()
            assert tools["count-words"]["source"] == "configured", tools
            assert await mesh.ask(question) == "3 words"

            # SIGKILL: once its ttl has passed, the configured tool fails at once
            mark = mesh.mark()
            service.kill()
            await mesh.agent.wait_for(r"word-count: instance \S+ not heard from in its ttl; "
                                      r"counted as gone \(0 left\)", after=mark,
                                      timeout=TTL + SOON)
            assert (await mesh.services())["word-count"]["live"] == 0
            took, answer = await timed(mesh.ask(question, timeout=10))
            print(f"\nconfigured tool, its service SIGKILLed: the dialog failed in "
                  f"{took:.3f} s: {answer}")
            assert "no live instance of tool service word-count" in answer, answer
            assert took < FAST_DIALOG, took

            # the same after a SIGTERM (its goodbye)
            mark = mesh.mark()
            service = await mesh.start_wordcount()
            await mesh.agent.wait_for(rf"tool service word-count: instance \S+ \(\S+ pid "
                                      rf"{service.pid}\) is up", after=mark, timeout=SOON)
            assert await mesh.ask(question) == "3 words"
            mark = mesh.mark()
            assert await service.stop() == 0
            await mesh.agent.wait_for(r"word-count: instance \S+ stopped \(0 left\)",
                                      after=mark, timeout=SOON)
            took, answer = await timed(mesh.ask(question, timeout=10))
            print(f"configured tool, its service stopped: the dialog failed in {took:.3f} s")
            assert "no live instance of tool service word-count" in answer, answer
            assert took < FAST_DIALOG, took
        finally:
            mark = mesh.mark()
            code, _, err = await run_toolmesh("config", "delete", *items, "-u", mesh.url)
            assert code == 0, err
            await mesh.agent.wait_for(r"config version \d+: tools of workspace 'default': ",
                                      after=mark, timeout=SOON)


async def timed(call: Any) -> tuple[float, Any]:
    started = time.monotonic()
    result = await call
    return time.monotonic() - started, result


# --- the gateway publishes no announcements -------------------------------------------------

async def test_nothing_the_gateway_accepts_publishes_an_announcement(mesh: Mesh) -> None:
    intruder = {
        "id": "intruder", "instance": "via-gateway", "workspace": "default", "ttl": 60,
        "descriptor": {"id": "intruder", "request-queue": "non-persistent://tg/request/intruder",
                       "response-queue": "non-persistent://tg/response/intruder"},
        "tools": {"intrude": {"type": "tool-service", "service": "intruder", "name": "intrude",
                              "description": "Offered by nobody"}},
    }
    announcement_queue = "non-persistent://tg/notify/tool-descriptors"
    async with evidence(mesh), RawListener(mesh.bus) as heard:
        before = await mesh.tools()
        # routes an announcement might be sent to
        for path in ("api/v1/tool-descriptors", "api/v1/announce", "api/v1/announcements",
                     "api/v1/flow/default/service/tool-descriptors",
                     "api/v1/flow/default/service/tool-descriptor",
                     "api/v1/flow/default/service/announce",
                     "api/v1/flow/default/service/registry",
                     "api/v1/flow/default/service/agent-services",
                     "api/v1/flow/default/service/agent-tools"):
            status, body = await mesh.post(path, intruder)
            # a listing answers with what it lists; everything else refuses
            assert status in (200, 400, 404, 405), (path, status, body)
        # the tool-service route, pointed at the announcement queue
        for id in ("notify:tg:tool-descriptors", announcement_queue):
            status, body = await mesh.post("api/v1/flow/default/service/tool-service",
                                           {"id": id, "arguments": intruder})
            # (flow routes answer errors in the body, as TrustGraph's do)
            assert status >= 400 or body.get("error"), (id, status, body)
        # a WebSocket frame for such a service
        async with mesh.http.ws_connect(mesh.url + "api/v1/socket") as ws:
            await ws.send_json({"id": "w1", "service": "tool-descriptors", "flow": "default",
                                "request": intruder})
            frame = await ws.receive_json(timeout=SOON)
            assert frame.get("id") == "w1" and "error" in frame, frame
        # a tool service configured on the announcement queue is refused by the config service
        for field_ in ("request-queue", "response-queue"):
            for queue in ("notify:tg:tool-descriptors", announcement_queue):
                descriptor = {**intruder["descriptor"], field_: queue}
                status, body = await mesh.post("api/v1/config", {
                    "operation": "put",
                    "values": [{"type": "tool-service", "key": "intruder",
                                "value": json.dumps(descriptor)}]})
                # (config errors ride in the body, as TrustGraph's do)
                assert status in (200, 400) and body["error"]["type"] == "config-error", body
                assert "notify (broadcast) queue" in body["error"]["message"], body
        code, out, _ = await run_toolmesh("config", "list", "tool-service", "-u", mesh.url)
        assert (code, out.strip()) == (0, "")

        # a marker sent after all that arrives after anything they published
        mark = mesh.mark()
        async with RawShout(mesh.bus):
            await heard.seen(lambda body: body.get("id") == RawShout.ID)
            await mesh.rebuilt(lambda tools: "shout" in tools, after=mark)
            assert {b["id"] for b in heard.bodies} == {RawShout.ID}, heard.bodies
            after = await mesh.tools()
            assert set(after) - set(before) == {"shout"}, after
            assert "intruder" not in await mesh.services()
        assert not any("intruder" in line for line in mesh.agent.lines), mesh.agent.log()


class RawListener:
    """Every message on the announcement exchange while it is open (its own queue)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.bodies: list[dict[str, Any]] = []
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> RawListener:
        self.connection = await aio_pika.connect_robust(self.url)
        channel = await self.connection.channel()
        exchange = await channel.declare_exchange(ANNOUNCEMENTS, aio_pika.ExchangeType.FANOUT,
                                                  durable=True)
        queue = await channel.declare_queue("", exclusive=True)
        await queue.bind(exchange, routing_key="")
        await queue.consume(self._heard, no_ack=True)
        return self

    async def _heard(self, message: aio_pika.abc.AbstractIncomingMessage) -> None:
        async with self._changed:
            self.bodies.append(json.loads(message.body))
            self._changed.notify_all()

    async def seen(self, predicate: Callable[[dict[str, Any]], bool]) -> None:
        async with asyncio.timeout(SOON), self._changed:
            await self._changed.wait_for(lambda: any(predicate(b) for b in self.bodies))

    async def __aexit__(self, *exc: object) -> None:
        await self.connection.close()

