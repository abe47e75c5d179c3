"""Approval across a distributed deployment: every part its own process on RabbitMQ, two agent
replicas sharing a PostgreSQL journal. Dialogs wait for a person; answers given through the
gateway reach whichever replica runs each dialog (any replica may take an answer); then the
replica holding waiting dialogs is SIGKILLed, and the other takes them up, asks again, and
runs each approved call once."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.e2e.cluster import cluster
from tests.e2e.test_distributed import POSTGRES, Broker, ask, rabbitmq_vhost  # noqa: F401
from tests.e2e.test_durable_dialogs import mailer_deployment, respond
from tests.llm.openai_server import OpenAITestServer

DIALOGS = 4


async def approvals(http: aiohttp.ClientSession, gateway: str, body: dict[str, Any]
                    ) -> dict[str, Any]:
    async with http.post(f"{gateway}api/v1/flow/default/service/approvals", json=body) as r:
        return await r.json()  # type: ignore[no-any-return]


async def waiting(http: aiohttp.ClientSession, gateway: str, n: int) -> list[dict[str, Any]]:
    async with asyncio.timeout(60):
        while True:
            listed = (await approvals(http, gateway, {"operation": "list"})).get("approvals")
            if listed is not None and len(listed) >= n:
                return listed
            await asyncio.sleep(0.1)


@pytest.mark.rabbitmq
@pytest.mark.postgres
async def test_answers_reach_the_replica_that_runs_the_dialog_even_after_a_kill(
        rabbitmq_vhost: Broker, tmp_path: Path) -> None:  # noqa: F811
    schema = f"tm_apr_{uuid.uuid4().hex[:8]}"
    store = f"{POSTGRES}?schema={schema}"
    mail = tmp_path / "mail"
    mail.mkdir()
    bus = rabbitmq_vhost.url
    mailer_env = {"MAILER_DIR": str(mail), "PYTHONPATH": str(Path(__file__).parents[2])}
    try:
        async with OpenAITestServer(respond=respond) as llm, cluster() as c, \
                aiohttp.ClientSession() as http:
            agent = ["run", "agent", "--dialogs", store, "--approval", "always"]
            gateway = await mailer_deployment(c, bus, store=store, llm=llm.base_url,
                                              agents={"agent-1": agent, "agent-2": agent},
                                              mailer_env=mailer_env)

            # round one: both replicas run dialogs and both take answers
            first = [asyncio.ensure_future(ask(http, gateway, f"mail a{i}", timeout=90))
                     for i in range(DIALOGS)]
            listed = await waiting(http, gateway, DIALOGS)
            assert not (mail / "attempts.log").exists()  # nothing runs unapproved
            answered = await asyncio.gather(*(approvals(http, gateway, {
                "operation": "approve", "dialog": a["dialog"], "call": a["call"],
                "digest": a["digest"]}) for a in listed))
            async with asyncio.timeout(60):
                first_answers = await asyncio.gather(*first)

            # round two: dialogs wait; the replica that runs them is killed
            second = [asyncio.ensure_future(ask(http, gateway, f"mail b{i}", timeout=90))
                      for i in range(DIALOGS)]
            before = await waiting(http, gateway, DIALOGS)
            c.procs["agent-1"].kill()
            c.procs["agent-2"].kill()
            await c.toolmesh("agent-3", *agent, "--bus", bus(8))
            async with asyncio.timeout(60):
                while len([line for line in c.procs["agent-3"].lines
                           if "taking up dialog" in line]) < DIALOGS:
                    await asyncio.sleep(0.1)
            after = await waiting(http, gateway, DIALOGS)
            for a in after:
                await approvals(http, gateway, {"operation": "approve", "dialog": a["dialog"],
                                                "call": a["call"], "digest": a["digest"]})
            async with asyncio.timeout(60):
                second_answers = await asyncio.gather(*second)
    finally:
        conn = await asyncpg.connect(POSTGRES)
        try:
            recorded = await conn.fetch(
                f"SELECT status, tool_calls FROM {schema}.toolmesh_dialogs")
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        finally:
            await conn.close()
    assert all(a.get("answer", {}).get("decision") == "approve" for a in answered), answered
    assert sorted(first_answers) == sorted(f"sent to a{i}" for i in range(DIALOGS))
    assert sorted(second_answers) == sorted(f"sent to b{i}" for i in range(DIALOGS))
    assert sorted((a["call"], a["digest"], a["expires"]) for a in after) == sorted(
        (a["call"], a["digest"], a["expires"]) for a in before)
    # every approved call acted once: one attempt and one mail per dialog
    keys = (mail / "attempts.log").read_text().split()
    assert len(keys) == len(set(keys)) == 2 * DIALOGS, keys
    assert len(list((mail / "sent").iterdir())) == 2 * DIALOGS
    assert sorted((r["status"], r["tool_calls"]) for r in recorded) == [("answer", 1)] * (
        2 * DIALOGS)
