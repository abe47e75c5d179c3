"""A distributed deployment started all at once, in any order, and stopped all at once.

On the real RabbitMQ and PostgreSQL of this machine, every part its own ``toolmesh run PART``
process, each round in a RabbitMQ vhost and a PostgreSQL schema of its own:

* the seven processes of a deployment (config, gateway, agent, prompt, text-completion and two
  replicas of the joke service) spawned in a random order with no wait between them,
  :data:`ROUNDS` times: the first dialog, sent as soon as the gateway listens, is answered
  with the tool's observation every time, within :data:`FIRST_ANSWER_WITHIN` seconds of the last spawn;
* SIGTERM to every process at once while a dialog hangs on a tool service that never
  answers: every process exits 0 within the drain time and a margin, and the dialog's
  clients (REST and WebSocket) get an error, not a hang;
* ``toolmesh config list`` with no config service (``503`` at once) and with one that was
  SIGKILLed (its queue remains: the gateway's config deadline, ``504``): exit 1 within its
  deadline, with the hint to start ``toolmesh run config``.

The timings are printed (``pytest -s``): they go in the release notes.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.conftest import RUN_MARKER
from tests.e2e.cluster import Proc, cluster
from tests.processes import ROOT, run_toolmesh
from tests.rabbit import new_vhost
from toolmesh.config.store import open_store
from toolmesh.rpc.deadline import margin
from toolmesh.schema.agent import DEFAULT_USER
from toolmesh.tools.services.joke import tell_joke

pytestmark = [pytest.mark.rabbitmq, pytest.mark.postgres]

POSTGRES = "postgresql://root@127.0.0.1:5432/test"

#: rounds of random start orders; each run of the suite draws new orders (the seed is
#: printed), ``TOOLMESH_START_ORDER_ROUNDS=10`` gives the release notes' ten
ROUNDS = int(os.environ.get("TOOLMESH_START_ORDER_ROUNDS") or 3)
#: seconds from the last spawn within which the first dialog must have its answer
FIRST_ANSWER_WITHIN = 10.0
#: --drain-timeout of the processes stopped with a dialog in hand
DRAIN = 2.0
#: how much longer than the drain a process may take to exit
EXIT_MARGIN = 5.0
#: the gateway's deadline for config calls (what `toolmesh config` asks for), and the
#: seconds the CLI may take beyond it (start-up, the 504 travelling)
CONFIG_DEADLINE = 3.0  # the gateway is started with it (the default is 10 s: a slow test)
CLI_SLACK = 2.0

JOKE_TOPIC = "programming"
JOKE_SERVICE = json.loads((ROOT / "examples/joke/joke-service.json").read_text())
TELL_JOKE = json.loads((ROOT / "examples/joke/tell-joke.json").read_text())
HANG_SERVICE = {"id": "hang", "request-queue": "non-persistent://tg/request/hang",
                "response-queue": "non-persistent://tg/response/hang"}
WAIT_FOREVER = {"type": "tool-service", "name": "wait-forever", "service": "hang",
                "description": "Ask a service that never answers",
                "arguments": [{"name": "tag", "type": "string", "description": "a label"}]}


def llm_script(path: Path, tool: str, argument: str) -> str:
    """A scripted model (``--llm scripted:PATH``): call ``tool`` with the first word of the
    question as its ``argument``, then answer with the observation."""
    path.write_text(json.dumps({
        "rules": [
            # the observation runs up to the default agent-react template's last line
            {"match": r"\nObservation: (?P<observation>.*?)\n\nYour reply, starting with",
             "response": "Thought: done\nFinal Answer: {observation}"},
            {"match": r"\nQuestion: (?P<word>\S+)",
             "response": f'Thought: use the tool\nAction: {tool}\n'
                         f'Args: {{"{argument}": "{{word}}"}}'},
        ],
    }))
    return f"scripted:{path}"


class Isolation:
    """RabbitMQ vhosts and PostgreSQL schemas of this test's own (the config queues have fixed
    names, so a deployment needs a vhost to itself); the schemas are removed at the end, the
    vhosts when the test process ends (tests/rabbit.py)."""

    def __init__(self) -> None:
        self.schemas: list[str] = []

    async def bus(self) -> str:
        """The URL of a new, empty vhost."""
        return f"amqp://guest:guest@127.0.0.1:5672/{await new_vhost(f'{RUN_MARKER}-order')}"

    async def store(self, items: dict[tuple[str, str], Any]) -> str:
        """The URL of a config store in a new schema, holding ``items`` — as a deployment
        finds its config when it is started again."""
        schema = f"tm_order_{uuid.uuid4().hex[:8]}"
        self.schemas.append(schema)
        url = f"{POSTGRES}?schema={schema}"
        store = await open_store(url)
        try:
            if items:
                await store.put("default", [(t, k, json.dumps(v)) for (t, k), v in items.items()])
        finally:
            await store.close()
        return url

    async def remove(self) -> None:
        conn = await asyncpg.connect(POSTGRES)
        try:
            for schema in self.schemas:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


@pytest.fixture
async def isolation() -> AsyncIterator[Isolation]:
    iso = Isolation()
    try:
        yield iso
    finally:
        await iso.remove()


async def gateway_url(gateway: Proc, timeout: float = 30) -> str:
    m = await gateway.wait_for(r"gateway listening on (\S+)", timeout=timeout)
    return m.group(1)


# -- A: all parts at once, in random orders -------------------------------------------------

async def test_the_first_dialog_succeeds_whatever_order_the_parts_start_in(
        isolation: Isolation, tmp_path: Path) -> None:
    seed = int(os.environ.get("TOOLMESH_TEST_SEED") or random.randrange(2**32))
    rng = random.Random(seed)
    print(f"\nstart orders from seed {seed} (TOOLMESH_TEST_SEED={seed} repeats them)")
    llm = llm_script(tmp_path / "llm.json", "tell-joke", "topic")
    expected = tell_joke(DEFAULT_USER, TELL_JOKE, {"topic": JOKE_TOPIC})
    timings: list[float] = []
    failures: list[str] = []
    for round_ in range(1, ROUNDS + 1):
        bus, store = await asyncio.gather(isolation.bus(), isolation.store({
            ("tool-service", "joke-service"): JOKE_SERVICE, ("tool", "tell-joke"): TELL_JOKE}))
        parts = {
            "config": ["run", "config", "--config-store", store],
            "gateway": ["run", "gateway", "--port", "0"],
            "agent": ["run", "agent"],
            "prompt": ["run", "prompt"],
            "text-completion": ["run", "text-completion", "--llm", llm],
            "joke-1": ["run", "joke"],
            "joke-2": ["run", "joke"],
        }
        order = list(parts)
        rng.shuffle(order)
        async with cluster() as c, aiohttp.ClientSession() as http:
            for name in order:  # no waiting in between
                await c.start(name, *parts[name], "--bus", bus, ready=None)
            spawned = time.monotonic()
            url = await gateway_url(c.procs["gateway"], FIRST_ANSWER_WITHIN)
            listening = time.monotonic() - spawned
            try:
                async with http.post(
                        url + "api/v1/flow/default/service/agent",
                        json={"question": f"{JOKE_TOPIC} joke, please"},
                        timeout=aiohttp.ClientTimeout(total=FIRST_ANSWER_WITHIN - listening)
                ) as r:
                    outcome: Any = (r.status, await r.json())
            except TimeoutError:
                outcome = f"no answer within {FIRST_ANSWER_WITHIN:g} s of the last spawn"
            answered = time.monotonic() - spawned
            ok = (isinstance(outcome, tuple) and outcome[0] == 200
                  and outcome[1].get("answer") == expected)
            print(f"round {round_:2}: {' '.join(order)}: the gateway listened "
                  f"{listening:.2f} s after the last spawn, the first dialog ended after "
                  f"{answered:.2f} s: {'the joke' if ok else outcome}")
            if ok:
                timings.append(answered)
            else:  # the evidence: when the gateway listened, when the agent took requests
                await c.procs["agent"].wait_for("AgentService serving", timeout=30)
                failures.append(f"round {round_} ({' '.join(order)}): {outcome}\n" + "".join(
                    line for p in c.procs.values() for line in p.lines
                    if "gateway listening" in line or "AgentService serving" in line))
            codes = await c.stop_all()  # nothing in hand: each exits at once
            assert codes == {name: 0 for name in codes}, codes
    if timings:
        print(f"first answer after the last spawn, {len(timings)} rounds: min "
              f"{min(timings):.2f} s, max {max(timings):.2f} s")
    assert not failures, f"{len(failures)} of {ROUNDS} first dialogs failed (seed {seed}):\n" \
        + "\n".join(failures)


# -- B: SIGTERM to every part while a dialog hangs on a tool --------------------------------

async def test_sigterm_to_every_part_with_a_dialog_hanging_on_a_tool(
        isolation: Isolation, tmp_path: Path) -> None:
    bus, store = await asyncio.gather(isolation.bus(), isolation.store({
        ("tool-service", "hang"): HANG_SERVICE, ("tool", "wait-forever"): WAIT_FOREVER}))
    llm = llm_script(tmp_path / "llm.json", "wait-forever", "tag")
    parts = {
        "config": ["run", "config", "--config-store", store],
        "gateway": ["run", "gateway", "--port", "0"],
        "agent": ["run", "agent"],
        "prompt": ["run", "prompt"],
        "text-completion": ["run", "text-completion", "--llm", llm],
        "hang": ["run", "tests.e2e.hang_service:HangService", "--topic", "hang", "--id", "hang"],
    }
    async with cluster() as c, aiohttp.ClientSession() as http:
        await asyncio.gather(*(c.toolmesh(name, *args, "--bus", bus,
                                          "--drain-timeout", f"{DRAIN:g}")
                               for name, args in parts.items()))
        url = await gateway_url(c.procs["gateway"])
        await c.procs["agent"].wait_for(r"tools of workspace .default.: wait-forever")

        # one dialog over REST, one over the WebSocket, both held by the tool service
        rest = asyncio.ensure_future(http.post(
            url + "api/v1/flow/default/service/agent", json={"question": "rest"},
            timeout=aiohttp.ClientTimeout(total=DRAIN + EXIT_MARGIN + 10)))
        ws = await http.ws_connect(url + "api/v1/socket")
        await ws.send_json({"type": "auth", "token": ""})
        assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
        await ws.send_json({"id": "socket", "service": "agent", "flow": "default",
                            "request": {"question": "socket"}})
        hang = c.procs["hang"]
        await hang.wait_for("hanging on rest")
        await hang.wait_for("hanging on socket")

        frames: list[Any] = []

        async def read_socket() -> None:
            """Every frame up to the gateway's close (or its error frame for the dialog)."""
            async for message in ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    break
                frames.append(json.loads(message.data))
                if frames[-1].get("complete"):
                    break

        reader = asyncio.ensure_future(read_socket())
        stopped = time.monotonic()
        for p in c.procs.values():  # every part at once
            p.proc.send_signal(signal.SIGTERM)

        async def exit_of(p: Proc) -> tuple[str, int | None, float]:
            try:
                code: int | None = await asyncio.wait_for(p.proc.wait(), DRAIN + EXIT_MARGIN)
            except TimeoutError:
                code = None  # still running: stop_all kills it at the end
            return p.name, code, time.monotonic() - stopped

        exits = await asyncio.gather(*(exit_of(p) for p in c.procs.values()))
        for name, code, seconds in exits:
            print(f"{name}: exit {code} {seconds:.2f} s after SIGTERM (--drain-timeout {DRAIN:g})")
        assert {name: code for name, code, _ in exits} == {name: 0 for name in parts}, exits
        assert max(s for _, _, s in exits) <= DRAIN + EXIT_MARGIN, exits

        # neither client was left hanging: each got an error answer
        async with asyncio.timeout(5):
            await reader
        try:
            async with asyncio.timeout(5):
                async with await rest as r:
                    rest_answer: Any = (r.status, await r.json())
        except aiohttp.ClientError as e:
            rest_answer = e
        print(f"REST dialog: {rest_answer!r}; WebSocket frames: {frames!r}, then close "
              f"code {ws.close_code}")
        # the agent's own error message (a service's error answer travels as its answer)
        assert isinstance(rest_answer, tuple), rest_answer
        assert rest_answer[1].get("error", {}).get("type") == "service-stopping", rest_answer
        assert frames and frames[-1].get("id") == "socket", frames
        assert frames[-1].get("error", {}).get("type") == "service-stopping", frames


# -- C: the config service is not there -----------------------------------------------------

async def first_byte(http: aiohttp.ClientSession, url: str) -> tuple[float, int, dict[str, Any]]:
    """``config list tool`` over REST: seconds to the response's status line, the status,
    the body."""
    started = time.monotonic()
    async with http.post(url + "api/v1/config", json={"operation": "list", "type": "tool"},
                         timeout=aiohttp.ClientTimeout(total=CONFIG_DEADLINE + 10)) as r:
        seconds = time.monotonic() - started
        return seconds, r.status, await r.json()


async def config_list_cli(url: str) -> tuple[float, int, str]:
    """``toolmesh config list tool``: seconds to its exit, the exit code, stderr."""
    started = time.monotonic()
    code, _, err = await run_toolmesh("config", "list", "tool", "-u", url,
                                      timeout=CONFIG_DEADLINE + 30)
    return time.monotonic() - started, code, err


async def test_config_list_fails_within_its_deadline_with_the_hint_when_config_is_down(
        isolation: Isolation) -> None:
    hint = "toolmesh run config"
    async with cluster() as c, aiohttp.ClientSession() as http:
        # never started: nothing is bound to the config exchange, the gateway says so at once
        never = await isolation.bus()
        # (no start-up grace: within it the gateway would wait for the config service)
        await c.toolmesh("gateway-1", "run", "gateway", "--port", "0", "--bus", never,
                         "--startup-grace", "0")
        url = await gateway_url(c.procs["gateway-1"])
        (ttfb, status, body), (took, code, err) = await asyncio.gather(
            first_byte(http, url), config_list_cli(url))
        print(f"\nconfig never started: HTTP {status} after {ttfb * 1000:.0f} ms; "
              f"`toolmesh config list tool` exit {code} after {took:.2f} s: {err.strip()}")
        assert status == 503 and body["error"]["type"] == "service-unavailable", body
        assert hint in body["error"]["message"], body
        assert ttfb < 1.0, ttfb  # at once
        assert code == 1 and hint in err, (code, err)
        assert took < CONFIG_DEADLINE + CLI_SLACK, took

        # started, then SIGKILLed: its queue stays bound, so the gateway waits out its deadline
        killed = await isolation.bus()
        store = await isolation.store({})
        config = await c.toolmesh("config", "run", "config", "--config-store", store,
                                  "--bus", killed)
        await c.toolmesh("gateway-2", "run", "gateway", "--port", "0", "--bus", killed,
                         "--deadline", f"config={CONFIG_DEADLINE:g}")
        url = await gateway_url(c.procs["gateway-2"])
        took, code, err = await config_list_cli(url)
        assert code == 0, err  # the config service serves
        config.kill()
        await config.proc.wait()
        (ttfb, status, body), (took, code, err) = await asyncio.gather(
            first_byte(http, url), config_list_cli(url))
        print(f"config SIGKILLed: HTTP {status} after {ttfb:.2f} s; "
              f"`toolmesh config list tool` exit {code} after {took:.2f} s: {err.strip()}")
        assert status == 504 and body["error"]["type"] == "timeout", body
        assert hint in body["error"]["message"], body
        # the config call inside the gateway gives up a margin before the route's deadline
        waited = CONFIG_DEADLINE - margin(CONFIG_DEADLINE)
        assert waited - 0.5 <= ttfb <= CONFIG_DEADLINE + 0.5, ttfb
        assert code == 1 and hint in err, (code, err)
        assert took < CONFIG_DEADLINE + CLI_SLACK, took
        codes = await c.stop_all()
        assert codes.pop("config") == -9
        assert codes == {name: 0 for name in codes}, codes
