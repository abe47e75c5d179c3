"""`toolmesh services` against a real `toolmesh serve`: the joke service it runs announces
itself, so it is listed with no config at all; configured too once its items are put; and
the ways the command says there is nothing to list or no gateway to ask."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_agent_cli import EXAMPLES
from tests.processes import run_toolmesh
from tests.servers import Served, toolmesh_serve


async def services(served: Served, *args: str) -> tuple[int, str, str]:
    return await run_toolmesh("services", "-u", served.url, *args)


async def listed(served: Served) -> dict[str, Any]:
    """``toolmesh services --json``, once the joke service's announcement is in (the agent
    hears it within a moment of starting)."""
    async with asyncio.timeout(20):
        while True:
            code, out, err = await services(served, "--json")
            assert code == 0, err
            answer = json.loads(out)
            if answer["services"]:
                return answer
            await asyncio.sleep(0.2)


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_announced_joke_service_is_listed_then_configured_too(tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path) as served:
        answer = await listed(served)
        code, table, err = await services(served)
        assert code == 0, err
        for item, file in (("tool-service/joke-service", "joke-service.json"),
                           ("tool/tell-joke", "tell-joke.json")):
            code, _, err = await run_toolmesh("config", "put", item, str(EXAMPLES / file),
                                              "-u", served.url)
            assert code == 0, err
        code, configured, err = await services(served)
        assert code == 0, err
    (joke,) = answer["services"]
    assert (joke["id"], joke["configured"], joke["announced"], joke["live"]) == (
        "joke-service", False, True, 1)
    # the serving process runs the joke service: its host; a pid that is not ours
    (instance,) = joke["instances"]
    assert instance["host"] == socket.gethostname() and instance["pid"] != os.getpid()
    assert joke["tools"] == [{"key": "tell-joke", "name": "tell-joke", "source": "announced",
                              "status": "offered"}]

    header, service, tool = table.splitlines()
    assert header.split() == ["SERVICE", "/", "TOOL", "SOURCE", "LIVE", "STATUS", "INSTANCES",
                              "/", "REASON"]
    assert service.split()[:4] == ["joke-service", "announced", "1", "live"]
    assert f"{instance['instance']} ({instance['host']} pid {instance['pid']}), last " \
           "heartbeat " in service and service.endswith(" ago")
    assert tool.split() == ["tell-joke", "announced", "offered"] and tool.startswith("  ")

    lines = configured.splitlines()
    assert lines[1].split()[:4] == ["joke-service", "configured+announced", "1", "live"]
    assert [line.split()[:3] for line in lines[2:]] == [
        ["tell-joke", "configured", "offered"], ["tell-joke", "announced", "overridden"]]
    assert lines[3].endswith("the configured item tool/tell-joke overrides it")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_with_nothing_to_list_it_says_how_to_add_a_service(tmp_path: Path) -> None:
    # an agent that does not listen to announcements, and no config: no services at all
    async with toolmesh_serve(tmp_path, "--no-announcements") as served:
        code, out, err = await services(served)
        json_code, json_out, _ = await services(served, "--json")
    assert (code, out) == (0, "")
    assert "no tool services in workspace 'default'" in err
    assert "toolmesh run MODULE:CLASS" in err and "toolmesh tool-service register" in err
    assert json_code == 0
    assert json.loads(json_out)["services"] == []
    assert json.loads(json_out)["accepts-announcements"] is False


async def test_an_unreachable_gateway_is_one_line_of_error() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out, err = await run_toolmesh("services", "-u", f"http://127.0.0.1:{port}/")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and err.startswith("toolmesh: error: cannot reach the gateway")
