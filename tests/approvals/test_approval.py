"""Calls that wait for a person: the whole agent stack on a bus (scripted model, a mailer tool
service that counts its mails), answers given through the ``approvals`` service the way the
gateway, the CLI and the Workbench give them."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.agent.stack import Stack, agent_stack, answer_of, observations
from tests.conftest import Backend
from tests.dialogs.test_recorded_dialogs import ACT, FINISH, Followed, cut_short, follow, mailer
from toolmesh import RequestClient, RequestError
from toolmesh.agent.loop import AgentOptions
from toolmesh.approvals import call_digest
from toolmesh.dialogs import DialogJournal, open_journal
from toolmesh.llm import ScriptedLLM

OPTIONS = AgentOptions(tool_timeout=5.0)


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[DialogJournal]:
    j = await open_journal(str(tmp_path / "dialogs.db"))
    yield j
    await j.close()


@asynccontextmanager
async def approvals(s: Stack) -> AsyncIterator[RequestClient]:
    client = RequestClient(await s.backend.connect(), request_queue=s.approvals_queues[0],
                           response_queue=s.approvals_queues[1])
    async with client:
        yield client


async def always(s: Stack) -> None:
    """The mailer's tool waits for a person."""
    await s.put({("tool", "send"): {"type": "tool-service", "name": "send", "service": "mailer",
                                    "description": "sends a mail", "approval": "always",
                                    "arguments": [{"name": "to", "type": "string",
                                                   "description": "whom to"}]}})


class Dialog:
    """A dialog asked in the background, whose messages are watched as they come."""

    def __init__(self, s: Stack, question: str) -> None:
        self.messages: list[dict[str, Any]] = []
        self._request = asyncio.Event()
        self.task = asyncio.ensure_future(self._run(s, question))

    async def _run(self, s: Stack, question: str) -> list[dict[str, Any]]:
        async for m in s.client.stream({"question": question}, timeout=30):
            self.messages.append(m)
            if m["message_type"] == "approval-request":
                self._request.set()
        return self.messages

    async def request(self) -> dict[str, Any]:
        """The approval request of the dialog, once it came."""
        async with asyncio.timeout(10):
            await self._request.wait()
        return next(m for m in self.messages
                    if m["message_type"] == "approval-request")["approval"]

    async def end(self) -> list[dict[str, Any]]:
        async with asyncio.timeout(20):
            return await self.task


async def test_a_call_that_needs_approval_waits_for_it_and_then_runs(
        backend: Backend, tmp_path: Path, journal: DialogJournal) -> None:
    llm = ScriptedLLM([ACT], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, journal=journal, options=OPTIONS) as s, \
            mailer(s) as m, approvals(s) as client:
        await always(s)
        dialog = Dialog(s, "mail bob")
        request = await dialog.request()
        assert (request["tool"], request["arguments"]) == ("send", {"to": "bob"})
        assert request["digest"] == call_digest("send", {"to": "bob"})
        assert request["call"].startswith(request["dialog"] + "/1/")
        await asyncio.sleep(0.2)
        assert m.attempts == []  # nothing runs before a person says so
        listed = await client.request({"operation": "list"}, timeout=10)
        assert [a["call"] for a in listed["approvals"]] == [request["call"]]
        answered = await client.request({"operation": "approve", "dialog": request["dialog"],
                                         "call": request["call"],
                                         "digest": request["digest"]}, timeout=10)
        messages = await dialog.end()
        after = await client.request({"operation": "list"}, timeout=10)
    assert answered["answer"]["decision"] == "approve"
    assert answer_of(messages) == "mail to bob #1" and len(m.sent) == 1
    kinds = [m["message_type"] for m in messages]
    assert kinds.index("tool-call") < kinds.index("approval-request") < kinds.index("observation")
    assert after["approvals"] == []
    _, entries = await journal.get(request["dialog"]) or (None, [])
    assert [e.kind for e in entries] == ["reply", "approval", "answer", "result", "turn", "end"]


async def test_a_denial_and_its_reason_reach_the_model_and_nothing_runs(
        backend: Backend, tmp_path: Path, journal: DialogJournal) -> None:
    llm = ScriptedLLM([ACT], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, journal=journal, options=OPTIONS) as s, \
            mailer(s) as m, approvals(s) as client:
        await always(s)
        dialog = Dialog(s, "mail bob")
        request = await dialog.request()
        await client.request({"operation": "deny", "dialog": request["dialog"],
                              "call": request["call"], "reason": "bob is on holiday"},
                             timeout=10)
        messages = await dialog.end()
    assert m.attempts == []
    denial = observations(messages)[0]
    assert "denied" in denial and "bob is on holiday" in denial
    assert "bob is on holiday" in "".join(llm.prompts[-1])  # the model was told, and why
    assert answer_of(messages) == denial
    # the dialog's usage and its record agree: a call denied is no call of the tool
    assert messages[-1]["tool_calls"] == 0
    dialog_record, _ = await journal.get(request["dialog"]) or (None, [])
    assert dialog_record is not None and dialog_record.tool_calls == 0


async def test_an_approval_is_bound_to_the_exact_call(
        memory: Backend, tmp_path: Path, journal: DialogJournal) -> None:
    llm = ScriptedLLM([ACT], rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm, journal=journal, options=OPTIONS) as s, \
            mailer(s) as m, approvals(s) as client:
        await always(s)
        dialog = Dialog(s, "mail bob")
        request = await dialog.request()
        which = {"dialog": request["dialog"], "call": request["call"]}
        refusals = {}
        for name, body in {
                "stale": {"operation": "approve", **which,
                          "digest": call_digest("send", {"to": "mallory"})},
                "no-digest": {"operation": "approve", **which},
                "elsewhere": {"operation": "approve", **which, "digest": request["digest"],
                              "workspace": "other"},
                "unknown": {"operation": "approve", "dialog": request["dialog"],
                            "call": "nope", "digest": request["digest"]},
                "malformed": {"operation": "approve", "dialog": 7, "call": request["call"]},
                "operation": {"operation": "accept", **which},
                "answer-form": {"operation": "answer", **which, "action": "accept"}}.items():
            with pytest.raises(RequestError) as refused:
                await client.request(body, timeout=10)
            refusals[name] = refused.value
        assert m.attempts == []
        await client.request({"operation": "approve", **which, "digest": request["digest"]},
                             timeout=10)
        with pytest.raises(RequestError) as twice:
            await client.request({"operation": "deny", **which}, timeout=10)
        await dialog.end()
    assert refusals["stale"].type == "stale" and "changed call" in refusals["stale"].message
    assert refusals["no-digest"].type == "bad-request"
    assert refusals["elsewhere"].type == "not-found"
    assert refusals["unknown"].type == "not-found"
    assert refusals["malformed"].type == "bad-request"
    assert refusals["operation"].type == "bad-request"
    assert refusals["answer-form"].type == "bad-request"
    assert twice.value.type in ("answered", "not-found")
    assert len(m.sent) == 1


async def test_an_unanswered_request_expires_denied(
        memory: Backend, tmp_path: Path, journal: DialogJournal) -> None:
    llm = ScriptedLLM([ACT], rules=[FINISH])
    options = dataclasses.replace(OPTIONS, approval_timeout=0.5)
    async with agent_stack(memory, tmp_path, llm, journal=journal, options=options) as s, \
            mailer(s) as m, approvals(s) as client:
        await always(s)
        dialog = Dialog(s, "mail bob")
        request = await dialog.request()
        messages = await dialog.end()
        with pytest.raises(RequestError) as late:
            await client.request({"operation": "approve", "dialog": request["dialog"],
                                  "call": request["call"], "digest": request["digest"]},
                                 timeout=10)
    assert m.attempts == []
    assert "in time" in observations(messages)[0]
    assert late.value.type in ("expired", "answered", "not-found")
    _, entries = await journal.get(request["dialog"]) or (None, [])
    assert [e.body["decision"] for e in entries if e.kind == "answer"] == ["expired"]


async def test_the_policy_comes_from_the_tool_else_the_operators_default(
        memory: Backend, tmp_path: Path) -> None:
    """``--approval always`` makes every tool wait, but one whose item says ``never``; with
    no journal (``--dialogs off``) approvals work within the agent process."""
    llm = ScriptedLLM(rules=[FINISH], default=ACT)
    options = dataclasses.replace(OPTIONS, approval="always")
    async with agent_stack(memory, tmp_path, llm, options=options) as s, mailer(s) as m, \
            approvals(s) as client:
        dialog = Dialog(s, "mail bob")
        request = await dialog.request()
        await client.request({"operation": "approve", "dialog": request["dialog"],
                              "call": request["call"], "digest": request["digest"]},
                             timeout=10)
        assert answer_of(await dialog.end()) == "mail to bob #1"
        await s.put({("tool", "send"): {"type": "tool-service", "name": "send",
                                        "service": "mailer", "description": "sends a mail",
                                        "approval": "never",
                                        "arguments": [{"name": "to", "type": "string",
                                                       "description": "whom to"}]}})
        messages = await s.ask("mail bob")
    assert "approval-request" not in [m["message_type"] for m in messages]
    assert len(m.attempts) == 2


async def test_an_approval_policy_that_is_not_one_is_refused_when_put(
        memory: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM([ACT], rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm) as s:
        for type, value in (("tool", {"type": "tool-service", "name": "x", "service": "y",
                                      "description": "x", "approval": "sometimes"}),
                            ("mcp", {"url": "http://127.0.0.1:1/mcp", "approval": True})):
            with pytest.raises(RequestError) as refused:
                await s.put({(type, "x"): value})
            assert "'approval'" in refused.value.message and "always" in refused.value.message


async def test_a_paused_dialog_survives_a_restart_of_its_agent(
        memory: Backend, tmp_path: Path, journal: DialogJournal) -> None:
    """The agent dies while its dialog waits for a person; started again, it asks again (the
    same call, the same expiry) and the answer given then lets the call run — once."""
    llm = ScriptedLLM([ACT], rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm, journal=journal, options=OPTIONS) as first:
        async with mailer(first) as m:
            await always(first)
            dialog = Dialog(first, "mail bob")
            request = await dialog.request()
            dialog.task.cancel()
            await cut_short(first)
            async with follow(memory, first.topic, _request_id(first, request)) as followed, \
                    agent_stack(memory, tmp_path, llm, journal=journal, options=OPTIONS,
                                queues_of=first.topic, take_up=True) as second, \
                    approvals(second) as client:
                again = await _asked_again(followed)
                assert (again["call"], again["digest"], again["expires"]) == (
                    request["call"], request["digest"], request["expires"])
                await client.request({"operation": "approve", "dialog": again["dialog"],
                                      "call": again["call"], "digest": again["digest"]},
                                     timeout=10)
                messages = await followed.finished()
    assert answer_of(messages) == "mail to bob #1"
    assert len(m.attempts) == 1 and len(m.sent) == 1


def _request_id(s: Stack, request: dict[str, Any]) -> str:
    """The bus request id of a dialog: the journal's dialog id is that id."""
    return str(request["dialog"])


async def _asked_again(followed: Followed) -> dict[str, Any]:
    async with asyncio.timeout(10):
        while not any(m["message_type"] == "approval-request" for m in followed.messages):
            await asyncio.sleep(0.02)
    return next(m for m in followed.messages
                if m["message_type"] == "approval-request")["approval"]


async def test_a_call_from_outside_a_dialog_runs_only_with_the_digest_of_that_very_call(
        backend: Backend, tmp_path: Path) -> None:
    """The tool-calls service (what ``/mcp`` calls through): a caller that can ask a person is
    told what to ask about; the call runs only with that call's digest."""
    async with agent_stack(backend, tmp_path, ScriptedLLM([]), options=OPTIONS) as s, \
            mailer(s) as m:
        await always(s)
        calls = RequestClient(await s.backend.connect(), request_queue=s.tool_calls_queues[0],
                              response_queue=s.tool_calls_queues[1])
        async with calls:
            call = {"operation": "call", "name": "send", "arguments": {"to": "bob"}}
            asked = await calls.request({**call, "ask": True}, timeout=10)
            unasked = await calls.request(call, timeout=10)
            other = await calls.request({**call, "approved": call_digest("send", {"to": "eve"})},
                                        timeout=10)
            assert m.attempts == []  # nothing ran yet
            ran = await calls.request({**call, "approved": asked["approval"]["digest"]},
                                      timeout=10)
    assert asked["approval"] == {"tool": "send", "arguments": {"to": "bob"},
                                 "digest": call_digest("send", {"to": "bob"})}
    assert "text" not in asked
    for refused in (unasked, other):
        assert refused["is_error"] and "waits for a person's approval" in refused["text"]
    assert ran["text"] == "mail to bob #1" and not ran["is_error"]
    assert len(m.sent) == 1 and m.attempts[0].startswith("tool-calls/")
