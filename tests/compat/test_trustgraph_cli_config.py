"""trustgraph-cli's own config commands against a running `toolmesh serve`.

trustgraph-cli exits 0 even when it fails (it prints ``Exception: ...`` to stdout), so these
tests judge it by what it prints and by what the gateway then holds.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.config.test_config_service import JOKE_SERVICE, TELL_JOKE
from tests.forkserver import spawn_script
from tests.processes import run_toolmesh
from tests.servers import Served, toolmesh_serve


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with toolmesh_serve(tmp_path) as s:
        yield s


async def tg(bin: Path, command: str, *args: str, stdin: str | None = None) -> str:
    proc = await spawn_script(
        bin / command, *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
    text = out.decode()
    assert "Exception" not in text, text + err.decode()
    assert proc.returncode == 0, err.decode()
    return text


async def test_the_real_config_commands_work_against_toolmesh(tg_bin: Path, served: Served) -> None:
    u = ["-u", served.url]
    out = await tg(tg_bin, "tg-put-config-item", "--type", "tool-service", "--key", "joke-service",
                   "--stdin", *u, stdin=JOKE_SERVICE)
    assert out.strip() == "Configuration item set: tool-service/joke-service"
    out = await tg(tg_bin, "tg-put-config-item", "--type", "tool", "--key", "tell-joke",
                   "--value", TELL_JOKE, *u)
    assert out.strip() == "Configuration item set: tool/tell-joke"

    out = await tg(tg_bin, "tg-get-config-item", "--type", "tool", "--key", "tell-joke", *u)
    assert json.loads(out) == json.loads(TELL_JOKE)
    out = await tg(tg_bin, "tg-get-config-item", "--type", "tool", "--key", "tell-joke",
                   "--format", "json", *u)
    assert json.loads(json.loads(out)) == json.loads(TELL_JOKE)

    out = await tg(tg_bin, "tg-list-config-items", "--type", "tool-service", *u)
    assert out.split() == ["joke-service"]
    out = await tg(tg_bin, "tg-list-config-items", "--type", "tool", "--format", "json", *u)
    assert json.loads(out) == ["tell-joke"]

    out = await tg(tg_bin, "tg-show-config", *u)
    first, rest = out.split("\n", 1)
    assert first == "Version: 2"
    assert json.loads(rest) == {"tool-service": {"joke-service": JOKE_SERVICE},
                                "tool": {"tell-joke": TELL_JOKE}}

    out = await tg(tg_bin, "tg-delete-config-item", "--type", "tool", "--key", "tell-joke", *u)
    assert out.strip() == "Configuration item deleted: tool/tell-joke"
    # what the real client changed is what toolmesh's own CLI now sees
    code, listed, _ = await run_toolmesh("config", "list", "tool", "--url", served.url)
    assert code == 0 and listed.split() == []
    # deleting it again: the real client still succeeds as it always has, and the delete,
    # which changes nothing, makes no version
    out = await tg(tg_bin, "tg-delete-config-item", "--type", "tool", "--key", "tell-joke", *u)
    assert out.strip() == "Configuration item deleted: tool/tell-joke"
    out = await tg(tg_bin, "tg-show-config", *u)
    assert out.split("\n", 1)[0] == "Version: 3"


async def test_the_real_client_sees_toolmesh_errors(tg_bin: Path, served: Served) -> None:
    proc = await spawn_script(
        tg_bin / "tg-put-config-item", "--type", "tool", "--key", "bad", "--value", "{}",
        "-u", served.url, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    assert "Exception: config-error: invalid field 'type' of tool/bad: is required" in out.decode()


async def test_the_real_client_with_a_token(tg_bin: Path, tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, "--token", "tok") as served:
        out = await tg(tg_bin, "tg-show-config", "-u", served.url, "-t", "tok")
        assert out.startswith("Version: 0")
        proc = await spawn_script(
            tg_bin / "tg-show-config", "-u", served.url, stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        assert "Exception: Status code 401" in out.decode()


async def test_tg_show_flows_lists_the_default_flow_and_the_configured_ones(
        tg_bin: Path, served: Served) -> None:
    u = ["-u", served.url]
    out = await tg(tg_bin, "tg-put-config-item", "--type", "flow", "--key", "research",
                   "--value", json.dumps({"description": "the research agent"}), *u)
    assert out.strip() == "Configuration item set: flow/research"
    out = await tg(tg_bin, "tg-show-flows", *u)
    ids = [line.split("|")[2].strip() for line in out.splitlines()
           if line.startswith("| id ")]
    assert ids == ["default", "research"], out
    assert "the research agent" in out and "the default flow" in out
