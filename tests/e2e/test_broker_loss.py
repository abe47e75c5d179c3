"""The broker closes every connection of a deployment while a tool call is in flight (issue
42: "one tool call ran 4 times under one idempotency key"). Every part its own process on
RabbitMQ, the mailer written with the SDK: a dialog's call and a call through the gateway's
REST tool-service route each ran once, and each client got its answer."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from tests.e2e.cluster import cluster
from tests.e2e.test_distributed import POSTGRES, Broker, ask, rabbitmq_vhost  # noqa: F401
from tests.e2e.test_durable_dialogs import mailer_deployment, respond
from tests.llm.openai_server import OpenAITestServer
from tests.rabbit import rabbitmqctl


async def _close_all_connections(vhost_url: str) -> int:
    """Make the broker close every connection of the vhost; how many it closed."""
    vhost = vhost_url.rsplit("/", 1)[1]
    listed = await rabbitmqctl("list_connections", "-p", vhost, "--no-table-headers", "pid")
    pids = listed.split()
    await rabbitmqctl("close_all_connections", "-p", vhost, "closed by a toolmesh test")
    return len(pids)


async def _attempts(path: Path, n: int) -> None:
    async with asyncio.timeout(30):
        while not path.exists() or len(path.read_text().split()) < n:
            await asyncio.sleep(0.05)


@pytest.mark.rabbitmq
@pytest.mark.postgres
async def test_a_call_in_flight_when_the_broker_drops_every_connection_runs_once(
        rabbitmq_vhost: Broker, tmp_path: Path) -> None:  # noqa: F811
    schema = f"tm_loss_{uuid.uuid4().hex[:8]}"
    store = f"{POSTGRES}?schema={schema}"
    mail = tmp_path / "mail"
    mail.mkdir()
    bus = rabbitmq_vhost.url
    attempts = mail / "attempts.log"
    try:
        async with OpenAITestServer(respond=respond) as llm, cluster() as c, \
                aiohttp.ClientSession() as http:
            agent = ["run", "agent", "--dialogs", store, "--tool-timeout", "30"]
            gateway = await mailer_deployment(
                c, bus, store=store, llm=llm.base_url, agents={"agent": agent},
                mailer_env={"MAILER_DIR": str(mail), "MAILER_SECONDS": "4",
                            "PYTHONPATH": str(Path(__file__).parents[2])})
            # a dialog's call
            dialog = asyncio.ensure_future(ask(http, gateway, "mail ann", timeout=90))
            await _attempts(attempts, 1)
            closed = await _close_all_connections(bus(0))
            answer = await dialog
            # a call through the REST tool-service route, with the client's key
            direct = asyncio.ensure_future(http.post(
                gateway + "api/v1/flow/default/service/tool-service",
                json={"id": "mailer", "arguments": {"to": "bob"},
                      "idempotency-key": "order-1", "timeout": 60}))
            await _attempts(attempts, 2)
            await _close_all_connections(bus(0))
            async with await direct as r:
                status, body = r.status, await r.json()
            reconnected = sum("reconnected to RabbitMQ" in line
                              for p in c.procs.values() for line in p.lines)
    finally:
        conn = await asyncpg.connect(POSTGRES)
        try:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        finally:
            await conn.close()
    assert closed >= 6 and reconnected >= 12  # every part lost its connection, twice
    assert answer == "sent to ann"
    assert (status, body) == (200, {"response": "sent to bob", "end_of_stream": True})
    keys = attempts.read_text().split()
    assert len(keys) == 2 and keys[0].endswith("/1/call_1"), keys  # DIALOG/STEP/CALL
    assert keys[1] == "local/order-1"  # the client's key, under the caller (no token set)
    assert sorted(p.read_text() for p in (mail / "sent").iterdir()) == ["to ann", "to bob"]
