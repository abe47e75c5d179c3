"""Helpers for tests against the real RabbitMQ server on this machine."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import subprocess
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


async def close_connection_from_broker(*connection_names: str) -> None:
    """Make the broker close the connections clients named ``connection_names``."""
    out = await rabbitmqctl("list_connections", "--no-table-headers", "pid", "client_properties")
    for name in connection_names:
        # a line: '<rabbit@host.1.2.0>\t[{"capabilities",[...]},{"connection_name","NAME"},...]'
        pids = [line.split("\t")[0] for line in out.splitlines()
                if f'{{"connection_name","{name}"}}' in line]
        if not pids:
            raise RuntimeError(f"no RabbitMQ connection named {name!r}")
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


#: the vhosts this test process made: deleted together when it ends, by one ``rabbitmqctl``
#: (each one boots an Erlang VM, about a third of a CPU-second, and the suite is CPU-bound)
_made: list[str] = []
#: who the broker records as having made and deleted them
_ACTING_USER = '<<"toolmesh-tests">>'


async def new_vhost(name: str) -> str:
    """The name of a new RabbitMQ vhost ``name-<random>`` that guest may use, deleted when the
    test process ends: for tests whose processes use TrustGraph's fixed queue names (the config
    service's, say), which other tests' processes on the shared broker must not answer."""
    vhost = f"{name}-{uuid.uuid4().hex[:6]}"
    binary = f'<<"{vhost}">>'
    try:  # both steps in one rabbitmqctl
        await rabbitmqctl("eval", f"ok = rabbit_vhost:add({binary}, {_ACTING_USER}), "
                          f"ok = rabbit_auth_backend_internal:set_permissions(<<\"guest\">>, "
                          f'{binary}, <<".*">>, <<".*">>, <<".*">>, {_ACTING_USER}).')
    except RuntimeError:
        # the broker is restarting (tests/e2e/test_distributed restarts it), or its internal
        # functions are not these (another RabbitMQ release): the documented commands
        await rabbitmqctl("await_startup")
        await rabbitmqctl("add_vhost", vhost)
        await rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    if not _made:
        atexit.register(_delete_made_vhosts)
    _made.append(vhost)
    return vhost


def _delete_made_vhosts() -> None:
    exe = shutil.which("rabbitmqctl")
    if exe is None or not _made:
        return
    names = ", ".join(f'<<"{v}">>' for v in _made)
    # catch: one already gone must not keep the others
    done = subprocess.run([exe, "-q", "eval", f"[catch rabbit_vhost:delete(V, {_ACTING_USER}) "
                           f"|| V <- [{names}]]."], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        for vhost in _made:
            subprocess.run([exe, "-q", "delete_vhost", vhost], capture_output=True, timeout=60)
    _made.clear()


@contextlib.asynccontextmanager
async def own_vhost(name: str) -> AsyncIterator[str]:
    """The URL of a new vhost of :func:`new_vhost`'s."""
    yield f"amqp://guest:guest@127.0.0.1:5672/{await new_vhost(name)}"
