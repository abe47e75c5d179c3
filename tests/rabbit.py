"""Helpers for tests against the real RabbitMQ server on this machine."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator

RABBITMQ_URL = os.environ.get("TOOLMESH_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")


async def rabbitmqctl(*args: str) -> str:
    """Run ``rabbitmqctl`` and return its output (raises if it fails)."""
    exe = shutil.which("rabbitmqctl")
    if exe is None:
        raise RuntimeError("rabbitmqctl is not installed; the RabbitMQ tests need it")
    proc = await asyncio.create_subprocess_exec(
        exe, "-q", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed: {err.decode()}")
    return out.decode()


async def close_connection_from_broker(connection_name: str) -> None:
    """Make the broker close the connection a client named ``connection_name``."""
    out = await rabbitmqctl("list_connections", "--no-table-headers", "pid", "client_properties")
    # a line: '<rabbit@host.1.2.0>\t[{"capabilities",[...]},{"connection_name","NAME"},...]'
    pids = [line.split("\t")[0] for line in out.splitlines()
            if f'{{"connection_name","{connection_name}"}}' in line]
    if not pids:
        raise RuntimeError(f"no RabbitMQ connection named {connection_name!r}")
    for pid in pids:
        await rabbitmqctl("close_connection", pid, "closed by a toolmesh test")


async def delete_test_entities(marker: str) -> None:
    """Delete the queues and exchanges whose names contain ``marker``."""
    import aio_pika

    queues = [q for q in (await rabbitmqctl("list_queues", "name")).split() if marker in q]
    exchanges = [x for x in (await rabbitmqctl("list_exchanges", "name")).split() if marker in x]
    if not queues and not exchanges:
        return
    connection = await aio_pika.connect(RABBITMQ_URL)
    try:
        channel = await connection.channel()
        for q in queues:
            await channel.queue_delete(q)
        for x in exchanges:
            await channel.exchange_delete(x)
    finally:
        await connection.close()


@contextlib.asynccontextmanager
async def own_vhost(name: str) -> AsyncIterator[str]:
    """The URL of a new RabbitMQ vhost ``name-<random>`` that guest may use, deleted on exit:
    for tests whose processes use TrustGraph's fixed queue names (the config service's, say),
    which other tests' processes on the shared broker must not answer."""
    vhost = f"{name}-{uuid.uuid4().hex[:6]}"
    await rabbitmqctl("add_vhost", vhost)
    await rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    try:
        yield f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    finally:
        await rabbitmqctl("delete_vhost", vhost)
