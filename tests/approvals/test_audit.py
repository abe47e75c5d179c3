"""Who decided: each answer to a call that waited for a person records its approver — the
token's id and name (or ``admin``), and the face it came through (the WebSocket, REST, the
Workbench's and the CLI's hint) — as the gateway stamped it, whatever the client claims.
`toolmesh dialogs show` prints each request and its decision with the approver; each wait and
each answer writes an INFO line (the wait with the command that answers it); /metrics counts
what waits, the decisions by face, and the time they took. An approval given by an MCP
client's person through /mcp is no dialog's: its log line and the metrics record it.

A real `toolmesh serve` (the offline demo model, the mailer tool service, `--approval
always`, an admin token), and scoped tokens named after the people who hold them."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.gateway.test_approvals_route import (
    ROUTE,
    Mailer,
    Socket,
    approving_serve,
    ask,
    socket,
)
from tests.gateway.test_scoped_tokens import ADMIN, create, post
from tests.processes import run_toolmesh
from tests.servers import Served, toolmesh_serve


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Served, Mailer]]:
    async with approving_serve(tmp_path, token=ADMIN) as s:
        yield s


def token_id(token: str) -> str:
    from toolmesh.config.tokens import token_id as parse

    found = parse(token)
    assert found is not None
    return found


async def metrics(server: Served) -> str:
    async with aiohttp.ClientSession() as http, http.get(
            server.url + "metrics", headers={"Authorization": f"Bearer {ADMIN}"}) as r:
        assert r.status == 200
        return await r.text()


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name{labels}`` in a scrape (``None``: not there)."""
    for line in text.splitlines():
        m = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
        if m is None or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if found == labels:
            return float(m.group(3))
    return None


async def shown(server: Served, dialog: str) -> tuple[str, dict[str, Any]]:
    """`toolmesh dialogs show` of ``dialog``: its text, and its JSON."""
    code, text, err = await run_toolmesh("dialogs", "show", dialog, "-u", server.url,
                                         "-t", ADMIN, extra_env={"TZ": "UTC"})
    assert code == 0, err
    code, raw, err = await run_toolmesh("dialogs", "show", dialog, "--json", "-u",
                                        server.url, "-t", ADMIN)
    assert code == 0, err
    return text, json.loads(raw)["dialog"]


def answer_entry(dialog: dict[str, Any]) -> dict[str, Any]:
    [answer] = [e["body"] for e in dialog["entries"] if e["kind"] == "answer"]
    return answer  # type: ignore[no-any-return]


async def waiting_for(server: Served, s: Socket, recipient: str) -> dict[str, Any]:
    await s.ask(ask(recipient))
    return await s.request()


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_each_face_records_its_approver_whatever_the_client_claims(
        served: tuple[Served, Mailer]) -> None:
    server, mailer = served
    alice = await create(server, "-w", "default", "-c", "approve", "--name", "alice")
    bob = await create(server, "-w", "default", "-c", "approve", "--name", "bob")
    carol = await create(server, "-w", "default", "-c", "approve", "--name", "carol")
    spoofed = {"actor": "mallory", "actor-name": "Mallory", "actor-face": "mcp"}
    async with socket(server, ADMIN) as asker, socket(server, alice) as other:
        # the WebSocket: alice answers on a socket of her own, claiming to be someone else
        first = await waiting_for(server, asker, "ann")
        scrape_waiting = await metrics(server)
        by_socket = await other.answer("a1", {
            "operation": "approve", "dialog": first["dialog"], "call": first["call"],
            "digest": first["digest"], "via": "telepathy", **spoofed})
        await asker.end()
        told = [f["response"] for f in asker.frames
                if f["id"] == "q1" and f["response"].get("message_type") == "approval-answer"]
        # the Workbench's hint, over REST: bob denies, naming the call only
        asker.frames.clear()
        second = await waiting_for(server, asker, "ben")
        by_workbench = await post(server, ROUTE, {
            "operation": "deny", "call": second["call"], "reason": "ben left",
            "via": "workbench", **spoofed}, bob)
        await asker.end()
        # the CLI: carol approves with the call's key alone
        third = await waiting_for(server, asker, "cid")
        by_cli = await run_toolmesh("approvals", "approve", third["call"], "-u", server.url,
                                    "-t", carol)
        await asker.end()
        # REST, no hint: the gateway's own token
        fourth = await waiting_for(server, asker, "dan")
        by_rest = await post(server, ROUTE, {"operation": "approve", "call": fourth["call"],
                                             "digest": fourth["digest"]}, ADMIN)
        await asker.end()
    assert by_socket["response"]["answer"]["by"] == {
        "id": token_id(alice), "name": "alice", "face": "websocket"}
    assert by_workbench[0] == 200, by_workbench
    assert by_workbench[1]["answer"]["by"] == {
        "id": token_id(bob), "name": "bob", "face": "workbench"}
    assert by_cli[0] == 0, by_cli[2]
    assert by_rest[1]["answer"]["by"] == {"id": "admin", "name": "", "face": "rest"}
    assert mailer.sent() == ["to ann", "to cid", "to dan"]
    # the dialog's own client heard who answered
    [notice] = told
    assert notice["answer"]["by"]["name"] == "alice" and notice["answer"]["call"] == first["call"]
    assert f"by token 'alice' ({token_id(alice)}) through websocket" in notice["content"]

    expected = {first["dialog"]: f"✔ approved by alice ({token_id(alice)}) over the WebSocket",
                second["dialog"]: f"✘ denied by bob ({token_id(bob)}) in the Workbench",
                third["dialog"]: f"✔ approved by carol ({token_id(carol)}) with the CLI",
                fourth["dialog"]: "✔ approved by admin over REST"}
    for request in (first, second, third, fourth):
        text, dialog = await shown(server, request["dialog"])
        answer = answer_entry(dialog)
        assert answer["by"]["face"] in ("websocket", "workbench", "cli", "rest")
        assert "✋ waits for a person" in text and request["arguments"]["to"] in text
        assert f"call {request['call']}, digest {request['digest']}, expires " in text
        line = next(x for x in text.splitlines() if x.lstrip().startswith(("✔", "✘")))
        assert line.lstrip().startswith(expected[request["dialog"]]), text
        at = answer["at"][:19].replace("T", " ")
        assert f" at {at}, after " in line, line  # TZ=UTC: local time is the recorded one
    assert "; reason: ben left" in (await shown(server, second["dialog"]))[0]

    # the log: each wait with the command that answers it, each answer with its approver
    log = "".join(server.log)
    for request in (first, second, third, fourth):
        assert (f"call {request['call']} of dialog {request['dialog']} (send, "
                f"{request['digest']}) waits for a person; answer it with: toolmesh approvals "
                f"approve {request['call']}") in log
    assert (f"call {first['call']} of dialog {first['dialog']} (send): approve by token "
            f"'alice' ({token_id(alice)}) through websocket after ") in log
    assert f"(send): deny by token 'bob' ({token_id(bob)}) through workbench after " in log
    assert f"(send): approve by token 'carol' ({token_id(carol)}) through cli after " in log
    assert "(send): approve by admin through rest after " in log

    # the metrics: one waited while it was asked, none now; the decisions by face
    assert sample(scrape_waiting, "toolmesh_approvals_waiting", kind="approval") == 1.0
    scrape = await metrics(server)
    assert sample(scrape, "toolmesh_approvals_waiting", kind="approval") == 0.0
    for decision, face in (("approve", "websocket"), ("deny", "workbench"),
                           ("approve", "cli"), ("approve", "rest")):
        assert sample(scrape, "toolmesh_approval_decisions_total", kind="approval",
                      decision=decision, face=face) == 1.0, (decision, face)
    assert sample(scrape, "toolmesh_approval_decision_seconds_count", kind="approval",
                  decision="approve") == 3.0
    assert sample(scrape, "toolmesh_approval_decision_seconds_count", kind="approval",
                  decision="deny") == 1.0


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_an_expired_request_has_no_approver_and_says_so(tmp_path: Path) -> None:
    mail = tmp_path / "mail"
    mail.mkdir()
    from tests.dialogs.test_embedded_restart import SERVICES, _offered

    async with toolmesh_serve(tmp_path, "--tool-service", "mailer:Mailer", "--approval",
                              "always", "--approval-timeout", "1",
                              extra_env={"MAILER_DIR": str(mail)}, cwd=SERVICES) as server:
        await _offered(server.url, "send")
        async with aiohttp.ClientSession() as http, http.post(
                f"{server.url}api/v1/flow/default/service/agent",
                json={"question": ask("eve")}) as r:
            assert r.status == 200
        code, out, err = await run_toolmesh("dialogs", "list", "--json", "-u", server.url)
        [dialog] = json.loads(out)["dialogs"]
        code, text, err = await run_toolmesh("dialogs", "show", dialog["id"], "-u",
                                             server.url)
        listed = await run_toolmesh("approvals", "list", "-u", server.url)
    assert code == 0, err
    assert "⌛ expired" in text and "no one answered by " in text, text
    assert "(send): expired by no one" in "".join(server.log)
    assert listed[0] == 0 and "nothing waits" in listed[2]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_an_approval_through_mcp_is_logged_and_counted_with_its_face(
        tmp_path: Path) -> None:
    from tests.dialogs.test_embedded_restart import _offered
    from tests.mcp_endpoint.test_mcp_approval import Person, session, yes

    async with toolmesh_serve(tmp_path, "--approval", "always") as served:
        await _offered(served.url, "tell-joke")
        async with session(served.url + "mcp", Person(yes())) as client:
            approved = await client.call_tool("tell-joke", {"topic": "cats"})
        async with aiohttp.ClientSession() as http, http.get(served.url + "metrics") as r:
            scrape = await r.text()
    assert not approved.is_error, approved
    assert re.search(r"call of tell-joke \(sha256:[0-9a-f]{64}\) outside any dialog: approve "
                     r"by local through mcp", "".join(served.log)), served.log[-10:]
    assert sample(scrape, "toolmesh_approval_decisions_total", kind="approval",
                  decision="approve", face="mcp") == 1.0
