"""One dialog, one trace, across real processes: what a collector receives from a deployment.

Each part is its own ``toolmesh run PART`` process on the real RabbitMQ, in a vhost of its
own: config (SQLite, the joke tool configured), text-completion (a scripted LLM: call
``tell-joke``, then answer with its observation), prompt, agent, the joke service and the
gateway. With ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at :class:`OtlpReceiver` and no
``OTEL_SERVICE_NAME``, every process exports over OTLP/HTTP as ``toolmesh-<part>``; a dialog
sent to the gateway with a client's ``traceparent`` must come back as one trace whose spans
link across every bus hop. Without the variables nothing is exported and no log line names a
trace.

:func:`deployment` is shared with :mod:`tests.telemetry.test_mcp_traceparent`.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import sys
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import RUN_MARKER
from tests.e2e.cluster import Cluster, Proc
from tests.forkserver import spawn
from tests.processes import ROOT, env
from tests.rabbit import own_vhost
from tests.telemetry.otlp_receiver import (
    STATUS_ERROR,
    OtlpReceiver,
    ReceivedSpan,
    SpansPredicate,
)
from toolmesh.config.store import open_store
from toolmesh.schema.agent import DEFAULT_USER
from toolmesh.tools.services.joke import tell_joke

pytestmark = pytest.mark.rabbitmq

#: the parts every deployment here runs (``toolmesh run NAME``), besides any a test adds
PARTS = ("config", "text-completion", "prompt", "agent", "joke", "gateway")
#: the batch processor's wait between exports, in ms: spans arrive soon after they end
SCHEDULE_DELAY_MS = "200"
#: bound on the parts' start-up: seconds of imports each, on a machine that may be busy
STARTUP = 60.0
#: bound on every other wait here; a dialog itself takes well under a second
SOON = 30.0

JOKE_SERVICE = json.loads((ROOT / "examples/joke/joke-service.json").read_text())
TELL_JOKE = json.loads((ROOT / "examples/joke/tell-joke.json").read_text())
#: the observation in the agent-react template's prompt, up to its last line
OBSERVATION = r"\nObservation: (?P<observation>.*?)\n\nYour reply, starting with"
#: answers a question about jokes; any other question has no rule, so the LLM fails
JOKE_SCRIPT = [
    {"match": OBSERVATION, "response": "Thought: done\nFinal Answer: {observation}"},
    {"match": r"\nQuestion: [^\n]*joke",
     "response": 'Thought: a joke is wanted\nAction: tell-joke\nArgs: {"topic": "food"}'},
]
TRACE_SUFFIX = re.compile(r" trace=([0-9a-f]{32})$")


def new_traceparent() -> tuple[str, str, str]:
    """A client's W3C ``traceparent`` (sampled) with fresh ids: ``(header, trace id, span id)``."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


@dataclass
class Deployment:
    """The processes of one test and the gateway's URL."""

    cluster: Cluster
    url: str
    http: aiohttp.ClientSession

    def proc(self, name: str) -> Proc:
        return self.cluster.procs[name]

    async def ask(self, question: str, *, traceparent: str | None = None
                  ) -> tuple[int, dict[str, Any]]:
        """One dialog over REST: the status and the final message."""
        headers = {"traceparent": traceparent} if traceparent else {}
        async with self.http.post(self.url + "api/v1/flow/default/service/agent",
                                  json={"question": question}, headers=headers,
                                  timeout=aiohttp.ClientTimeout(total=SOON)) as r:
            return r.status, await r.json()

    async def stop(self) -> dict[str, int]:
        """SIGTERM to every process; their exit codes (a traced part flushes its spans first)."""
        return await self.cluster.stop_all()


def child_env(otel: Mapping[str, str]) -> dict[str, str]:
    """A part's environment: this machine's without any ``OTEL_*`` (no ``OTEL_SERVICE_NAME``
    above all: each part names itself), plus ``otel``."""
    return {**{k: v for k, v in env().items() if not k.startswith("OTEL_")}, **otel}


def otlp_env(receiver: OtlpReceiver) -> dict[str, str]:
    """What turns tracing on in a part: the receiver as its collector, exports every 200 ms,
    gzip-compressed as collectors commonly accept."""
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_BSP_SCHEDULE_DELAY": SCHEDULE_DELAY_MS,
            "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}


@asynccontextmanager
async def deployment(tmp_path: Path, *, script: Sequence[Mapping[str, str]],
                     items: Mapping[tuple[str, str], Any], otel: Mapping[str, str],
                     tools_line: str, parts: Sequence[str] = PARTS,
                     extra: Mapping[str, Sequence[str]] | None = None
                     ) -> AsyncIterator[Deployment]:
    """``toolmesh run PART`` for each of ``parts`` in a vhost of their own, with ``otel`` in
    their environment, the config ``items`` in the store and ``script`` as the LLM's rules;
    yields once every part is ready and the agent logged its tools as ``tools_line``. ``extra``:
    more arguments of some parts. The processes are stopped on exit (their logs printed if
    the block failed)."""
    llm = tmp_path / "llm.json"
    llm.write_text(json.dumps({"rules": list(script)}))
    store_url = f"sqlite:///{tmp_path}/config.db"
    store = await open_store(store_url)
    try:
        await store.put("default", [(t, k, json.dumps(v)) for (t, k), v in items.items()])
    finally:
        await store.close()
    arguments = {"config": ["--config-store", store_url],
                 "text-completion": ["--llm", f"scripted:{llm}"],
                 "gateway": ["--port", "0"]}
    for name, more in (extra or {}).items():
        arguments[name] = [*arguments.get(name, []), *more]
    c = Cluster()
    async with own_vhost(f"{RUN_MARKER}-traces") as bus, aiohttp.ClientSession() as http:
        try:
            for name in parts:  # all at once: each waits for what it needs on the bus
                proc = await spawn(
                    "toolmesh.cli.main", "run", name,
                    *arguments.get(name, []), "--bus", bus, env=child_env(otel),
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                c.procs[name] = Proc(name, proc)
            await asyncio.gather(*(p.wait_for("ready:", timeout=STARTUP)
                                   for p in c.procs.values()))
            url = (await c.procs["gateway"].wait_for(r"gateway listening on (\S+)")).group(1)
            await c.procs["agent"].wait_for(
                rf"tools of workspace 'default': {re.escape(tools_line)}$", timeout=SOON)
            yield Deployment(c, url, http)
        except BaseException:
            print(c.logs(), file=sys.stderr)  # pytest shows it with the failure
            raise
        finally:
            await c.stop_all()


def joke_items() -> dict[tuple[str, str], Any]:
    return {("tool-service", "joke-service"): JOKE_SERVICE, ("tool", "tell-joke"): TELL_JOKE}


# -- reading a trace --------------------------------------------------------------------------

class Trace:
    """The spans of one trace, with their ancestry."""

    def __init__(self, spans: Sequence[ReceivedSpan]) -> None:
        self.spans = list(spans)
        self.by_id = {s.span_id: s for s in self.spans}

    def named(self, name: str, service: str | None = None) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name == name
                and (service is None or s.service == service)]

    def one(self, name: str, service: str) -> ReceivedSpan:
        found = self.named(name, service)
        assert len(found) == 1, f"{service} {name!r}: {found}\n{self!r}"
        return found[0]

    def ancestors(self, span: ReceivedSpan) -> list[ReceivedSpan]:
        """Parent first, up to the first span whose parent is not in the trace."""
        chain = []
        while span.parent_span_id in self.by_id:
            span = self.by_id[span.parent_span_id]
            chain.append(span)
        return chain

    def lineage(self, span: ReceivedSpan) -> list[tuple[str, str]]:
        """``(service, name)`` of the ancestors, parent first."""
        return [(s.service, s.name) for s in self.ancestors(span)]

    def __repr__(self) -> str:  # what a failed assertion shows
        return "the trace's spans:\n" + "\n".join(f"  {s}" for s in self.spans)


def census(spans: Sequence[ReceivedSpan]) -> dict[tuple[str, str], int]:
    """How many spans of each ``(service, name)``."""
    return dict(Counter((s.service, s.name) for s in spans))


def has_all(trace_id: str, wanted: Mapping[tuple[str, str], int]) -> SpansPredicate:
    """A predicate for :meth:`OtlpReceiver.wait_for`: trace ``trace_id`` holds at least
    ``wanted[(service, name)]`` spans of each."""
    def holds(spans: Sequence[ReceivedSpan]) -> bool:
        counts = census([s for s in spans if s.trace_id == trace_id])
        return all(counts.get(key, 0) >= n for key, n in wanted.items())
    return holds


GATEWAY, AGENT, PROMPT, LLM, JOKE = (f"toolmesh-{p}" for p in
                                     ("gateway", "agent", "prompt", "text-completion", "joke"))
#: every span of a dialog that calls tell-joke once and then answers
JOKE_DIALOG = {
    (GATEWAY, "agent request"): 1,
    (AGENT, "agent:default handle"): 1,
    (AGENT, "agent dialog"): 1,
    (AGENT, "agent step 1"): 1,
    (AGENT, "agent step 2"): 1,
    (AGENT, "tool tell-joke"): 1,
    (JOKE, "joke handle"): 1,
    # two steps, and the dialog's question of how to call tools (a cached answer: no LLM call)
    (PROMPT, "prompt:default handle"): 3,
    (LLM, "text-completion:default handle"): 3,
    (LLM, "llm completion"): 2,
}


# -- the tests --------------------------------------------------------------------------------

async def test_a_dialog_is_one_trace_across_every_process(tmp_path: Path) -> None:
    async with OtlpReceiver() as receiver, deployment(
            tmp_path, script=JOKE_SCRIPT, items=joke_items(), otel=otlp_env(receiver),
            tools_line="tell-joke") as d:
        header, trace_id, client_span = new_traceparent()
        status, answer = await d.ask("A food joke, please", traceparent=header)
        assert status == 200 and answer["answer"] == tell_joke(DEFAULT_USER, TELL_JOKE,
                                                               {"topic": "food"}), answer
        await receiver.wait_for(has_all(trace_id, JOKE_DIALOG), timeout=SOON)
        trace = Trace(receiver.trace(trace_id))

        # every span the dialog made, from the process that made it, and no other
        assert census(trace.spans) == JOKE_DIALOG, trace
        assert all(s.status != STATUS_ERROR for s in trace.spans), trace

        # one unbroken tree, hanging from the client's span
        root = trace.one("agent request", GATEWAY)
        assert root.parent_span_id == client_span
        orphans = [s for s in trace.spans if s.parent_span_id not in trace.by_id]
        assert orphans == [root], trace
        assert root.attributes["toolmesh.route"] == "rest"

        # the agent's work under its handling of the gateway's request
        dialog = trace.one("agent dialog", AGENT)
        assert trace.lineage(dialog) == [(AGENT, "agent:default handle"),
                                         (GATEWAY, "agent request")]
        steps = {n: trace.one(f"agent step {n}", AGENT) for n in (1, 2)}
        assert all(trace.ancestors(s)[0] is dialog for s in steps.values())

        # the tool call crossed the bus to the joke process
        tool = trace.one("tool tell-joke", AGENT)
        assert trace.ancestors(tool)[0] is steps[1]
        joke = trace.one("joke handle", JOKE)
        assert tool in trace.ancestors(joke)
        assert joke.attributes["messaging.destination.name"] == "request:tg:joke"

        # each step's completion: agent -> prompt -> text-completion -> the LLM
        under: dict[str, ReceivedSpan] = {}
        for completion in trace.named("llm completion", LLM):
            lineage = trace.lineage(completion)
            assert lineage[:2] == [(LLM, "text-completion:default handle"),
                                   (PROMPT, "prompt:default handle")], trace
            assert lineage[2][0] == AGENT and lineage[2][1].startswith("agent step "), trace
            assert lineage[3:] == trace.lineage(steps[1]), trace
            under[lineage[2][1]] = completion
            assert completion.attributes["gen_ai.usage.output_tokens"] > 0
        assert sorted(under) == ["agent step 1", "agent step 2"]

        # the exporter's own way of sending: gzip, understood, nothing refused
        assert receiver.refused == []
        assert set(receiver.encodings) == {"gzip"}

        # A service that fails logs it inside its span: the line names the client's trace.
        # (The agent itself writes nothing at INFO within a dialog's spans, failing or not.)
        header, failing_trace, _ = new_traceparent()
        status, answer = await d.ask("What is the capital of France?", traceparent=header)
        assert status == 200 and answer["message_type"] == "error", answer
        await receiver.wait_for(has_all(failing_trace, {(GATEWAY, "agent request"): 1,
                                                        (LLM, "llm completion"): 1}))
        failed = Trace(receiver.trace(failing_trace)).one("llm completion", LLM)
        assert failed.status == STATUS_ERROR and failed.attributes["error.type"] == "llm-error"
        for name in ("text-completion", "prompt"):
            await d.proc(name).wait_for(rf"failed: .* trace={failing_trace}$", timeout=SOON)
        codes = await d.stop()
    assert codes == {name: 0 for name in PARTS}, codes
    # every trace a log line names was exported (the parts flushed their spans on the way out)
    exported = {s.trace_id for s in receiver.spans}
    for name, proc in d.cluster.procs.items():
        named = {m.group(1) for line in proc.lines if (m := TRACE_SUFFIX.search(line.rstrip()))}
        assert named <= exported, (name, named - exported)


async def test_without_an_endpoint_nothing_is_exported_and_no_line_names_a_trace(
        tmp_path: Path) -> None:
    async with OtlpReceiver() as receiver, deployment(
            tmp_path, script=JOKE_SCRIPT, items=joke_items(), otel={},
            tools_line="tell-joke") as d:
        header, _, _ = new_traceparent()
        status, answer = await d.ask("A food joke, please", traceparent=header)
        assert status == 200 and answer["answer"] == tell_joke(DEFAULT_USER, TELL_JOKE,
                                                               {"topic": "food"}), answer
        status, answer = await d.ask("What is the capital of France?", traceparent=header)
        assert status == 200 and answer["message_type"] == "error", answer
        # the line that ends with a trace id when tracing is on is written all the same
        failure = await d.proc("text-completion").wait_for(r"failed: .*$", timeout=SOON)
        assert "trace=" not in failure.group(0)
        # a traced part would flush what it still holds on the way out: stop them first
        codes = await d.stop()
    assert codes == {name: 0 for name in PARTS}, codes
    assert (receiver.exports, receiver.spans, receiver.refused) == (0, [], [])
    for name, proc in d.cluster.procs.items():
        assert not [line for line in proc.lines if "trace=" in line], name
        assert not [line for line in proc.lines if "tracing on" in line], name
