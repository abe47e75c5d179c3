"""`toolmesh run-service` (an alias of `toolmesh run`) and `toolmesh demo` as a user runs them:
real processes."""

from __future__ import annotations

import asyncio
import json
import signal

import pytest

from tests.conftest import Backend
from tests.processes import run_toolmesh, start_toolmesh
from toolmesh import ToolServiceClient
from toolmesh.tools.queues import topic_queues


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_builtin_service_runs_as_a_process_and_stops_cleanly(
        rabbitmq: Backend, sig: signal.Signals) -> None:
    topic = rabbitmq.topic("joke")
    proc, _ = await start_toolmesh("run-service", "joke", "--topic", topic, "--bus", rabbitmq.url)
    try:
        request_queue, response_queue = topic_queues(topic)
        async with ToolServiceClient(await rabbitmq.connect(), request_queue=request_queue,
                                     response_queue=response_queue) as client:
            text = await client.call(user="zoe", arguments={"topic": "animals"}, timeout=20)
        assert text.startswith("Hey zoe! Here's a pun for you:")
    finally:
        proc.send_signal(sig)
        code = await asyncio.wait_for(proc.wait(), 20)
    assert code == 0


async def test_any_subclass_runs_by_module_and_class(rabbitmq: Backend) -> None:
    topic = rabbitmq.topic("inv")
    request_queue, response_queue = f"request:tg:{topic}", f"response:tg:{topic}"
    proc, _ = await start_toolmesh(
        "run-service", "tests.tools.sample_services:Inventory", "--bus", rabbitmq.url,
        "--request-queue", request_queue, "--response-queue", response_queue)
    try:
        async with ToolServiceClient(await rabbitmq.connect(), request_queue=request_queue,
                                     response_queue=response_queue) as client:
            text = await client.call(user="u", config={"c": 1}, arguments={"a": 2}, timeout=20)
        assert json.loads(text) == {"user": "u", "config": {"c": 1}, "arguments": {"a": 2}}
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 20) == 0


@pytest.mark.parametrize(("args", "complaint"), [
    (["run-service", "no.such.module:Thing", "--topic", "x"], "cannot import module 'no.such.module'"),
    (["run-service", "toolmesh.errors:ToolmeshError", "--topic", "x"],
     "'toolmesh.errors:ToolmeshError' is a class based on Exception, not a DynamicToolService "
     "subclass"),
    (["run-service", "toolmesh.errors:Nope", "--topic", "x"],
     "module 'toolmesh.errors' has no class 'Nope' (it defines no DynamicToolService subclass)"),
    (["run-service", "tests.tools.sample_services:", "--topic", "x"],
     "neither MODULE:CLASS nor a built-in"),
    (["run-service", "tests.tools.sample_services:Inventory"], "give --topic"),
    (["run-service", "joke", "--bus", "kafka://x"], "unsupported bus URL"),
    (["run-service", "joke", "--bus", "amqp://guest:guest@127.0.0.1:9/"], "cannot connect to RabbitMQ"),
])
async def test_bad_invocations_fail_with_one_line(args: list[str], complaint: str) -> None:
    code, out, err = await run_toolmesh(*args)
    assert code == 1
    assert complaint in err
    assert "Traceback" not in err
    assert "guest:guest" not in err  # passwords never reach the terminal
    assert err.strip().splitlines()[-1].startswith("toolmesh: error:")


async def test_demo_shows_a_call_a_streamed_call_and_an_error() -> None:
    code, out, err = await run_toolmesh("demo")
    assert code == 0, err
    assert "Hey alice! Here's a pun for you:" in out
    assert "streamed call" in out and "'bulldozer.'" in out
    assert "error response: type='tool-service-error'" in out
