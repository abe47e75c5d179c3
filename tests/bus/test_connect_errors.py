"""A broker that cannot be used, as a new user meets it: `toolmesh run` ends with exit 1 and
one line that names the cause and what to check, the password masked, nothing from the
broker libraries around it. A running service that loses its broker says so once, in
toolmesh's words, and once more when it is back."""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.bus.tcp_proxy import TcpProxy
from tests.processes import run_toolmesh, start_toolmesh
from tests.pulsar_broker import free_port
from tests.tools.test_service_errors import vhost_url  # noqa: F401  (the fixture)
from toolmesh import connect
from toolmesh.tools.client import ToolServiceClient
from toolmesh.tools.queues import topic_queues

RABBITMQ = "127.0.0.1:5672"
PASSWORD = "s3cret-Pw"


async def one_line_failure(*args: str) -> str:
    """Run ``toolmesh ARGS``; check it failed with exactly one clean line; that line."""
    code, out, err = await run_toolmesh(*args, timeout=90)
    assert code == 1, err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err  # nothing from aio-pika, aiormq or pulsar-client around it
    assert lines[0].startswith("toolmesh: error: "), err
    assert "Traceback" not in err and PASSWORD not in err and "guest:guest" not in err
    return lines[0].removeprefix("toolmesh: error: ")


@pytest.mark.rabbitmq
@pytest.mark.parametrize(("url", "says"), [
    (f"amqp://guest:guest@{RABBITMQ}/tm-no-such-vhost",
     "the virtual host 'tm-no-such-vhost' does not exist or user 'guest' may not use it "
     "(rabbitmqctl add_vhost tm-no-such-vhost; rabbitmqctl set_permissions -p tm-no-such-vhost "
     "guest '.*' '.*' '.*')"),
    (f"amqp://guest:{PASSWORD}@{RABBITMQ}/",
     "RabbitMQ refused the login of user 'guest' (check the user and password)"),
    (f"amqp://guest:{PASSWORD}@127.0.0.1:{{port}}/",
     "nothing is listening at 127.0.0.1:{port} (is RabbitMQ running?)"),
    (f"amqp://guest:{PASSWORD}@no-such-host.invalid:5672/",
     "cannot resolve the host name 'no-such-host.invalid' (check the host in the bus URL)"),
], ids=["missing-vhost", "wrong-password", "closed-port", "unknown-host"])
async def test_rabbitmq_start_up_failures_are_one_line(url: str, says: str) -> None:
    port = free_port()
    url, says = url.replace("{port}", str(port)), says.replace("{port}", str(port))
    masked = re.sub(r"^amqp://guest:[^@]+@", "amqp://guest:***@", url)
    assert await one_line_failure("run", "joke", "--bus", url) == \
        f"cannot connect to RabbitMQ at {masked}: {says}"


@pytest.mark.parametrize(("url", "says"), [
    ("pulsar://127.0.0.1:{port}", "nothing is listening at 127.0.0.1:{port} (is Pulsar running?)"),
    ("pulsar://no-such-host.invalid:6650",
     "cannot resolve the host name 'no-such-host.invalid' (check the host in the bus URL)"),
], ids=["closed-port", "unknown-host"])
async def test_pulsar_start_up_failures_are_one_line(url: str, says: str) -> None:
    port = free_port()
    url, says = url.replace("{port}", str(port)), says.replace("{port}", str(port))
    assert await one_line_failure("run", "joke", "--bus", url) == \
        f"cannot connect to Pulsar at {url}: {says}"


@pytest.mark.parametrize("command", [["config", "list", "tool"], ["tools"],
                                     ["tool-service", "invoke", "joke-service"]])
async def test_gateway_commands_say_to_start_the_gateway(command: list[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    assert await one_line_failure(*command, "-u", url) == (
        f"cannot reach the gateway at {url}: nothing is listening there (start it with "
        "`toolmesh serve`, or give its URL with -u or TOOLMESH_URL)")


@pytest.mark.parametrize("command", [["agent", "hello"],
                                     ["tool-service", "invoke", "joke-service", "--stream"]])
async def test_websocket_commands_say_to_start_the_gateway(command: list[str]) -> None:
    port = free_port()
    assert await one_line_failure(*command, "-u", f"http://127.0.0.1:{port}/") == (
        f"cannot reach the gateway at ws://127.0.0.1:{port}/api/v1/socket: nothing is "
        "listening there (start it with `toolmesh serve`, or give its URL with -u or "
        "TOOLMESH_URL)")


@pytest.mark.rabbitmq
async def test_a_running_service_reports_a_lost_broker_once(vhost_url: str) -> None:  # noqa: F811
    """The service reaches RabbitMQ through a proxy; the proxy goes away for a few reconnect
    attempts and comes back."""
    proxy = TcpProxy(5672)
    await proxy.start()
    url = vhost_url.replace(RABBITMQ, f"127.0.0.1:{proxy.port}")
    proc, lines = await start_toolmesh("run", "tests.tools.sample_services:Inventory",
                                       "--topic", "inventory", "--bus", url)

    async def until(text: str) -> None:
        """Read the service's stderr until a line holds ``text``."""
        assert proc.stderr is not None
        async with asyncio.timeout(30):
            while not any(text in line for line in lines):
                raw = await proc.stderr.readline()
                assert raw, "the service ended:\n" + "".join(lines)
                lines.append(raw.decode(errors="replace"))

    try:
        await proxy.stop()
        await until("still no connection to RabbitMQ")
        await asyncio.sleep(2.5)  # more attempts fail (one a second): none of them is news
        await proxy.start()
        await until("reconnected to RabbitMQ")
        # it serves again
        bus = await connect(vhost_url)
        try:
            async with ToolServiceClient(bus, request_queue=topic_queues("inventory")[0],
                                         response_queue=topic_queues("inventory")[1]) as c:
                assert '"user": "u"' in await c.call(user="u", timeout=20)
        finally:
            await bus.close()
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 20)
        await proxy.stop()
    assert proc.stderr is not None
    log = "".join(lines) + (await proc.stderr.read()).decode(errors="replace")
    masked = url.replace("guest:guest@", "guest:***@")
    after_start = log[log.index("ready:"):]
    assert after_start.count(f"WARNING toolmesh.bus.rabbitmq: lost the connection to "
                             f"RabbitMQ at {masked} (") == 1, log
    assert after_start.count(f"WARNING toolmesh.bus.rabbitmq: still no connection to RabbitMQ "
                             f"at {masked}: nothing is listening at 127.0.0.1:{proxy.port} "
                             "(is RabbitMQ running?); retrying every 1 s") == 1, log
    assert after_start.count(f"INFO toolmesh.bus.rabbitmq: reconnected to RabbitMQ at "
                             f"{masked}") == 1, log
    # and not a word from the libraries, nor a traceback
    assert "aio_pika" not in log and "aiormq" not in log and "Traceback" not in log, log
    assert "guest:guest" not in log


@pytest.mark.rabbitmq
async def test_a_service_stops_at_once_while_its_broker_is_away(vhost_url: str) -> None:  # noqa: F811
    proxy = TcpProxy(5672)
    await proxy.start()
    url = vhost_url.replace(RABBITMQ, f"127.0.0.1:{proxy.port}")
    proc, lines = await start_toolmesh("run", "tests.tools.sample_services:Inventory",
                                       "--topic", "inventory", "--bus", url)
    try:
        await proxy.stop()
        assert proc.stderr is not None
        async with asyncio.timeout(30):
            while not any("lost the connection to RabbitMQ" in line for line in lines):
                lines.append((await proc.stderr.readline()).decode(errors="replace"))
        proc.terminate()
        # the drain has nothing in hand: no waiting for a broker that may never return
        assert await asyncio.wait_for(proc.wait(), 5) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = "".join(lines) + (await proc.stderr.read()).decode(errors="replace")
    assert "Traceback" not in log, log
