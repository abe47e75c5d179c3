"""toolmesh's metrics as an operator reads them: a real Prometheus server (tests/telemetry/
prometheus.py) scrapes real toolmesh processes, and the checks are PromQL queries.

* ``toolmesh serve`` (the embedded default, the offline demo model): its gateway's
  ``/metrics``, open on loopback with no token, shows the dialogs, tool calls, LLM calls,
  gateway requests, bus messages, config version and announced instances that the test's
  own requests caused, counted exactly.
* The same with a gateway token: ``/metrics`` refuses callers without a token (401) and
  tokens without ``metrics:read`` (403); a Prometheus given a ``metrics:read`` token made
  with ``toolmesh token create`` scrapes it (``up`` is 1), one given another token does not.
* A distributed deployment on RabbitMQ, every part its own ``toolmesh run PART`` process:
  the agent, text-completion and joke parts on their own ``--metrics-port``, the gateway at
  its ``/metrics``. Each process reports the work it did itself, and only that.
* ``--metrics-port`` out of range is argparse's usage error (exit 2); a port already taken
  ends the part with one line saying so.

To know that a sample reflects what the test did, the test notes the time after doing it and
waits for a scrape that began later (:meth:`Prometheus.scraped_after`); the values are then
compared exactly, so a double count or a missed one fails.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import RUN_MARKER
from tests.e2e.cluster import cluster
from tests.processes import run_toolmesh
from tests.rabbit import own_vhost
from tests.servers import Served, toolmesh_serve
from tests.telemetry.prometheus import (
    Prometheus,
    Target,
    finite,
    free_port,
    prometheus,
)
from toolmesh.config.tokens import token_id
from toolmesh.tools.services.joke import DEFINITION, pick_joke

#: what the demo model asks the agent, and the joke the tool answers it with
QUESTION = "Tell me a joke about food"
JOKE = pick_joke("food", "pun")
#: the gateway's admin token in the guarded test
ADMIN = "admin-s3cret-for-metrics-tests"
#: the id the built-in joke service announces itself with
JOKE_SERVICE = DEFINITION.id
#: a config item that changes nothing: a tool item that only switches off a key no one uses
INERT_ITEM = {"type": "tool", "key": "unused-tool", "value": json.dumps({"enabled": False})}


async def post(http: aiohttp.ClientSession, url: str, body: dict[str, Any],
               token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with http.post(url, json=body, headers=headers,
                         timeout=aiohttp.ClientTimeout(total=30)) as r:
        return r.status, await r.json()


async def ask(http: aiohttp.ClientSession, gateway: str) -> None:
    """One dialog over REST, answered with the joke tool's observation."""
    status, body = await post(http, gateway + "api/v1/flow/default/service/agent",
                              {"question": QUESTION})
    assert status == 200 and JOKE in body.get("answer", ""), body


async def value(prom: Prometheus, expr: str) -> float:
    """A query's value, 0 when it has no series (a labelled counter before its first count)."""
    return await prom.query(expr) or 0.0


# --- toolmesh serve ---------------------------------------------------------------------------

@pytest.mark.slow  # a real Prometheus
async def test_prometheus_reads_what_served_dialogs_did(tmp_path: Path) -> None:
    """Three dialogs through ``toolmesh serve``'s gateway, scraped at its /metrics."""
    port = free_port()  # Prometheus first: its first scrape comes ~5 s after it starts
    async with prometheus(tmp_path / "prometheus", [Target("serve", f"127.0.0.1:{port}")]
                          ) as prom, \
            toolmesh_serve(tmp_path, "--port", str(port)) as served, \
            aiohttp.ClientSession() as http:
        job = '{job="serve"}'
        await prom.wait_until(f"up{job}", lambda v: v == 1)
        joke = 'job="serve",tool="tell-joke",type="tool-service"'
        counters = {
            "started": f"toolmesh_dialogs_started_total{job}",
            "answered": 'toolmesh_dialogs_finished_total{job="serve",outcome="answer"}',
            "joke ok": f'toolmesh_tool_calls_total{{{joke},outcome="ok"}}',
            "joke timed": f"toolmesh_tool_call_duration_seconds_count{{{joke}}}",
            "rest ok": 'toolmesh_gateway_requests_total{job="serve",route="rest",'
                       'service="agent",outcome="ok"}',
            "llm calls": f"sum(toolmesh_llm_calls_total{job})",
            "tokens in": 'sum(toolmesh_llm_tokens_total{job="serve",direction="in"})',
            "tokens out": 'sum(toolmesh_llm_tokens_total{job="serve",direction="out"})',
        }
        before = {name: await value(prom, expr) for name, expr in counters.items()}

        status, put = await post(http, served.url + "api/v1/config",
                                 {"operation": "put", "values": [INERT_ITEM]})
        assert status == 200 and put.get("version", 0) > 0, put
        # one dialog and a scrape, then two more: the tool's histogram has a sample from
        # before and after the last two, so a rate over it (what a dashboard shows) moves
        await ask(http, served.url)
        await prom.scraped_after("serve", time.time())
        for _ in range(2):
            await ask(http, served.url)
        await prom.scraped_after("serve", time.time())

        after = {name: await value(prom, expr) for name, expr in counters.items()}
        moved = {name: after[name] - before[name] for name in counters}
        for name in ("started", "answered", "joke ok", "joke timed", "rest ok"):
            assert moved[name] == 3, (name, moved)
        # the demo model answers each dialog in two completions: the call, then the answer
        assert moved["llm calls"] == 6, moved
        assert moved["tokens in"] > 0 and moved["tokens out"] > 0, moved
        assert await prom.query(f"toolmesh_dialogs_in_progress{job}") == 0

        p90 = await prom.query(
            "histogram_quantile(0.9, sum by (le) (rate(toolmesh_tool_call_duration_seconds_"
            f"bucket{{{joke}}}[1m])))")
        assert finite(p90) and 0 < p90 <= 10, p90  # type: ignore[operator]

        published = await prom.query(
            'sum(toolmesh_bus_messages_total{job="serve",event="published"})')
        assert published is not None and published > 0
        # the config notification reaches the process's config clients a moment after the
        # put is answered: wait for a scrape that saw it, then it is the put's version
        seen = await prom.wait_until(f"toolmesh_config_version{job}",
                                     lambda v: v is not None and v >= put["version"])
        assert seen == put["version"]
        # `toolmesh serve` runs the joke service, which announces itself (docs/announcements.md)
        assert await prom.query(
            f'toolmesh_tool_service_instances{{job="serve",service="{JOKE_SERVICE}"}}') == 1


# --- a gateway with a token -------------------------------------------------------------------

async def create_token(served: Served, capability: str) -> str:
    """A scoped token for workspace ``default`` made with ``toolmesh token create``."""
    code, out, err = await run_toolmesh(
        "token", "create", "-w", "default", "-c", capability, "--name", f"{capability} test",
        "-u", served.url, "-t", ADMIN,
        extra_env={"TOOLMESH_TOKEN": "", "TRUSTGRAPH_TOKEN": "", "TOOLMESH_GATEWAY_TOKEN": ""})
    assert code == 0, err
    made = out.strip()
    assert token_id(made) is not None, out
    return made


def write_token(path: Path, token: str) -> None:
    """``token`` in a file only its owner reads, replaced whole (Prometheus rereads its
    ``credentials_file`` at every scrape, so it never sees half a token)."""
    scratch = path.with_suffix(".partial")
    scratch.touch(mode=0o600)
    scratch.write_text(token + "\n")
    scratch.replace(path)


@pytest.mark.slow  # a real Prometheus
async def test_a_guarded_gateway_is_scraped_with_a_metrics_read_token(tmp_path: Path) -> None:
    port = free_port()
    folder = tmp_path / "prometheus"
    files = {"scraper": folder / "scraper.token", "agent-token": folder / "agent.token"}
    # Prometheus first (its first scrape comes ~5 s after it starts); the token files it is
    # told to read are written once the tokens exist
    targets = [Target("scraper", f"127.0.0.1:{port}", token_file=files["scraper"]),
               Target("agent-token", f"127.0.0.1:{port}", token_file=files["agent-token"]),
               Target("no-token", f"127.0.0.1:{port}")]
    async with prometheus(folder, targets) as prom, \
            toolmesh_serve(tmp_path, "--port", str(port),
                           extra_env={"TOOLMESH_GATEWAY_TOKEN": ADMIN}) as served, \
            aiohttp.ClientSession() as http:
        metrics = served.url + "metrics"
        async with http.get(metrics) as r:
            assert r.status == 401
            assert (await r.json())["error"]["type"] == "auth-failed"
        agent_token = await create_token(served, "agent")
        async with http.get(metrics, headers={"Authorization": f"Bearer {agent_token}"}) as r:
            assert r.status == 403
            error = (await r.json())["error"]
        assert "'metrics:read'" in error["message"], error
        assert f"token {token_id(agent_token)!r}" in error["message"], error

        write_token(files["scraper"], await create_token(served, "metrics:read"))
        write_token(files["agent-token"], agent_token)
        written = time.time()
        for t in targets:
            await prom.scraped_after(t.job, written)
        assert await prom.query('up{job="scraper"}') == 1
        assert await prom.query('toolmesh_dialogs_started_total{job="scraper"}') == 0
        # the controls: the same gateway, refused without the capability or a token
        assert await prom.query('up{job="agent-token"}') == 0
        assert await prom.query('up{job="no-token"}') == 0
        health = await prom.target_health()
        assert "403" in health["agent-token"][1], health
        assert "401" in health["no-token"][1], health
        assert await prom.query('count({job=~"agent-token|no-token",'
                                '__name__=~"toolmesh_.+"})') is None


# --- parts on RabbitMQ, each with its own metrics port ----------------------------------------

#: the parts that serve metrics on a port of their own (the gateway uses its /metrics)
METRICS_PARTS = ("agent", "text-completion", "joke")


@pytest.fixture
def ports() -> dict[str, int]:
    """The port each scraped process listens on, chosen before anything starts."""
    return {part: free_port() for part in (*METRICS_PARTS, "gateway")}


@pytest.fixture
async def prom(tmp_path: Path, ports: dict[str, int]) -> AsyncIterator[Prometheus]:
    """Prometheus scraping every part's metrics, started before the parts: its first scrape
    comes ~5 s after it starts, the time the parts take to start anyway."""
    targets = [Target(part, f"127.0.0.1:{ports[part]}") for part in METRICS_PARTS]
    targets.append(Target("gateway", f"127.0.0.1:{ports['gateway']}"))
    async with prometheus(tmp_path / "prometheus", targets) as prom:
        yield prom


@pytest.fixture
async def deployment(tmp_path: Path, ports: dict[str, int],
                     prom: Prometheus) -> AsyncIterator[str]:
    """config, prompt, agent, text-completion, joke and gateway, each a ``toolmesh run``
    process on a RabbitMQ vhost of their own; the gateway's URL. Every process must exit 0
    on SIGTERM at the end. (It asks for ``prom`` so that Prometheus starts first.)"""
    async with own_vhost(f"{RUN_MARKER}-metrics") as bus, cluster() as c:
        parts = {
            "config": ["run", "config", "--config-store", f"sqlite:///{tmp_path}/config.db"],
            "prompt": ["run", "prompt"],
            "gateway": ["run", "gateway", "--port", str(ports["gateway"])],
            **{part: ["run", part, "--metrics-port", str(ports[part])]
               for part in METRICS_PARTS},
        }
        await asyncio.gather(*(c.toolmesh(name, *args, "--bus", bus)
                               for name, args in parts.items()))
        gateway = (await c.procs["gateway"].wait_for(r"gateway listening on (\S+)")).group(1)
        for part in METRICS_PARTS:
            said = (await c.procs[part].wait_for(r"metrics at (\S+)")).group(1)
            assert said == f"http://127.0.0.1:{ports[part]}/metrics", (part, said)
        # the agent offers the announced joke tool once it has heard the announcement
        await c.procs["agent"].wait_for(r"tools of workspace 'default': tell-joke")
        try:
            yield gateway
        finally:
            # pytest shows this only when the test fails: what every process said
            print(c.logs(), file=sys.stderr)
        codes = await c.stop_all()
        assert all(code == 0 for code in codes.values()), (codes, c.logs())


@pytest.mark.rabbitmq
@pytest.mark.slow  # a real Prometheus
async def test_each_part_reports_its_own_work(deployment: str, prom: Prometheus) -> None:
    gateway = deployment
    jobs = (*METRICS_PARTS, "gateway")
    async with aiohttp.ClientSession() as http:
        for _ in range(2):
            await ask(http, gateway)
        done = time.time()
        for job in jobs:
            await prom.scraped_after(job, done)
        for job in jobs:
            assert await prom.query(f'up{{job="{job}"}}') == 1, job
            # prometheus_client's process metrics, and toolmesh's bus traffic, everywhere
            assert await value(prom, f'process_resident_memory_bytes{{job="{job}"}}') > 0
            for event in ("published", "consumed"):
                assert await value(prom, f'sum(toolmesh_bus_messages_total{{job="{job}",'
                                         f'event="{event}"}})') > 0, (job, event)

        async def ok(job: str, service: str) -> float:
            return await value(prom, f'toolmesh_service_requests_total{{job="{job}",'
                                     f'service="{service}",outcome="ok"}}')

        # the agent process: the dialogs, their tool calls, the joke service it sees alive
        assert await ok("agent", "agent:default") == 2
        assert await value(prom, 'toolmesh_dialogs_started_total{job="agent"}') == 2
        assert await value(prom, 'toolmesh_dialogs_finished_total{job="agent",'
                                 'outcome="answer"}') == 2
        assert await value(prom, 'toolmesh_tool_calls_total{job="agent",tool="tell-joke",'
                                 'type="tool-service",outcome="ok"}') == 2
        assert await value(prom, f'toolmesh_tool_service_instances{{job="agent",'
                                 f'service="{JOKE_SERVICE}"}}') == 1
        # the text-completion process: two completions per dialog, each one request
        llm = await value(prom, 'sum(toolmesh_llm_calls_total{job="text-completion",'
                                'outcome="ok"})')
        assert llm == 4
        # and one request a dialog asking how to call tools (answered from its cache)
        assert await ok("text-completion", "text-completion:default") == llm + 2
        assert await value(prom, 'sum(toolmesh_llm_tokens_total{job="text-completion"})') > 0
        # the joke process: one tool request per dialog
        assert await ok("joke", "joke") == 2
        # the gateway: two REST dialogs
        assert await value(prom, 'toolmesh_gateway_requests_total{job="gateway",route="rest",'
                                 'service="agent",outcome="ok"}') == 2
        # and no process counts another's work
        assert await prom.vector('toolmesh_dialogs_started_total{job!="agent"} > 0') == []
        assert await prom.vector('toolmesh_llm_calls_total{job!="text-completion"}') == []
        assert await prom.vector('toolmesh_service_requests_total{job!="joke",'
                                 'service="joke"}') == []


# --- bad metrics ports ------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["serve"], ["run", "joke"], ["run", "text-completion"]])
@pytest.mark.parametrize("given", ["flag", "env"])
async def test_a_metrics_port_out_of_range_is_a_usage_error(command: list[str],
                                                            given: str) -> None:
    if given == "flag":
        code, _, err = await run_toolmesh(*command, "--metrics-port", "70000")
    else:
        code, _, err = await run_toolmesh(*command, extra_env={"TOOLMESH_METRICS_PORT": "70000"})
    assert code == 2, err
    assert err.rstrip().splitlines()[-1].endswith(
        "error: argument --metrics-port: '70000' is not a port number (0 to 65535)"), err
    assert "Traceback" not in err


async def test_a_metrics_port_in_use_is_a_one_line_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = await run_toolmesh("run", "joke", "--bus", "memory://",
                                          "--metrics-port", str(port), timeout=30)
    assert code != 0, err
    assert "Traceback" not in err and "ready:" not in err, err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, err
    assert re.fullmatch(rf"toolmesh: error: cannot serve metrics on 127\.0\.0\.1:{port}: .*"
                        r"in use.*; choose another --metrics-port", errors[0]), err
