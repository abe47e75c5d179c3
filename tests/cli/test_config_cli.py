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


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
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


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
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


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_token_is_required_when_the_gateway_has_one(tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, "--token", "tok") as served:
        code, _, err = await run_toolmesh("config", "list", "tool", "--url", served.url)
        assert code == 1 and "401" in err and "needs a token" in err
        code, _, err = await run_toolmesh("config", "list", "tool", "--url", served.url,
                                          "--token", "tok")
        assert code == 0, err


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_config_survives_a_restart(tmp_path: Path) -> None:
    (tmp_path / "v.json").write_text(JOKE_SERVICE)
    async with toolmesh_serve(tmp_path) as served:
        assert (await run_toolmesh("config", "put", "tool-service/joke-service",
                                   str(tmp_path / "v.json"), "--url", served.url))[0] == 0
    async with toolmesh_serve(tmp_path) as served:
        code, out, _ = await run_toolmesh("config", "get", "tool-service/joke-service",
                                          "--url", served.url)
        assert code == 0 and json.loads(out)["id"] == "joke-service"


async def script(name: str, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """Run one of toolmesh's installed console scripts."""
    import asyncio
    import shutil

    exe = shutil.which(name)
    assert exe, f"{name} is not installed (pip install -e .)"
    proc = await asyncio.create_subprocess_exec(
        exe, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_seed_commands_in_both_forms(served: Served) -> None:
    u = ["-u", served.url]
    # the seed's form
    code, out, err = await script("tg-put-config-item", "tool-service/joke-service", *u,
                                  stdin=JOKE_SERVICE)
    assert (code, out.strip()) == (0, "Configuration item set: tool-service/joke-service"), err
    # TrustGraph's form
    code, out, _ = await script("tg-put-config-item", "--type", "tool", "--key", "tell-joke",
                                "--stdin", *u, stdin=TELL_JOKE)
    assert code == 0
    code, out, _ = await script("tg-put-config-item", "--type", "other", "--key", "k",
                                "--value", "v", *u)
    assert code == 0
    code, out, _ = await script("tg-get-config-item", "--type", "tool-service", "--key",
                                "joke-service", *u)
    assert json.loads(out) == json.loads(JOKE_SERVICE)
    code, out, _ = await script("tg-list-config-items", "--type", "tool", *u)
    assert out.split() == ["tell-joke"]
    code, out, _ = await script("tg-show-config", *u)
    assert out.startswith("Version: 3\n")
    assert json.loads(out.split("\n", 1)[1])["other"] == {"k": "v"}
    code, out, _ = await script("tg-delete-config-item", "--type", "other", "--key", "k", *u)
    assert (code, out.strip()) == (0, "Configuration item deleted: other/k")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_seed_commands_fail_loudly(served: Served) -> None:
    for args, complaint in [
        (["tg-put-config-item", "tool/bad", "-u", served.url], "config-error"),
        (["tg-get-config-item", "--type", "tool", "--key", "nope", "-u", served.url],
         "no config item tool/nope"),
        (["tg-show-config", "-u", "http://127.0.0.1:9/"], "cannot reach the gateway"),
        (["tg-list-config-items", "--type", "tool", "-u", "http://127.0.0.1:9/"],
         "cannot reach the gateway"),
    ]:
        code, out, err = await script(*args, stdin='{"type": "mcp-tool"}')
        assert code == 1, args
        assert complaint in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    code, _, err = await script("tg-put-config-item", "-u", served.url, stdin="x")
    assert code == 2 and "TYPE/KEY or both --type and --key" in err
