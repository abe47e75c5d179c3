"""Approval is a property of the call, not of the route: a real `toolmesh serve` with a tool
service (the mailer, which records every attempt) and a real MCP server (which records every
removal), both behind policies that ask a person, walked route by route with a token that
may call tools and may not approve. Nothing runs; a token that may approve runs one exact
call by saying yes to its digest."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.dialogs.test_embedded_restart import SERVICES
from tests.gateway.test_approvals_route import Mailer, offered
from tests.gateway.test_scoped_tokens import ADMIN, create, post
from tests.mcp.servers import ServerProcess, running_server
from tests.mcp_endpoint.test_mcp_approval import Person, session
from tests.processes import run_toolmesh
from tests.servers import Served, toolmesh_serve
from toolmesh.bus.memory import MemoryBus
from toolmesh.gateway import Gateway
from toolmesh.gateway.call_approval import ROUTES, THROUGH_THE_AGENT

#: the gateway's routes that run no tool at all
RUN_NO_TOOL = {"config", "agent-tools", "agent-services", "dialogs", "approvals", "prompt",
               "text-completion", "flow", "librarian", "token", "iam"}


@dataclass
class Deployment:
    served: Served
    mailer: Mailer
    mcp: ServerProcess
    invoker: str  # tools:invoke and agent, no approve
    approver: str  # tools:invoke and approve

    async def removed(self) -> list[str]:
        """The paths the MCP server removed (its ``stats``, read through the admin)."""
        status, body = await post(self.served, "api/v1/flow/default/service/mcp-tool",
                                  {"name": "stats", "parameters": {}}, ADMIN)
        assert status == 200 and not body.get("error"), body
        return list(json.loads(body["text"]).get("removed", []))

    def side_effects(self) -> int:
        return len(self.mailer.attempts())


async def put(served: Served, type: str, key: str, value: dict[str, Any]) -> None:
    status, body = await post(served, "api/v1/config", {"operation": "put", "values": [
        {"type": type, "key": key, "value": json.dumps(value)}]}, ADMIN)
    assert status == 200, body


@asynccontextmanager
async def deployment(tmp_path: Path) -> AsyncIterator[Deployment]:
    mail = tmp_path / "mail"
    mail.mkdir()
    env = {"MAILER_DIR": str(mail), "TOOLMESH_GATEWAY_TOKEN": ADMIN}
    async with running_server("streamable-http", name="files") as mcp, \
            toolmesh_serve(tmp_path, "--tool-service", "mailer:Mailer", extra_env=env,
                           cwd=SERVICES) as served:
        # the mailer announces `send` (no policy); this item asks before each mail
        await put(served, "tool", "send-now", {
            "type": "tool-service", "service": "mailer", "name": "send-now",
            "description": "send a mail at once", "approval": "always",
            "arguments": [{"name": "to", "type": "string", "description": "whom to"}]})
        # one MCP item asks by its own policy, one by its server's annotations
        await put(served, "mcp", "rm-always", {"url": mcp.url, "remote-name": "remove",
                                               "approval": "always"})
        await put(served, "mcp", "rm-marked", {"url": mcp.url, "remote-name": "remove"})
        await put(served, "mcp", "look", {"url": mcp.url, "remote-name": "look"})
        await put(served, "mcp", "stats", {"url": mcp.url, "remote-name": "stats"})
        await put(served, "tool", "remove", {
            "type": "mcp-tool", "mcp-tool": "rm-always", "name": "remove",
            "description": "remove a file",
            "arguments": [{"name": "path", "type": "string", "description": "which"}]})
        await offered(served, "send-now", ADMIN)
        invoker = await create(served, "-w", "default", "-c", "tools:invoke,agent")
        approver = await create(served, "-w", "default", "-c", "tools:invoke,approve")
        yield Deployment(served, Mailer(mail), mcp, invoker, approver)


MAIL = {"id": "mailer", "arguments": {"to": "bob"}}
REMOVALS = [{"name": "rm-always", "parameters": {"path": "/a"}},
            {"name": "rm-marked", "parameters": {"path": "/b"}}]


async def socket_call(served: Served, token: str, service: str,
                      request: dict[str, Any]) -> dict[str, Any]:
    """The final frame of one request on the gateway's WebSocket."""
    async with aiohttp.ClientSession() as http, \
            http.ws_connect(served.url + "api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": token})
        assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
        await ws.send_json({"id": "1", "service": service, "flow": "default",
                            "request": request})
        while True:
            frame = await ws.receive_json(timeout=30)
            if frame.get("complete") or frame.get("error"):
                return frame  # type: ignore[no-any-return]


def refused_for_approval(error: Any) -> bool:
    return isinstance(error, dict) and error.get("type") == "approval-required" \
        and "waits for a person's approval" in error.get("message", "")


async def rest_tool_service(d: Deployment) -> None:
    status, body = await post(d.served, "api/v1/flow/default/service/tool-service", MAIL,
                              d.invoker)
    assert status == 403 and refused_for_approval(body["error"]), body
    assert "tool/send-now says \"approval\": \"always\"" in body["error"]["message"]


async def socket_tool_service(d: Deployment) -> None:
    frame = await socket_call(d.served, d.invoker, "tool-service", MAIL)
    assert refused_for_approval(frame.get("error")), frame


async def rest_mcp_tool(d: Deployment) -> None:
    for request in REMOVALS:
        status, body = await post(d.served, "api/v1/flow/default/service/mcp-tool", request,
                                  d.invoker)
        assert status == 403 and refused_for_approval(body["error"]), body


async def socket_mcp_tool(d: Deployment) -> None:
    for request in REMOVALS:
        frame = await socket_call(d.served, d.invoker, "mcp-tool", request)
        assert refused_for_approval(frame.get("error")), frame


async def dialog(d: Deployment) -> None:
    """The agent pauses the dialog for a person; closing the socket ends it unanswered."""
    async with aiohttp.ClientSession() as http, \
            http.ws_connect(d.served.url + "api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": d.invoker})
        assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
        for question in ('use send-now with {"to": "bob"}', 'use remove with {"path": "/c"}'):
            await ws.send_json({"id": question, "service": "agent", "flow": "default",
                                "request": {"question": question, "streaming": True}})
            while True:
                frame = await ws.receive_json(timeout=30)
                response = frame.get("response") or {}
                assert not frame.get("complete"), frame  # it must wait, not end
                if response.get("message_type") == "approval-request":
                    break


async def mcp_endpoint(d: Deployment) -> None:
    """An MCP client whose token may not approve is never asked and runs nothing."""
    mute = Person()
    async with session(d.served.url + "mcp", mute, d.invoker) as client:
        for tool, arguments in (("send-now", {"to": "bob"}), ("remove", {"path": "/d"})):
            result = await client.call_tool(tool, arguments)
            assert result.is_error and "waits for a person's approval" in result.content[0].text
    assert mute.asked == []


async def command_lines(d: Deployment) -> None:
    """The CLI's faces of the direct routes say why, in one line, and run nothing."""
    u = ["-u", d.served.url, "-t", d.invoker]
    for args in (("tool-service", "invoke", "mailer", "-a", '{"to": "bob"}', *u),
                 ("tool-service", "invoke", "mailer", "-a", '{"to": "bob"}', "--stream", *u),
                 ("mcp", "invoke", "rm-always", "-P", '{"path": "/f"}', *u)):
        code, out, err = await run_toolmesh(*args)
        assert code == 1 and "waits for a person's approval" in err, (args, out, err)
        assert "Traceback" not in err, err


#: every way to run a tool, and how each is tried (the route names of call_approval plus the
#: faces that go through the agent)
PROBES: dict[str, Callable[[Deployment], Awaitable[None]]] = {
    "tool-service": rest_tool_service, "tool-service (socket)": socket_tool_service,
    "mcp-tool": rest_mcp_tool, "mcp-tool (socket)": socket_mcp_tool,
    "agent": dialog, "/mcp": mcp_endpoint, "tool-service (command line)": command_lines,
}


def test_every_route_that_runs_tools_is_walked() -> None:
    """A route added to the gateway must be classified here: it runs tools (and is then
    walked by the test below) or it runs none."""
    gateway = Gateway(MemoryBus())
    names = set(gateway.endpoints)
    assert names == set(ROUTES) | THROUGH_THE_AGENT | RUN_NO_TOOL, (
        "classify the new route: does it run a tool?", names ^ (set(ROUTES) | THROUGH_THE_AGENT
                                                               | RUN_NO_TOOL))
    walked = {name.split(" (")[0] for name in PROBES}
    assert walked == set(ROUTES) | THROUGH_THE_AGENT | {"/mcp"}


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_no_route_runs_a_call_that_waits_for_a_person(tmp_path: Path) -> None:
    async with deployment(tmp_path) as d:
        for name, probe in PROBES.items():
            await probe(d)
            assert d.side_effects() == 0, name
            assert await d.removed() == [], name
        # calls no policy gates still run on the direct routes, for the same token
        status, body = await post(d.served, "api/v1/flow/default/service/mcp-tool",
                                  {"name": "look", "parameters": {"path": "/e"}}, d.invoker)
        assert (status, body.get("text")) == (200, "/e looks fine"), body
        status, body = await post(d.served, "api/v1/flow/default/service/tool-service", {
            "id": "joke-service", "arguments": {"topic": "cats"}}, d.invoker)
        assert status == 200 and "error" not in body, body


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_token_that_may_approve_says_yes_to_one_exact_call(tmp_path: Path) -> None:
    async with deployment(tmp_path) as d:
        route = "api/v1/flow/default/service/tool-service"
        status, body = await post(d.served, route, MAIL, d.approver)
        assert status == 403 and refused_for_approval(body["error"]), body
        digest = body["error"]["message"].split('"approved": "')[1].split('"')[0]
        assert digest.startswith("sha256:")
        # the digest binds the arguments: another recipient is another call
        status, body = await post(d.served, route, {**MAIL, "arguments": {"to": "eve"},
                                                    "approved": digest}, d.approver)
        assert status == 403 and "not the digest of this call" in body["error"]["message"]
        # a token that may not approve cannot say yes, even with the right digest
        status, body = await post(d.served, route, {**MAIL, "approved": digest}, d.invoker)
        assert status == 403 and refused_for_approval(body["error"]), body
        assert d.side_effects() == 0
        status, body = await post(d.served, route, {**MAIL, "approved": digest}, d.approver)
        assert (status, body.get("response")) == (200, "sent to bob"), body
        assert d.side_effects() == 1
        # the same for an MCP item, over the WebSocket
        frame = await socket_call(d.served, d.approver, "mcp-tool", REMOVALS[1])
        message = frame["error"]["message"]
        assert "destructiveHint" in message, frame
        digest = message.split('"approved": "')[1].split('"')[0]
        frame = await socket_call(d.served, d.approver, "mcp-tool",
                                  {**REMOVALS[1], "approved": digest})
        assert frame["response"].get("text") == "removed /b", frame
        assert await d.removed() == ["/b"]
        # and from the command line, with the digest its refusal names
        u = ["-u", d.served.url, "-t", d.approver]
        code, out, err = await run_toolmesh("mcp", "invoke", "rm-always", "-P", '{"path": "/a"}',
                                            *u)
        assert code == 1 and "--approved sha256:" in err, err
        digest = err.split("--approved ")[1].split()[0].rstrip(");")
        code, out, err = await run_toolmesh("mcp", "invoke", "rm-always", "-P", '{"path": "/a"}',
                                            "--approved", digest, *u)
        assert (code, out.strip()) == (0, "removed /a"), err
        assert await d.removed() == ["/b", "/a"]
