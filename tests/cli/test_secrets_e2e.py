"""Secrets are write-only through the API: every read path shows ``***``, a read-modify-write
keeps them, they are encrypted at rest with TOOLMESH_SECRET_KEY, and no log line carries one
— against a real ``toolmesh serve``, a token-checking MCP server and the CLIs."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from cryptography.fernet import Fernet

from tests.cli.test_config_cli import script
from tests.mcp.servers import ServerProcess, child_env, running_server, stdio_item
from tests.processes import run_toolmesh
from tests.servers import Served, toolmesh_serve

GATEWAY_TOKEN = "gw-TOKEN-7f3a9c"
MCP_TOKEN = "mcp-TOKEN-51be02"
QUERY_KEY = "query-KEY-c0ffee"
URL_PASSWORD = "url-PASSWORD-d00d"
ENV_SECRET = "env-SECRET-beef42"
SECRETS = (GATEWAY_TOKEN, MCP_TOKEN, QUERY_KEY, URL_PASSWORD, ENV_SECRET)


@dataclass
class Setup:
    served: Served
    mcp: ServerProcess

    @property
    def u(self) -> list[str]:
        return ["-u", self.served.url, "-t", GATEWAY_TOKEN]


def assert_no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{where} shows {secret}"


async def toolmesh(*args: str, stdin_text: str | None = None) -> str:
    code, out, err = await run_toolmesh(*args, stdin_text=stdin_text,
                                        extra_env={"TOOLMESH_TOKEN": GATEWAY_TOKEN})
    assert code == 0, err
    assert_no_secret(out + err, f"toolmesh {' '.join(args)}")
    return out


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    env = {"TOOLMESH_GATEWAY_TOKEN": GATEWAY_TOKEN,
           "TOOLMESH_SECRET_KEY": Fernet.generate_key().decode()}
    async with running_server("streamable-http", name="guarded", token=MCP_TOKEN) as mcp, \
            toolmesh_serve(tmp_path, "--log-level", "DEBUG", "--mcp-stdio-allow", sys.executable,
                           extra_env=env) as served:
        s = Setup(served, mcp)
        await toolmesh("mcp", "set", "w", "--url", f"{mcp.url}?api_key={QUERY_KEY}",
                       "-r", "echo", "--auth-token", MCP_TOKEN, "-u", served.url)
        await toolmesh("mcp", "set", "u", "--url",
                       f"http://bob:{URL_PASSWORD}@127.0.0.1:9/mcp", "-u", served.url)
        stdio = {**stdio_item("stdio-guarded"), "remote-name": "hello",
                 "env": {**child_env(), "SOME_API_KEY": ENV_SECRET}}
        await toolmesh("config", "put", "mcp/s", "-u", served.url, stdin_text=json.dumps(stdio))
        yield s
    # every line logged at DEBUG over the whole test, the store's files, nothing shows one
    assert_no_secret("".join(served.log), "the DEBUG log")
    raw = "\n".join(v for (v,) in sqlite3.connect(tmp_path / "config.db").execute(
        "SELECT value FROM toolmesh_config"))
    assert "enc:v1:" in raw
    assert_no_secret(raw, "the raw SQLite store")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_every_read_path_masks_secrets(setup: Setup) -> None:
    url = setup.served.url
    auth = {"Authorization": f"Bearer {GATEWAY_TOKEN}"}
    async with aiohttp.ClientSession(headers=auth) as http:
        bodies = []
        for request in ({"operation": "config"}, {"operation": "getvalues", "type": "mcp"},
                        {"operation": "get", "keys": [{"type": "mcp", "key": k}
                                                      for k in ("w", "u", "s")]}):
            async with http.post(url + "api/v1/config", json=request) as r:
                bodies.append(await r.text())
        async with http.ws_connect(url + "api/v1/socket") as ws:
            for n, request in enumerate(({"operation": "config"},
                                         {"operation": "getvalues", "type": "mcp"})):
                await ws.send_json({"id": str(n), "service": "config", "request": request})
                bodies.append(json.dumps(await ws.receive_json(timeout=10)))
    for body in bodies:
        assert_no_secret(body, "a gateway response")
        assert "***" in body
    shown = json.loads(json.loads(bodies[0])["config"]["mcp"]["w"])
    assert shown["auth-token"] == "***" and shown["url"].endswith("?api_key=***")

    outputs = [await toolmesh("config", "show", *setup.u),
               await toolmesh("config", "get", "mcp/w", *setup.u),
               await toolmesh("config", "get", "mcp/s", *setup.u),
               await toolmesh("mcp", "show", *setup.u)]
    for name, args in (("tg-show-config", ()), ("tg-get-config-item", ("mcp/w",)),
                       ("tg-get-config-item", ("--type", "mcp", "--key", "u")),
                       ("tg-show-mcp-tools", ())):
        code, out, err = await script(name, *args, *setup.u)
        assert code == 0, err
        outputs.append(out)
    for out in outputs:
        assert_no_secret(out, "a CLI")
        assert "***" in out


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_read_then_put_back_keeps_the_secrets_working(setup: Setup) -> None:
    # the token-checking server refuses calls without the token: proof it is still sent
    assert (await toolmesh("mcp", "invoke", "w", "-P", '{"text": "before"}', *setup.u)).strip() \
        == "before"
    for key in ("w", "s"):
        value = await toolmesh("config", "get", f"mcp/{key}", *setup.u)
        await toolmesh("config", "put", f"mcp/{key}", *setup.u, stdin_text=value)
    # an edit of a field beside the secrets (read, change, write) keeps them too
    edited = json.loads(await toolmesh("config", "get", "mcp/w", *setup.u))
    edited["remote-name"] = "echo"
    edited["note"] = "edited"
    await toolmesh("config", "put", "mcp/w", *setup.u, stdin_text=json.dumps(edited))
    assert (await toolmesh("mcp", "invoke", "w", "-P", '{"text": "after"}', *setup.u)).strip() \
        == "after"
    # the stdio server only starts with its env (PYTHONPATH is in it, masked like the rest)
    assert (await toolmesh("mcp", "invoke", "s", *setup.u)).strip() == "hello from stdio-guarded"

    # pointing the stored token at another server is refused
    moved = {**edited, "url": "http://127.0.0.1:9/mcp"}
    code, _, err = await run_toolmesh("config", "put", "mcp/w", *setup.u,
                                      stdin_text=json.dumps(moved))
    assert code == 1 and "give the secret itself" in err


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_malformed_request_is_logged_as_one_line_without_its_headers(
        setup: Setup) -> None:
    host, port = setup.served.url.split("//")[1].strip("/").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET /api/v1/health?token={GATEWAY_TOKEN} HTTP/1.1\r\nHost: x\r\n"
                 f"Authorization: Bearer {GATEWAY_TOKEN}\x01\r\n\r\n".encode())
    await writer.drain()
    assert (await reader.read(100)).startswith(b"HTTP/1.")
    writer.close()
    await toolmesh("config", "list", "mcp", *setup.u)  # a request after: the log has caught up
    lines = [line for line in setup.served.log if "malformed HTTP request" in line]
    assert len(lines) == 1 and "WARNING" in lines[0] and "Invalid header value char" in lines[0]
    assert not any("Traceback" in line for line in setup.served.log)
