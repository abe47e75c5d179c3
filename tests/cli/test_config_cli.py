"""`toolmesh config ...` against a real `toolmesh serve` process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.config.test_config_service import JOKE_SERVICE, TELL_JOKE
from tests.processes import run_toolmesh
from tests.servers import Served, toolmesh_serve


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with toolmesh_serve(tmp_path) as s:
        yield s


async def test_put_get_list_show_delete(served: Served, tmp_path: Path) -> None:
    (tmp_path / "joke-service.json").write_text(JOKE_SERVICE)
    (tmp_path / "tell-joke.json").write_text(TELL_JOKE)
    u = ["--url", served.url]
    code, out, err = await run_toolmesh("config", "put", "tool-service/joke-service",
                                        str(tmp_path / "joke-service.json"), *u)
    assert code == 0, err
    assert "stored tool-service/joke-service (version 1)" in err
    assert (await run_toolmesh("config", "put", "tool/tell-joke", str(tmp_path / "tell-joke.json"), *u))[0] == 0
    code, out, _ = await run_toolmesh("config", "get", "tool/tell-joke", *u)
    assert code == 0 and json.loads(out) == json.loads(TELL_JOKE)
    code, out, _ = await run_toolmesh("config", "list", "tool", *u)
    assert out.split() == ["tell-joke"]
    code, out, _ = await run_toolmesh("config", "show", *u)
    shown = json.loads(out)
    assert shown["version"] == 2
    assert shown["config"]["tool"]["tell-joke"]["service"] == "joke-service"
    code, _, err = await run_toolmesh("config", "delete", "tool/tell-joke", *u)
    assert code == 0 and "version 3" in err
    code, out, err = await run_toolmesh("config", "get", "tool/tell-joke", *u)
    assert code == 1 and "no config item tool/tell-joke" in err


async def test_failures_exit_non_zero_with_one_line(served: Served, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"type": "tool-service", "name": "x"}')
    cases = [
        (["config", "put", "tool/bad", str(tmp_path / "bad.json"), "--url", served.url],
         "config-error: invalid field 'description' of tool/bad: is required"),
        (["config", "list", "tool", "--url", "http://127.0.0.1:9/"], "cannot reach the gateway"),
        (["config", "get", "no-slash", "--url", served.url], "is not TYPE/KEY"),
        (["config", "put", "tool/x", str(tmp_path / "missing.json"), "--url", served.url],
         "cannot read"),
    ]
    for args, complaint in cases:
        code, out, err = await run_toolmesh(*args)
        assert code == 1, args
        assert complaint in err, (args, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


async def test_a_token_is_required_when_the_gateway_has_one(tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, "--token", "tok") as served:
        code, _, err = await run_toolmesh("config", "list", "tool", "--url", served.url)
        assert code == 1 and "401" in err and "needs a token" in err
        code, _, err = await run_toolmesh("config", "list", "tool", "--url", served.url,
                                          "--token", "tok")
        assert code == 0, err


async def test_config_survives_a_restart(tmp_path: Path) -> None:
    (tmp_path / "v.json").write_text(JOKE_SERVICE)
    async with toolmesh_serve(tmp_path) as served:
        assert (await run_toolmesh("config", "put", "tool-service/joke-service",
                                   str(tmp_path / "v.json"), "--url", served.url))[0] == 0
    async with toolmesh_serve(tmp_path) as served:
        code, out, _ = await run_toolmesh("config", "get", "tool-service/joke-service",
                                          "--url", served.url)
        assert code == 0 and json.loads(out)["id"] == "joke-service"
