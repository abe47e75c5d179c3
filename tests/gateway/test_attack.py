"""The attack that made toolmesh unsafe to run, tried against a real ``toolmesh serve``: a web
page's cross-site requests, a rebound host name, a config item that runs a command."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.mcp.servers import child_env, stdio_item
from tests.processes import run_toolmesh
from tests.servers import Served, toolmesh_serve

EVIL = "http://evil.example"


def pwn_item(marker: Path) -> dict:
    """An mcp item that would create ``marker`` if anything ever ran it."""
    return {"transport": "stdio", "command": "sh", "args": ["-c", f"touch {marker}"]}


def put(item: dict, key: str = "pwn") -> str:
    return json.dumps({"operation": "put",
                       "values": [{"type": "mcp", "key": key, "value": json.dumps(item)}]})


async def config(served: Served) -> dict:
    async with aiohttp.ClientSession() as http, \
            http.post(served.url + "api/v1/config", json={"operation": "config"}) as r:
        return (await r.json())["config"]


async def invoke(served: Served, name: str) -> tuple[int, str]:
    code, _, err = await run_toolmesh("mcp", "invoke", name, "-u", served.url)
    return code, err


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_web_page_cannot_make_serve_run_a_command(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    async with toolmesh_serve(tmp_path) as served, aiohttp.ClientSession() as http:
        port = served.url.rsplit(":", 1)[1].strip("/")
        url = served.url + "api/v1/config"
        attempts = [
            # the reproduced attack: a browser's "simple" cross-site POST
            {"Content-Type": "text/plain", "Origin": EVIL},
            # the same without the Origin a browser adds (curl, a form post)
            {"Content-Type": "text/plain"},
            # a JSON POST from a foreign page (the browser would preflight it)
            {"Content-Type": "application/json", "Origin": EVIL},
            # DNS rebinding: evil.example now resolves to 127.0.0.1, the page is "same-origin"
            {"Content-Type": "application/json", "Host": f"evil.example:{port}",
             "Origin": f"{EVIL}:{port}"},
        ]
        for headers in attempts:
            async with http.post(url, data=put(pwn_item(marker)), headers=headers) as r:
                assert r.status in (403, 415), headers
        for headers in ({"Origin": EVIL}, {"Host": f"evil.example:{port}"}):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(served.url + "api/v1/socket", headers=headers)
            assert refused.value.status == 403

        # a legitimate client may not store it either: running programs is the operator's call
        async with http.post(url, data=put(pwn_item(marker)),
                             headers={"Content-Type": "application/json"}) as r:
            error = (await r.json())["error"]
        assert error["type"] == "config-error"
        assert "mcp/pwn" in error["message"] and "--mcp-stdio-allow sh" in error["message"]

        assert "mcp" not in await config(served)
        code, err = await invoke(served, "pwn")
        assert code == 1 and "no MCP tool 'pwn'" in err
    assert not marker.exists()


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_stdio_servers_run_only_from_the_operators_allow_list(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    # an item already in the store (written before, or by other means) is not run either
    (tmp_path / "store").mkdir()
    db = tmp_path / "store" / "config.db"
    async with toolmesh_serve(tmp_path / "store"):
        pass  # creates the store
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("INSERT INTO toolmesh_config VALUES ('default', 'mcp', 'pwn', ?)",
                     (json.dumps(pwn_item(marker)),))
    python = sys.executable
    async with toolmesh_serve(tmp_path / "store", "--mcp-stdio-allow", f"uvx,{python}") as served:
        code, err = await invoke(served, "pwn")
        assert code == 1
        assert "'sh'" in err and "--mcp-stdio-allow sh" in err and "not allowed" in err
        assert not marker.exists()

        # an allowed command is accepted and runs
        item = {**stdio_item("allowed"), "remote-name": "hello", "env": child_env()}
        code, _, err = await run_toolmesh("config", "put", "mcp/hello", "-u", served.url,
                                          stdin_text=json.dumps(item))
        assert code == 0, err
        code, out, err = await run_toolmesh("mcp", "invoke", "hello", "-u", served.url)
        assert (code, out.strip()) == (0, "hello from allowed"), err

        # and one not on the list is refused on put, naming the item and the option
        code, _, err = await run_toolmesh("config", "put", "mcp/other", "-u", served.url,
                                          stdin_text=json.dumps({**item, "command": "node"}))
        assert code == 1 and "mcp/other" in err and "--mcp-stdio-allow node" in err
    assert not marker.exists()


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
async def test_listening_beyond_loopback_without_a_token_exits_at_once(
        tmp_path: Path, host: str) -> None:
    code, out, err = await asyncio.wait_for(run_toolmesh(
        "serve", "--host", host, "--port", "0", "--config-store", str(tmp_path / "c.db"),
        extra_env={"TOOLMESH_GATEWAY_TOKEN": ""}), 20)
    assert code == 1 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith(f"toolmesh: error: refusing to listen on {host} without a token")
    assert "TOOLMESH_GATEWAY_TOKEN" in line and "--insecure" in line
    assert not (tmp_path / "c.db").exists()  # nothing was started


async def test_a_token_from_a_file_guards_a_non_loopback_gateway(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("file-token-0123456789\n")
    async with toolmesh_serve(tmp_path, "--host", "0.0.0.0", "--token-file",
                              str(token_file)) as served:
        url = served.url.replace("0.0.0.0", "127.0.0.1")
        async with aiohttp.ClientSession() as http:
            async with http.post(url + "api/v1/config", json={"operation": "config"}) as r:
                assert r.status == 401
            async with http.post(url + "api/v1/config", json={"operation": "config"},
                                 headers={"Authorization": "Bearer file-token-0123456789"}) as r:
                assert r.status == 200
    assert not any("process list" in line for line in served.log)


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_token_given_as_a_flag_warns_about_the_process_list(tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, "--token", "flag-token-0123456789") as served:
        pass
    warning = [line for line in served.log if "process list" in line]
    assert warning and "flag-token-0123456789" not in "".join(served.log)
