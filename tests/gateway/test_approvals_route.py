"""Answering calls that wait for a person through the gateway: a real `toolmesh serve` (the
offline demo model, the mailer tool service that counts its attempts, `--approval always`,
an admin token), its WebSocket and its REST route ``/api/v1/flow/default/service/approvals``
with scoped tokens."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.dialogs.test_embedded_restart import SERVICES
from tests.gateway.test_scoped_tokens import ADMIN, create, post
from tests.processes import run_toolmesh
from tests.servers import Served, toolmesh_serve

ROUTE = "api/v1/flow/default/service/approvals"


class Mailer:
    """What the mailer tool service did: one line per attempt, one file per mail."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def attempts(self, dialog: str | None = None) -> list[str]:
        """The call keys it was called with (of ``dialog`` only, when given)."""
        log = self.folder / "attempts.log"
        keys = log.read_text().split() if log.exists() else []
        return [k for k in keys if dialog is None or k.startswith(dialog + "/")]

    def sent(self) -> list[str]:
        sent = self.folder / "sent"
        return sorted(p.read_text() for p in sent.iterdir()) if sent.exists() else []


@asynccontextmanager
async def approving_serve(tmp_path: Path, *, token: str | None = None,
                          ) -> AsyncIterator[tuple[Served, Mailer]]:
    """`toolmesh serve` whose every tool call waits for a person (``token``: its admin
    token), with the mailer's ``send`` offered; and what the mailer did."""
    mail = tmp_path / "mail"
    mail.mkdir()
    env = {"MAILER_DIR": str(mail), "TOOLMESH_GATEWAY_TOKEN": token or ""}
    async with toolmesh_serve(tmp_path, "--tool-service", "mailer:Mailer", "--approval",
                              "always", extra_env=env, cwd=SERVICES) as served:
        await offered(served, "send", token)
        yield served, Mailer(mail)


async def offered(served: Served, tool: str, token: str | None) -> None:
    """Wait until the agent offers ``tool`` (the service announces itself once started)."""
    async with asyncio.timeout(20):
        while True:
            code, out, err = await run_toolmesh(
                "tools", "--json", "-u", served.url, *(["-t", token] if token else []))
            assert code == 0, err
            if any(t.get("name") == tool and t.get("status") == "available"
                   for t in json.loads(out)["tools"]):
                return
            await asyncio.sleep(0.1)


def ask(recipient: str) -> str:
    """A question the offline demo model answers by calling ``send``."""
    return f'use send with {{"to": "{recipient}"}}'


class Socket:
    """A dialog asked over the gateway's WebSocket, whose frames are read by id."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []

    async def ask(self, question: str) -> None:
        await self.ws.send_json({"id": "q1", "service": "agent", "flow": "default",
                                 "request": {"question": question, "streaming": True}})

    async def next(self, id: str) -> dict[str, Any]:
        """The next frame of ``id`` (the frames of other ids are kept)."""
        async with asyncio.timeout(30):
            while True:
                frame = await self.ws.receive_json()
                self.frames.append(frame)
                if frame.get("id") == id:
                    return frame  # type: ignore[no-any-return]

    async def request(self) -> dict[str, Any]:
        """The dialog's approval request, once it comes."""
        while True:
            response = (await self.next("q1")).get("response") or {}
            assert "error" not in response, response
            if response.get("message_type") == "approval-request":
                return response["approval"]  # type: ignore[no-any-return]

    async def end(self) -> dict[str, Any]:
        """The dialog's last message."""
        while True:
            frame = await self.next("q1")
            if frame.get("complete"):
                return frame["response"]  # type: ignore[no-any-return]

    async def answer(self, id: str, request: dict[str, Any]) -> dict[str, Any]:
        """Send ``request`` to the approvals service as frame ``id``; its response frame."""
        await self.ws.send_json({"id": id, "service": "approvals", "flow": "default",
                                 "request": request})
        return await self.next(id)


@asynccontextmanager
async def socket(served: Served, token: str) -> AsyncIterator[Socket]:
    async with aiohttp.ClientSession() as http, \
            http.ws_connect(served.url + "api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": token})
        assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
        yield Socket(ws)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Served, Mailer]]:
    async with approving_serve(tmp_path, token=ADMIN) as s:
        yield s


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_approved_on_the_dialogs_own_socket_the_call_runs_once(
        served: tuple[Served, Mailer]) -> None:
    server, mailer = served
    async with socket(server, ADMIN) as s:
        await s.ask(ask("bob"))
        request = await s.request()
        assert (request["tool"], request["arguments"]) == ("send", {"to": "bob"})
        before = mailer.attempts()
        which = {"dialog": request["dialog"], "call": request["call"]}
        stale = await s.answer("a1", {"operation": "approve", **which,
                                      "digest": "sha256:" + "0" * 64})
        approved = await s.answer("a2", {"operation": "approve", **which,
                                         "digest": request["digest"]})
        last = await s.end()
    assert before == []  # nothing ran before a person said so
    assert stale["complete"] and stale["error"]["type"] == "stale"
    assert approved["complete"] and approved["response"]["answer"]["decision"] == "approve"
    assert (last["answer"], last["end_of_dialog"]) == ("sent to bob", True)
    assert mailer.attempts() == [request["call"]] and mailer.sent() == ["to bob"]
    kinds = [f["response"].get("message_type") for f in s.frames if f["id"] == "q1"]
    assert kinds.index("tool-call") < kinds.index("approval-request") < kinds.index("observation")


async def test_rest_lists_and_denies_with_a_reason_for_tokens_that_may(
        served: tuple[Served, Mailer]) -> None:
    server, mailer = served
    agent_only = await create(server, "-w", "default", "-c", "agent")
    elsewhere = await create(server, "-w", "other", "-c", "approve")
    approver = await create(server, "-w", "default", "-c", "approve")
    async with socket(server, ADMIN) as s:
        await s.ask(ask("bob"))
        request = await s.request()
        deny = {"operation": "deny", "dialog": request["dialog"], "call": request["call"],
                "reason": "bob is on holiday"}
        listed = await post(server, ROUTE, {"operation": "list"}, approver)
        refused = {
            "list without approve": await post(server, ROUTE, {"operation": "list"},
                                               agent_only),
            "deny without approve": await post(server, ROUTE, deny, agent_only),
            "deny in another's workspace": await post(server, ROUTE, deny, elsewhere,
                                                      workspace="default"),
            "deny naming it in the body": await post(server, ROUTE,
                                                     {**deny, "workspace": "default"}, elsewhere),
            "no token": await post(server, ROUTE, deny, None)}
        # the other workspace's token, in its own workspace, finds no such call
        not_there = await post(server, ROUTE, deny, elsewhere)
        still = await post(server, ROUTE, {"operation": "list"}, ADMIN, workspace="default")
        denied = await post(server, ROUTE, deny, approver, workspace="default")
        last = await s.end()
        again = await post(server, ROUTE, deny, approver)
    assert listed[0] == 200 and [(a["call"], a["digest"], a["arguments"])
                                 for a in listed[1]["approvals"]] == [
        (request["call"], request["digest"], {"to": "bob"})]
    assert {k: status for k, (status, _) in refused.items()} == {
        "list without approve": 403, "deny without approve": 403,
        "deny in another's workspace": 403, "deny naming it in the body": 403, "no token": 401}
    assert "approve" in refused["list without approve"][1]["error"]["message"]
    assert not_there[1]["error"]["type"] == "not-found"
    assert [a["call"] for a in still[1]["approvals"]] == [request["call"]]  # nothing changed
    assert denied[0] == 200 and denied[1]["answer"]["decision"] == "deny"
    assert denied[1]["answer"]["reason"] == "bob is on holiday"
    assert "denied" in last["answer"] and "bob is on holiday" in last["answer"]
    assert again[1]["error"]["type"] in ("not-found", "answered")
    assert mailer.attempts() == [] and mailer.sent() == []
