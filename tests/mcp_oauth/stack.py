"""A whole deployment for the sign-in tests: the authorization server (oidc-provider), an MCP
server it protects, and a real ``toolmesh serve`` with a gateway token, scoped tokens for two
people, and items that sign in with OAuth."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from tests.forkserver import spawn
from tests.mcp_oauth.protected_server import ProtectedServer
from tests.processes import env, run_toolmesh
from tests.servers import Served

ADMIN = "admin-token-for-the-oauth-tests-7Kq2"
#: no token from the test runner's environment may reach the CLI
CLEAN_ENV = {"TOOLMESH_TOKEN": "", "TRUSTGRAPH_TOKEN": "", "TOOLMESH_GATEWAY_TOKEN": ""}


@dataclass
class Person:
    """A toolmesh identity: a scoped token of workspace ``default``."""

    name: str
    token: str


async def cli(served: Served, *args: str, token: str | None = ADMIN,
              timeout: float = 60) -> tuple[int, str, str]:
    """Our CLI against ``served`` with ``token``."""
    return await run_toolmesh(*args, "-u", served.url, *(["-t", token] if token else []),
                              extra_env=CLEAN_ENV, timeout=timeout)


async def person(served: Served, name: str) -> Person:
    """A person who may hold dialogs, call tools and answer their dialogs' questions."""
    code, out, err = await cli(served, "token", "create", "-w", "default", "-c", "agent",
                               "-c", "tools:invoke", "-c", "approve", "--name", name)
    assert code == 0, err
    return Person(name, out.strip())


async def post(served: Served, path: str, body: dict[str, Any], token: str | None = ADMIN
               ) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as http, \
            http.post(served.url + path, json=body, headers=headers) as r:
        return r.status, await r.json()


async def put_items(served: Served, items: dict[str, Any]) -> None:
    """Put ``{"mcp/ID": value, "tool/ID": value}`` items as the admin."""
    values = [{"type": k.split("/")[0], "key": k.split("/")[1], "value": json.dumps(v)}
              for k, v in items.items()]
    status, body = await post(served, "api/v1/config", {"operation": "put", "values": values})
    assert status == 200 and not body.get("error"), body


def oauth_item(server: ProtectedServer, tool: str, **auth: Any) -> dict[str, Any]:
    return {"url": server.url, "remote-name": tool,
            "auth": {"type": "oauth", "per": "user", **auth}}


async def mcp_tool(served: Served, operation: dict[str, Any], token: str | None = ADMIN
                   ) -> tuple[int, dict[str, Any]]:
    return await post(served, "api/v1/flow/default/service/mcp-tool", operation, token)


def decoded(body: dict[str, Any]) -> Any:
    value = body.get("object")
    return json.loads(value) if isinstance(value, str) else value


class LoginCommand:
    """``toolmesh mcp login ITEM --no-browser`` running: its link, then its end."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.out: list[str] = []

    async def link(self) -> str:
        assert self.proc.stdout is not None
        async with asyncio.timeout(30):
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    err = await self.proc.stderr.read() if self.proc.stderr else b""
                    raise AssertionError("login ended without a link: " + "".join(self.out)
                                         + err.decode())
                self.out.append(raw.decode())
                if (m := re.match(r"\s+(https?://\S+)", self.out[-1])):
                    return m.group(1)

    async def end(self) -> tuple[int, str, str]:
        out, err = await asyncio.wait_for(self.proc.communicate(), 30)
        assert self.proc.returncode is not None
        return self.proc.returncode, "".join(self.out) + out.decode(), err.decode()


@asynccontextmanager
async def login_command(served: Served, item: str, *extra: str,
                        token: str | None = ADMIN) -> AsyncIterator[LoginCommand]:
    proc = await spawn(
        "toolmesh.cli.main", "mcp", "login", item, "--no-browser",
        *extra, "-u", served.url, *(["-t", token] if token else []),
        env={**env(), **CLEAN_ENV}, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        yield LoginCommand(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def data(tmp: Path) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    return tmp


class Dialog:
    """A dialog over the gateway's WebSocket as ``token``'s person: its frames as they come."""

    def __init__(self, served: Served, token: str, question: str) -> None:
        self.frames: list[dict[str, Any]] = []
        self._asked = asyncio.Event()
        self._served, self._token, self._question = served, token, question
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> str:
        async with aiohttp.ClientSession() as http, \
                http.ws_connect(self._served.url + "api/v1/socket") as ws:
            await ws.send_json({"type": "auth", "token": self._token})
            assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
            await ws.send_json({"id": "d", "service": "agent", "flow": "default",
                                "request": {"question": self._question, "streaming": True}})
            while True:
                frame = await ws.receive_json(timeout=120)
                response = frame.get("response") or {}
                self.frames.append(frame)
                if response.get("message_type") == "elicitation-request":
                    self._asked.set()
                if frame.get("error"):
                    raise AssertionError(f"the dialog failed: {frame}")
                if response.get("end_of_dialog") or frame.get("complete"):
                    return str(response.get("content") or response.get("answer") or "")

    async def question(self) -> dict[str, Any]:
        async with asyncio.timeout(60):
            await asyncio.wait({self.task, asyncio.ensure_future(self._asked.wait())},
                               return_when=asyncio.FIRST_COMPLETED)
        if self.task.done():
            self.task.result()
            raise AssertionError(f"the dialog ended without a question: {self.frames}")
        return next(f["response"]["elicitation"] for f in self.frames
                    if (f.get("response") or {}).get("message_type") == "elicitation-request")

    async def answer(self) -> str:
        async with asyncio.timeout(120):
            return await self.task

    def said(self) -> str:
        """Everything the dialog said, as text."""
        return json.dumps(self.frames)
