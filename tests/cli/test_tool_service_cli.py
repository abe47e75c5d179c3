"""`toolmesh tool-service invoke` as a user runs it: a real process against a real gateway —
`toolmesh serve` (with its joke service), or an in-process gateway with the streaming joke
service on every bus backend."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.gateway.test_tool_service_route import (
    descriptor,
    joke,
    private_config_service,
)
from tests.processes import ROOT, run_toolmesh
from tests.servers import Served, toolmesh_serve
from toolmesh.config.client import ConfigClient
from toolmesh.gateway import Gateway, GatewayOptions
from toolmesh.gateway.tool_service import ToolServiceEndpoint
from toolmesh.tools.services.joke import StreamingJokeService


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """`toolmesh serve` with the joke descriptor of examples/joke stored by `toolmesh config put`,
    and a descriptor nobody serves."""
    async with toolmesh_serve(tmp_path) as s:
        silent = tmp_path / "silent.json"
        silent.write_text(json.dumps({"id": "silent", "request-queue": "request:tg:nobody",
                                      "response-queue": "response:tg:nobody"}))
        for item, file in [("tool-service/joke-service", ROOT / "examples/joke/joke-service.json"),
                           ("tool-service/silent", silent)]:
            code, _, err = await run_toolmesh("config", "put", item, str(file), "-u", s.url)
            assert code == 0, err
        yield s


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_invoke_prints_the_answer(served: Served) -> None:
    u = ["-u", served.url]
    code, out, err = await run_toolmesh("tool-service", "invoke", "joke-service", "--config",
                                        '{"style": "dad-joke"}', "--arguments",
                                        '{"topic": "animals"}', "--user", "alice", *u)
    assert (code, out) == (0, joke("alice", "dad-joke", "animals") + "\n"), err
    code, out, err = await run_toolmesh("tool-service", "invoke", "joke-service", "--stream",
                                        "-a", '{"topic": "food"}', *u)
    assert (code, out) == (0, joke("trustgraph", "pun", "food") + "\n"), err


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_failures_exit_non_zero_with_one_line(served: Served) -> None:
    u = ["-u", served.url]
    invoke = ["tool-service", "invoke"]
    cases = [
        ([*invoke, "nope", *u], "unknown-tool-service: no tool service 'nope' in workspace "
                                "'default': no config item tool-service/nope and no running "
                                "instance announces it; start it (toolmesh run MODULE:CLASS) or "
                                "store its descriptor, e.g. 'toolmesh config put "
                                "tool-service/nope descriptor.json'"),
        ([*invoke, "nope", "--stream", *u], "no config item tool-service/nope"),
        ([*invoke, "", *u], "bad-request: a tool-service request needs 'id'"),
        ([*invoke, "joke-service", "--config", "{oops", *u], "--config is not valid JSON"),
        ([*invoke, "joke-service", "--arguments", '["food"]', *u],
         "--arguments must be a JSON object"),
        ([*invoke, "joke-service", "--config", '{"style": "limerick"}', *u],
         "tool-service-error: unknown joke style 'limerick'"),
        ([*invoke, "joke-service", "--config", '{"style": "limerick"}', "--stream", *u],
         "tool-service-error: unknown joke style 'limerick'"),
        ([*invoke, "silent", "--timeout", "0.3", *u],
         "gateway error 503: service-unavailable: nothing is consuming request:tg:nobody: is the tool service 'silent'"),
        ([*invoke, "silent", "--timeout", "0.3", "--stream", *u],
         "service-unavailable: nothing is consuming request:tg:nobody"),
        ([*invoke, "joke-service", "-u", "http://127.0.0.1:9/"], "cannot reach the gateway"),
        ([*invoke, "joke-service", "--stream", "-u", "http://127.0.0.1:9/"],
         "cannot reach the gateway"),
    ]
    results = await asyncio.gather(*(run_toolmesh(*args) for args, _ in cases))
    for (args, complaint), (code, out, err) in zip(cases, results):
        assert code == 1, (args, out, err)
        assert complaint in err, (args, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, (args, err)
        assert out == "", (args, out)


async def test_stream_prints_a_streaming_service_piece_by_piece(
        backend: Backend, tmp_path: Path) -> None:
    t = backend.topic("tscli")
    bus = await backend.connect()
    async with AsyncExitStack() as stack:
        queues = await private_config_service(stack, bus, tmp_path, t)
        await stack.enter_async_context(StreamingJokeService(bus, topic=f"{t}-stream"))
        async with ConfigClient(bus, timeout=10, **queues) as config:
            await config.put({("tool-service", "streaming-joke"):
                              descriptor("streaming-joke", f"{t}-stream")})
        endpoint = ToolServiceEndpoint(bus, config_queues=queues)
        gateway = await stack.enter_async_context(
            Gateway(bus, GatewayOptions(port=0, token="s3cret", extra_endpoints=(endpoint,))))
        args = ["tool-service", "invoke", "streaming-joke", "-a", '{"topic": "programming"}',
                "-u", gateway.url, "--token", "s3cret"]
        streamed, whole, refused = await asyncio.gather(
            run_toolmesh(*args, "--stream"), run_toolmesh(*args),
            run_toolmesh(*args[:-1], "wrong", "--stream"))
    expected = joke("trustgraph", "pun", "programming") + "\n"
    assert streamed == (0, expected, "")
    assert whole == (0, expected, "")
    code, out, err = refused
    assert code == 1 and "the gateway refused the token" in err and len(err.splitlines()) == 1
