"""`toolmesh run config|gateway|joke` as separate processes on RabbitMQ and PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import re
import uuid

import asyncpg

from tests.conftest import Backend
from tests.config.test_config_service import TELL_JOKE
from tests.processes import run_toolmesh, start_toolmesh
from toolmesh import ToolServiceClient
from toolmesh.tools.queues import topic_queues

POSTGRES = os.environ.get("TOOLMESH_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test")


async def test_config_and_gateway_as_separate_processes(rabbitmq: Backend) -> None:
    schema = f"tm_parts_{uuid.uuid4().hex[:8]}"
    store = f"{POSTGRES}?schema={schema}"
    procs = []
    try:
        config, _ = await start_toolmesh("run", "config", "--bus", rabbitmq.url,
                                         "--config-store", store)
        procs.append(config)
        gateway, lines = await start_toolmesh("run", "gateway", "--bus", rabbitmq.url,
                                              "--port", "0")
        procs.append(gateway)
        url = next(m.group(1) for line in lines
                   if (m := re.search(r"gateway listening on (\S+)", line)))
        joke, _ = await start_toolmesh("run", "joke", "--bus", rabbitmq.url)
        procs.append(joke)

        code, _, err = await run_toolmesh("config", "put", "tool/tell-joke", "-", "--url", url,
                                          stdin_text=TELL_JOKE)
        assert code == 0, err
        code, out, err = await run_toolmesh("config", "list", "tool", "--url", url)
        assert (code, out.split()) == (0, ["tell-joke"]), err

        # the item is in PostgreSQL, where another machine's config service would find it
        connection = await asyncpg.connect(POSTGRES)
        try:
            tables = await connection.fetch(
                "select table_name from information_schema.tables where table_schema = $1", schema)
            assert tables
        finally:
            await connection.close()

        # and the joke service runs in its own process on the shared broker
        request_queue, response_queue = topic_queues("joke")
        async with ToolServiceClient(await rabbitmq.connect(), request_queue=request_queue,
                                     response_queue=response_queue) as client:
            text = await client.call(user="ops", arguments={"topic": "food"}, timeout=20)
        assert text.startswith("Hey ops!")
    finally:
        for proc in procs:
            proc.terminate()
        codes = [await asyncio.wait_for(p.wait(), 20) for p in procs]
        connection = await asyncpg.connect(POSTGRES)
        await connection.execute(f'drop schema if exists "{schema}" cascade')
        await connection.close()
    assert codes == [0] * len(procs)


async def test_a_tool_service_process_takes_its_settings_from_the_environment(
        rabbitmq: Backend) -> None:
    topic = rabbitmq.topic("env")
    proc, lines = await start_toolmesh(
        "run", "tests.tools.sample_services:Inventory", extra_env={
            "TOOLMESH_BUS": rabbitmq.url, "TOOLMESH_SERVICE_TOPIC": topic,
            "TOOLMESH_SERVICE_ID": "inventory-env", "TOOLMESH_SERVICE_CONCURRENCY": "3"})
    try:
        assert any(f"non-persistent://tg/request/{topic}" in line and "3 at once" in line
                   and "inventory-env" in line for line in lines), lines
        request_queue, response_queue = topic_queues(topic)
        async with ToolServiceClient(await rabbitmq.connect(), request_queue=request_queue,
                                     response_queue=response_queue) as client:
            result = await client.call(user="ops", arguments={"n": 1}, timeout=20)
        assert '"arguments": {"n": 1}' in result or '"arguments":{"n":1}' in result, result
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 20) == 0


async def test_run_refuses_an_unknown_part_with_its_usage() -> None:
    code, out, err = await run_toolmesh("run", "nonsense")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert lines[0].startswith("usage: toolmesh run ")
    assert lines[-1].startswith("toolmesh run: error: argument PART: invalid choice: "
                                "'nonsense' (choose from 'config', 'gateway', ")
    assert "Traceback" not in err
