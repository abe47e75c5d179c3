"""Agents killed in the middle of dialogs on RabbitMQ, every part its own process: the
dialogs' journal in PostgreSQL, a second agent replica started after the first is SIGKILLed.
RabbitMQ hands the dead agent's requests to the new one, which takes each dialog up from its
journal: every client gets its answer, and each call's side effect (a mail, counted by the
tool service per idempotency key) happens once — and the mailer, written with the SDK, runs
each call once: the call made again under the same key gets the first run's answer.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from tests.e2e.cluster import Cluster, cluster
from tests.e2e.test_distributed import POSTGRES, Broker, ask, rabbitmq_vhost  # noqa: F401
from tests.llm.openai_server import Answer, OpenAITestServer, ReceivedRequest

QUESTION = re.compile(r"Question: mail (\w+)")
OBSERVATION = re.compile(r"^Observation: (.*)$", re.M)
DIALOGS = 6


def respond(request: ReceivedRequest) -> Answer:
    """The scripted model: send the mail, then pass on what the tool said."""
    prompt = request.prompt
    seen = OBSERVATION.findall(prompt)
    if seen:
        return Answer(text=f"Thought: done\nFinal Answer: {seen[-1]}")
    m = QUESTION.search(prompt)
    assert m, prompt
    return Answer(text=f'Thought: send it\nAction: send\nArgs: {{"to": "{m.group(1)}"}}')


async def mailer_deployment(c: Cluster, bus: Callable[[int], str], *, store: str, llm: str,
                            agents: dict[str, list[str]], mailer_env: dict[str, str]) -> str:
    """Start config (its store and the journal: ``store``), gateway, prompt, text-completion
    (the scripted model at ``llm``), the ``agents`` (name -> their ``run agent`` command) and
    the mailer, each its own process on its own connection; the gateway's URL, once every
    agent offers ``send``."""
    await asyncio.gather(
        c.toolmesh("config", "run", "config", "--config-store", store, "--bus", bus(1)),
        c.toolmesh("gateway", "run", "gateway", "--port", "0", "--bus", bus(2)),
        c.toolmesh("prompt", "run", "prompt", "--bus", bus(3)),
        c.toolmesh("text-completion", "run", "text-completion", "--llm", llm,
                   "--model", "scripted", "--tool-calling", "react", "--bus", bus(4)),
        *(c.toolmesh(name, *command, "--bus", bus(5 + i))
          for i, (name, command) in enumerate(agents.items())),
        c.toolmesh("mailer", "run", "tests.dialogs.services.mailer:Mailer",
                   "--bus", bus(5 + len(agents)), extra_env=mailer_env))
    gateway = (await c.procs["gateway"].wait_for(r"gateway listening on (\S+)")).group(1)
    for name in agents:
        await c.procs[name].wait_for(r"tools of workspace 'default': .*send")
    return gateway


@pytest.mark.rabbitmq
@pytest.mark.postgres
async def test_dialogs_survive_a_killed_agent_and_act_once(
        rabbitmq_vhost: Broker, tmp_path: Path) -> None:  # noqa: F811
    schema = f"tm_dlg_{uuid.uuid4().hex[:8]}"
    store = f"{POSTGRES}?schema={schema}"
    mail = tmp_path / "mail"
    mail.mkdir()
    bus = rabbitmq_vhost.url
    mailer_env = {"MAILER_DIR": str(mail), "MAILER_SECONDS": "2",
                  "PYTHONPATH": str(Path(__file__).parents[2])}
    try:
        async with OpenAITestServer(respond=respond) as llm, cluster() as c, \
                aiohttp.ClientSession() as http:
            agent = ["run", "agent", "--dialogs", store, "--tool-timeout", "20"]
            gateway = await mailer_deployment(c, bus, store=store, llm=llm.base_url,
                                              agents={"agent-1": agent}, mailer_env=mailer_env)

            names = [f"p{i}" for i in range(DIALOGS)]
            dialogs = [asyncio.ensure_future(ask(http, gateway, f"mail {n}", timeout=90))
                       for n in names]
            attempts = mail / "attempts.log"
            async with asyncio.timeout(30):  # every call is in flight
                while not attempts.exists() or len(attempts.read_text().split()) < DIALOGS:
                    await asyncio.sleep(0.05)
            c.procs["agent-1"].kill()
            await c.toolmesh("agent-2", *agent, "--bus", bus(7))
            async with asyncio.timeout(60):
                answers = await asyncio.gather(*dialogs)
            taken_up = [line for line in c.procs["agent-2"].lines if "taking up dialog" in line]
    finally:
        conn = await asyncpg.connect(POSTGRES)
        try:
            recorded = await conn.fetch(f"SELECT status, tool_calls FROM {schema}.toolmesh_dialogs")
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        finally:
            await conn.close()
    assert sorted(answers) == sorted(f"sent to {n}" for n in names)
    assert len(taken_up) == DIALOGS, taken_up
    keys = attempts.read_text().split()
    # each call was made again (in flight when the agent died) with the same key, and the
    # mailer, written with the SDK, ran it once: the repeat waited for the first run's answer
    assert len(set(keys)) == DIALOGS
    assert all(keys.count(k) == 1 for k in set(keys)), keys
    assert sorted(p.read_text() for p in (mail / "sent").iterdir()) == sorted(
        f"to {n}" for n in names)
    assert sorted((r["status"], r["tool_calls"]) for r in recorded) == [("answer", 1)] * DIALOGS
