"""A deployment across processes, as on several machines: every service its own process.

On the real RabbitMQ and PostgreSQL of this machine — gateway, config (PostgreSQL store),
agent, prompt, text-completion (pointed at the OpenAI-compatible test server), mcp-tool (a
real MCP server process) and two replicas of a tool service — and the same deployment on a
pulsar-lite broker. Through the gateway: config loaded with the CLI, dialogs that use the
tool-service tool and the MCP tool. Then one replica is SIGKILLed while calls are on it, and
the broker is restarted.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from tests.cli.test_config_cli import script
from tests.conftest import RUN_MARKER
from tests.e2e.cluster import Cluster, Proc, cluster, until
from tests.llm.openai_server import Answer, OpenAITestServer, ReceivedRequest
from tests.mcp.servers import running_server
from tests.processes import run_toolmesh
from tests.pulsar_broker import PulsarLite
from tests.rabbit import new_vhost, rabbitmqctl

POSTGRES = "postgresql://root@127.0.0.1:5432/test"

TOOL_TIMEOUT = 6.0  # the agent's deadline for one tool call (--tool-timeout)
WORK = 3.0  # seconds a replica works on the calls that are in flight when one is killed

QUESTION = re.compile(r"Question: (\w+) delay=([\d.]+)")
OBSERVATION = re.compile(r"^Observation: (.*)$", re.M)


def respond(request: ReceivedRequest) -> Answer:
    """The scripted model: ask a replica, then the weather, then answer with both."""
    prompt = request.prompt
    question = QUESTION.search(prompt)
    assert question, prompt
    tag, delay = question.groups()
    seen = OBSERVATION.findall(prompt)
    if not seen:
        return Answer(text=f'Thought: ask a replica\nAction: ask-replica\n'
                           f'Args: {{"tag": "{tag}", "delay": {delay}}}')
    if len(seen) == 1:
        return Answer(text='Thought: now the weather\nAction: get-weather\nArgs: {"city": "Paris"}')
    return Answer(text="Thought: done\nFinal Answer: " + " | ".join(seen))


@dataclass
class Broker:
    """The broker the deployment runs on, and how to restart it."""

    name: str
    url: Callable[[int], str]  # the bus URL for the i-th process
    restart: Callable[[], Awaitable[None]]
    #: what a service logs once its connection is back (None: nothing to wait for)
    reconnected: str | None


@pytest.fixture
async def rabbitmq_vhost() -> AsyncIterator[Broker]:
    """A RabbitMQ vhost of this test's own on the real server (tests/rabbit.py)."""
    vhost = await new_vhost(f"{RUN_MARKER}-e2e")

    async def restart() -> None:
        await rabbitmqctl("stop_app")
        await rabbitmqctl("start_app")

    try:
        yield Broker("rabbitmq", lambda i: f"amqp://guest:guest@127.0.0.1:5672/{vhost}",
                     restart, reconnected="reconnected to RabbitMQ")
    finally:
        await rabbitmqctl("await_startup")  # the next test finds the broker up


@pytest.fixture
def pulsar_lite(tmp_path: Path) -> Iterator[Broker]:
    """A pulsar-lite broker of this test's own (it is restarted)."""
    broker = PulsarLite(tmp_path / "pulsar")
    broker.start()

    async def restart() -> None:
        await asyncio.to_thread(broker.restart)

    # Distinct consumer ids per process: pulsar-lite keys Shared consumers by id alone.
    yield Broker("pulsar", lambda i: f"{broker.url}?consumer_id_offset={32 * i}", restart,
                 reconnected=None)
    broker.stop()


async def start_deployment(c: Cluster, broker: Broker, *, store: str, llm: str, topic: str
                           ) -> tuple[str, Proc, Proc]:
    """Every part its own process; the gateway's URL and the two replicas."""
    parts = {
        "config": ["run", "config", "--config-store", store],
        "gateway": ["run", "gateway", "--port", "0"],
        "prompt": ["run", "prompt"],
        "text-completion": ["run", "text-completion", "--llm", llm, "--model", "scripted",
                            "--tool-calling", "react"],
        "mcp-tool": ["run", "mcp-tool"],
        "agent": ["run", "agent", "--tool-timeout", str(TOOL_TIMEOUT)],
        "replica-1": ["run", "tests.e2e.services:Replica", "--topic", topic, "--id", "replica"],
        "replica-2": ["run", "tests.e2e.services:Replica", "--topic", topic, "--id", "replica"],
    }
    await asyncio.gather(*(c.toolmesh(name, *args, "--bus", broker.url(i))
                           for i, (name, args) in enumerate(parts.items(), start=1)))
    m = await c.procs["gateway"].wait_for(r"gateway listening on (\S+)")
    return m.group(1), c.procs["replica-1"], c.procs["replica-2"]


async def load_config(c: Cluster, gateway: str, *, topic: str, mcp_url: str) -> None:
    """The tools, with the CLIs a user has."""
    agent_log, mcp_log = len(c.procs["agent"].lines), len(c.procs["mcp-tool"].lines)
    u = ["--url", gateway]
    descriptor = {"id": "replica", "request-queue": f"non-persistent://tg/request/{topic}",
                  "response-queue": f"non-persistent://tg/response/{topic}"}
    tool = {"type": "tool-service", "name": "ask-replica", "service": "replica",
            "description": "Ask one of the replicas; says which one served",
            "arguments": [{"name": "tag", "type": "string", "description": "a label"},
                          {"name": "delay", "type": "number", "description": "seconds of work"}]}
    for key, value in (("tool-service/replica", descriptor), ("tool/ask-replica", tool)):
        code, _, err = await run_toolmesh("config", "put", key, "-", *u,
                                          stdin_text=json.dumps(value))
        assert code == 0, err
    code, _, err = await run_toolmesh("mcp", "set", "weather", "--url", mcp_url, "-u", gateway)
    assert code == 0, err
    code, _, err = await script("tg-set-tool", "--id", "get-weather", "--name", "get-weather",
                                "--type", "mcp-tool", "--mcp-tool", "weather",
                                "--description", "Weather forecast for a city",
                                "--argument", "city:string:The city", "-u", gateway)
    assert code == 0, err
    # Every agent and mcp-tool process applies config pushed over the bus; wait until they say so.
    await c.procs["agent"].wait_for(r"tools .*(ask-replica.*get-weather|get-weather.*ask-replica)",
                                    after=agent_log)
    await c.procs["mcp-tool"].wait_for(r"MCP tools of workspace .default.: weather", after=mcp_log)


async def ask(http: aiohttp.ClientSession, gateway: str, question: str,
              timeout: float = 60) -> str:
    """One dialog through the gateway's REST agent route: its final answer."""
    async with http.post(gateway + "api/v1/flow/default/service/agent",
                         json={"question": question},
                         timeout=aiohttp.ClientTimeout(total=timeout)) as r:
        body = await r.json()
    assert "answer" in body, body
    return str(body["answer"])


async def ask_until_recovered(http: aiohttp.ClientSession, gateway: str, deadline: float) -> str:
    """After a broker restart, requests sent before a service is back are lost (non-durable
    queues, non-persistent topics): ask again, each time with a short deadline."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return await ask(http, gateway, f"r{attempt} delay=0", timeout=8)
        except (TimeoutError, AssertionError, aiohttp.ClientError):
            if time.monotonic() > deadline:
                raise


async def scenario(broker: Broker, tmp_path: Path, *, store: str,
                   new_interpreters: bool = False) -> None:
    topic = f"{RUN_MARKER}-replica-{uuid.uuid4().hex[:6]}"
    async with OpenAITestServer(respond=respond) as llm, \
            running_server("streamable-http", name="weather-dist") as mcp, \
            cluster(new_interpreters=new_interpreters) as c, aiohttp.ClientSession() as http:
        gateway, replica_1, replica_2 = await start_deployment(
            c, broker, store=store, llm=llm.base_url, topic=topic)
        await load_config(c, gateway, topic=topic, mcp_url=mcp.url)

        # 1. a dialog that uses the tool-service tool and the MCP tool
        answer = await ask(http, gateway, "d0 delay=0")
        assert re.fullmatch(r"d0 served by replica (\d+) \| Paris: sunny for 1 day", answer), answer
        # the tool service on its own, through the gateway's tool-service route
        code, out, err = await run_toolmesh("tool-service", "invoke", "replica", "--arguments",
                                            '{"tag": "direct"}', "--url", gateway)
        assert code == 0 and "direct served by replica" in out, err

        # 2. SIGKILL one replica while calls are on both
        marks = len(replica_1.lines), len(replica_2.lines)
        tags = [f"k{i}" for i in range(8)]
        started = time.monotonic()
        dialogs = [asyncio.ensure_future(ask(http, gateway, f"{t} delay={WORK}")) for t in tags]

        def serving(replica: Proc, mark: int) -> set[str]:
            return {line.split()[-1] for line in replica.lines[mark:] if "serving k" in line}

        def all_in_flight_on_both() -> bool:
            on_1, on_2 = serving(replica_1, marks[0]), serving(replica_2, marks[1])
            return len(on_1 | on_2) == len(tags) and bool(on_1) and bool(on_2)

        await until(all_in_flight_on_both, [replica_1, replica_2], timeout=30)
        on_1, on_2 = serving(replica_1, marks[0]), serving(replica_2, marks[1])
        replica_1.kill()
        dead = replica_1.pid
        async with asyncio.timeout(TOOL_TIMEOUT + 20):  # nobody hangs
            answers = dict(zip(tags, await asyncio.gather(*dialogs)))
        elapsed = time.monotonic() - started
        for tag in sorted(on_2 - on_1):
            assert answers[tag].startswith(f"{tag} served by replica {replica_2.pid} |"), answers
        for tag in sorted(on_1):
            first = answers[tag].split(" | ")[0]
            # RabbitMQ hands the dead replica's unacknowledged call to the live one; a
            # non-persistent Pulsar topic cannot, so the agent's deadline ends it
            assert (first == f"{tag} served by replica {replica_2.pid}"
                    or first == f"Error: the tool 'ask-replica' did not answer within "
                                f"{TOOL_TIMEOUT:g} s"), answers[tag]
            assert str(dead) not in first
        assert elapsed < TOOL_TIMEOUT + WORK + 15, elapsed
        # later calls all go to the live replica
        later = await asyncio.gather(*(ask(http, gateway, f"l{i} delay=0") for i in range(4)))
        assert all(f"served by replica {replica_2.pid} | Paris" in a for a in later), later

        # 3. restart the broker: every service reconnects by itself
        survivors = [p for name, p in c.procs.items() if name != "replica-1"]
        marks_by = {p.name: len(p.lines) for p in survivors}
        await broker.restart()
        if broker.reconnected:
            await asyncio.gather(*(p.wait_for(broker.reconnected, after=marks_by[p.name],
                                              timeout=60) for p in survivors))
        answer = await ask_until_recovered(http, gateway, deadline=time.monotonic() + 60)
        assert re.search(rf"served by replica {replica_2.pid} \| Paris: sunny", answer), answer

        # 4. SIGTERM: every live process stops cleanly
        codes = await c.stop_all()
        assert codes.pop("replica-1") == -9
        assert codes == {name: 0 for name in codes}, (codes, c.logs())


@pytest.mark.rabbitmq
@pytest.mark.postgres
async def test_a_deployment_across_processes_on_rabbitmq_and_postgresql(
        rabbitmq_vhost: Broker, tmp_path: Path) -> None:
    store = f"{POSTGRES}?schema=tm_e2e_{uuid.uuid4().hex[:8]}"
    # every part a new interpreter, as deployed (the other e2e tests fork theirs)
    await scenario(rabbitmq_vhost, tmp_path, store=store, new_interpreters=True)


@pytest.mark.pulsar
async def test_the_same_deployment_on_pulsar(pulsar_lite: Broker, tmp_path: Path) -> None:
    await scenario(pulsar_lite, tmp_path, store=f"sqlite:///{tmp_path}/config.db")
