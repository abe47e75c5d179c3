"""Dialogs recorded as they go, and taken up again from their journal: the whole agent stack
(config, text-completion with a scripted model, prompt, agent, a tool service) on a bus, the
journal in a real SQLite file.

A dialog cut short is taken up by the agent of a restarted stack as it starts (the memory
bus does not deliver requests again: the embedded deployment's way); a broker's redelivery
is taken up the same way (tests/e2e/test_durable_dialogs.py, on RabbitMQ).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.agent.stack import Stack, agent_stack, answer_of, observations
from tests.conftest import Backend
from toolmesh import DynamicToolService, RequestClient, RequestError
from toolmesh.dialogs import RUNNING, DialogJournal, open_journal
from toolmesh.llm import Rule, ScriptedLLM
from toolmesh.schema.agent import is_final
from toolmesh.tools import call_key

#: after a step, end with the last observation
FINISH = Rule(r"\nObservation: (?P<obs>[^\n]*)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")
ACT = 'Thought: it must be sent\nAction: send\nArgs: {"to": "bob"}'


class Mailer(DynamicToolService):
    """Sends a mail once per idempotency key, as a tool that acts on the world should; counts
    every attempt and every mail. ``hold``: attempts (to those recipients; ``True``: to
    anyone) wait until the gate opens. Every delivery runs (no dedupe by the SDK): these
    tests count the agent's attempts (tests/tools/test_dedupe_service.py, the SDK's)."""

    dedupe_calls = False

    def __init__(self, *args: Any, hold: bool | set[str] = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.attempts: list[str | None] = []
        self.sent: dict[str, str] = {}
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()
        self.hold = hold

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        key = call_key()
        self.attempts.append(key)
        if self.hold is True or (self.hold and arguments["to"] in self.hold):
            self.entered.set()
            await self.gate.wait()
        assert key is not None
        if key not in self.sent:
            self.sent[key] = f"mail to {arguments['to']} #{len(self.sent) + 1}"
        return self.sent[key]


@asynccontextmanager
async def mailer(s: Stack, *, hold: bool | set[str] = False) -> AsyncIterator[Mailer]:
    topic = s.backend.topic("mailer")
    async with Mailer(s.agent.bus, topic=topic, hold=hold) as m:
        await s.put({("tool-service", "mailer"): {
                         "id": "mailer", "request-queue": f"non-persistent://tg/request/{topic}",
                         "response-queue": f"non-persistent://tg/response/{topic}"},
                     ("tool", "send"): {"type": "tool-service", "name": "send",
                                        "service": "mailer", "description": "sends a mail",
                                        "arguments": [{"name": "to", "type": "string",
                                                       "description": "whom to"}]}})
        yield m


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[DialogJournal]:
    j = await open_journal(str(tmp_path / "dialogs.db"))
    yield j
    await j.close()


class Followed:
    """What the agent answers under one id, as it comes."""

    def __init__(self, id: str) -> None:
        self.id = id
        self.messages: list[dict[str, Any]] = []
        self._done = asyncio.Event()

    async def on(self, message: Any) -> None:
        if message.properties.get("id") == self.id:
            self.messages.append(message.json())
            if is_final(self.messages[-1]):
                self._done.set()

    async def finished(self) -> list[dict[str, Any]]:
        async with asyncio.timeout(20):
            await self._done.wait()
        return self.messages


@asynccontextmanager
async def follow(backend: Backend, topic: str, id: str) -> AsyncIterator[Followed]:
    """Listen to what the agent of stack ``topic`` answers under ``id``."""
    bus = await backend.connect()
    followed = Followed(id)
    sub = await bus.subscribe(f"response:tg:{topic}-agent", followed.on,
                              subscription=f"follow-{id}")
    try:
        yield followed
    finally:
        await sub.close()


async def cut_short(s: Stack) -> None:
    """Stop the stack's agent where it is, as a kill would (no drain)."""
    s.agent.drain_timeout = 0.0
    await s.agent.stop()


async def deliver(s: Stack, id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """``body`` delivered under ``id`` (as a broker delivers a request again); every message
    the agent answers it with, to the last."""
    bus = await s.backend.connect()
    request_queue, response_queue = s.agent.request_queue, s.agent.response_queue
    got: list[dict[str, Any]] = []
    done = asyncio.Event()

    async def on(message: Any) -> None:
        if message.properties.get("id") == id:
            got.append(message.json())
            if is_final(got[-1]):
                done.set()

    sub = await bus.subscribe(response_queue, on, subscription=f"test-{id}")
    try:
        producer = await bus.producer(request_queue)
        await producer.send(body, properties={"id": id, "timeout": "30"})
        async with asyncio.timeout(20):
            await done.wait()
    finally:
        await sub.close()
    return got


async def test_a_dialog_is_recorded_step_by_step_and_its_calls_carry_stable_keys(
        backend: Backend, tmp_path: Path, journal: DialogJournal) -> None:
    llm = ScriptedLLM([ACT], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, journal=journal) as s, mailer(s) as m:
        messages = await deliver(s, "dialog-1", {"question": "mail bob", "user": "alice"})
    assert answer_of(messages) == "mail to bob #1"
    found = await journal.get("dialog-1")
    assert found is not None
    dialog, entries = found
    assert (dialog.status, dialog.user, dialog.question, dialog.steps, dialog.tool_calls) == (
        "answer", "alice", "mail bob", 2, 1)
    assert dialog.in_token is not None and dialog.in_token > 0
    assert [e.kind for e in entries] == ["reply", "result", "turn", "end"]
    call = entries[0].body["calls"][0]
    assert (call["name"], call["arguments"]) == ("send", {"to": "bob"})
    assert entries[1].body["observation"] == "mail to bob #1" and entries[1].body["ok"]
    assert entries[3].body["answer"] == "mail to bob #1"
    # the key: the dialog, the step, the call's id
    assert m.attempts == [f"dialog-1/1/{call['id']}"]


async def test_an_agent_that_died_mid_call_is_taken_up_where_it_stopped(
        memory: Backend, tmp_path: Path, journal: DialogJournal) -> None:
    """The first agent dies while the call is in flight; the next one takes the dialog up:
    the model is not asked for that step again, the call is made again with the same key (the
    mailer sends once), and the dialog ends with its answer."""
    llm = ScriptedLLM([ACT], rules=[FINISH])
    body = {"question": "mail bob", "user": "alice"}
    async with agent_stack(memory, tmp_path, llm, journal=journal) as first:
        async with mailer(first, hold=True) as m:
            dying = asyncio.ensure_future(deliver(first, "dialog-3", body))
            async with asyncio.timeout(10):
                await m.entered.wait()
            dying.cancel()
            await cut_short(first)  # what a kill leaves: the call sent, no result
            m.gate.set()
            _, entries = await journal.get("dialog-3") or (None, [])
            assert [e.kind for e in entries] == ["reply"]
            prompts_before = len(llm.prompts)
            async with follow(memory, first.topic, "dialog-3") as followed, \
                    agent_stack(memory, tmp_path, llm, journal=journal, queues_of=first.topic,
                                take_up=True):
                messages = await followed.finished()
    assert answer_of(messages) == "mail to bob #1"
    assert observations(messages) == ["mail to bob #1"]
    assert len(m.attempts) == 2 and m.attempts[0] == m.attempts[1]  # the same key
    assert len(m.sent) == 1  # and so one mail
    assert len(llm.prompts) == prompts_before + 1  # only the step after the call
    dialog, entries = await journal.get("dialog-3") or (None, [])
    assert dialog is not None and dialog.status == "answer"
    assert [e.kind for e in entries] == ["reply", "result", "turn", "end"]


async def test_after_a_restart_a_dialog_no_one_can_read_is_abandoned_not_run(
        memory: Backend, tmp_path: Path, journal: DialogJournal,
        caplog: pytest.LogCaptureFixture) -> None:
    """As a restarted `toolmesh serve` takes its dialogs up, one whose client died with the
    process and in which no person takes part is marked abandoned: its call is not made
    again for no one."""
    caplog.set_level(logging.INFO, logger="toolmesh.agent")
    llm = ScriptedLLM([ACT], rules=[FINISH])
    body = {"question": "mail bob", "user": "alice"}
    async with agent_stack(memory, tmp_path, llm, journal=journal) as first:
        async with mailer(first, hold=True) as m:
            dying = asyncio.ensure_future(deliver(first, "dialog-9", body))
            async with asyncio.timeout(10):
                await m.entered.wait()
            dying.cancel()
            await cut_short(first)
            prompts_before = len(llm.prompts)
            async with agent_stack(memory, tmp_path, llm, journal=journal,
                                   queues_of=first.topic, take_up=True, abandon_unread=True):
                async with asyncio.timeout(10):
                    while (await journal.get("dialog-9") or (None,))[0].status == RUNNING:
                        await asyncio.sleep(0.02)
            m.gate.set()
    dialog, entries = await journal.get("dialog-9") or (None, [])
    assert dialog is not None and dialog.status == "abandoned"
    assert [e.kind for e in entries] == ["reply", "end"]
    assert entries[-1].body["message"]["error"]["type"] == "abandoned"
    assert len(m.attempts) == 1  # the call in flight when the process died, not again
    assert len(llm.prompts) == prompts_before
    assert "dialog dialog-9 is not taken up: its client's connection died" in caplog.text


async def test_a_call_whose_result_was_recorded_is_never_made_again(
        memory: Backend, tmp_path: Path, journal: DialogJournal) -> None:
    """Two calls; the agent dies during the second, after the first result was recorded:
    taken up, the first call is not made again."""
    llm = ScriptedLLM([ACT], rules=[
        Rule(r"Observation: mail to bob #1\n\nYour reply", 'Thought: and carol\nAction: send\n'
                                                            'Args: {"to": "carol"}'),
        FINISH])
    body = {"question": "mail bob then carol"}
    async with agent_stack(memory, tmp_path, llm, journal=journal) as first:
        async with mailer(first, hold={"carol"}) as m:  # bob's mail goes; carol's waits
            dying = asyncio.ensure_future(deliver(first, "dialog-4", body))
            async with asyncio.timeout(10):
                await m.entered.wait()
            dying.cancel()
            await cut_short(first)
            m.gate.set()
            async with follow(memory, first.topic, "dialog-4") as followed, \
                    agent_stack(memory, tmp_path, llm, journal=journal, queues_of=first.topic,
                                take_up=True):
                messages = await followed.finished()
    assert answer_of(messages) == "mail to carol #2"
    keys = m.attempts
    assert len(set(keys)) == 2 and keys.count(keys[0]) == 1, keys  # bob's call: once
    assert list(m.sent.values()) == ["mail to bob #1", "mail to carol #2"]


async def test_a_dialog_taken_up_after_its_client_stopped_waiting_is_not_run(
        memory: Backend, tmp_path: Path, journal: DialogJournal) -> None:
    llm = ScriptedLLM([ACT], rules=[FINISH])
    await journal.begin("dialog-5", workspace="default", user="alice", question="mail bob",
                        request={"question": "mail bob"}, timeout=0.01)
    await asyncio.sleep(0.1)
    topic = memory.topic("stack")
    async with follow(memory, topic, "dialog-5") as followed, \
            agent_stack(memory, tmp_path, llm, journal=journal, queues_of=topic, take_up=True):
        messages = await followed.finished()
    assert [m["error"]["type"] for m in messages] == ["timeout"]
    assert llm.prompts == []
    dialog, _ = await journal.get("dialog-5") or (None, [])
    assert dialog is not None and dialog.status == "abandoned"


async def test_a_new_request_reusing_a_dialogs_id_runs_unrecorded(
        memory: Backend, tmp_path: Path, journal: DialogJournal,
        caplog: pytest.LogCaptureFixture) -> None:
    """Request ids name one request each; a client that sends another under a used id gets
    its dialog run, and the journal keeps the first."""
    llm = ScriptedLLM(rules=[FINISH], default=ACT)
    async with agent_stack(memory, tmp_path, llm, journal=journal) as s, mailer(s) as m:
        await deliver(s, "dialog-8", {"question": "mail bob"})
        again = await deliver(s, "dialog-8", {"question": "mail carol"})
    # it ran (the scripted model mails bob again) — under the keys of the first: one mail
    assert answer_of(again) == "mail to bob #1" and len(m.attempts) == 2
    dialog, _ = await journal.get("dialog-8") or (None, [])
    assert dialog is not None and dialog.question == "mail bob"
    assert "begun before by a request of the same id" in caplog.text


async def test_an_embedded_agent_takes_up_its_unfinished_dialogs_when_it_starts(
        memory: Backend, tmp_path: Path, journal: DialogJournal) -> None:
    """On a bus that does not deliver requests again (the memory bus died with them), the
    agent takes up at start what its journal holds as running."""
    llm = ScriptedLLM([ACT], rules=[FINISH])
    body = {"question": "mail bob"}
    async with agent_stack(memory, tmp_path, llm, journal=journal) as first:
        async with mailer(first, hold=True) as m:
            dying = asyncio.ensure_future(deliver(first, "dialog-6", body))
            async with asyncio.timeout(10):
                await m.entered.wait()
            dying.cancel()
            await cut_short(first)
            m.gate.set()
            first.agent.take_up_unfinished = True
            # the same agent started again, as `toolmesh serve` restarted would be
            await first.agent.start()
            async with asyncio.timeout(20):
                while (await journal.get("dialog-6") or (None,))[0].status == RUNNING:  # type: ignore[union-attr]
                    await asyncio.sleep(0.02)
    dialog, entries = await journal.get("dialog-6") or (None, [])
    assert dialog is not None and dialog.status == "answer"
    assert entries[-1].body["answer"] == "mail to bob #1"
    assert len(m.sent) == 1


async def test_dialogs_are_listed_and_shown_per_workspace(
        memory: Backend, tmp_path: Path, journal: DialogJournal) -> None:
    llm = ScriptedLLM([ACT], rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm, journal=journal) as s, mailer(s):
        await deliver(s, "dialog-7", {"question": "mail bob"})
        await s.put({("tool", "x"): {"type": "tool-service", "name": "x", "service": "none",
                                     "description": "x"}}, workspace="other")
        client = RequestClient(await memory.connect(), request_queue=s.dialogs_queues[0],
                               response_queue=s.dialogs_queues[1])
        async with client:
            listed = await client.request({"operation": "list"}, timeout=10)
            shown = await client.request({"operation": "show", "id": "dialog-7"}, timeout=10)
            elsewhere = await client.request({"operation": "list", "workspace": "other"},
                                             timeout=10)
            with pytest.raises(RequestError) as missing:
                await client.request({"operation": "show", "id": "dialog-7",
                                      "workspace": "other"}, timeout=10)
            with pytest.raises(RequestError) as bad:
                await client.request({"operation": "drop"}, timeout=10)
    assert [d["id"] for d in listed["dialogs"]] == ["dialog-7"]
    assert listed["dialogs"][0]["status"] == "answer"
    assert [e["kind"] for e in shown["dialog"]["entries"]] == ["reply", "result", "turn", "end"]
    assert shown["dialog"]["request"] == {"question": "mail bob"}
    assert elsewhere["dialogs"] == []
    assert missing.value.type == "not-found"
    assert bad.value.type == "bad-request" and "list, show" in bad.value.message
    json.dumps(shown)  # what the gateway relays is JSON


async def test_an_agent_that_records_nothing_says_so_when_asked_for_dialogs(
        memory: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM([ACT], rules=[FINISH])
    async with agent_stack(memory, tmp_path, llm) as s:  # no journal: --dialogs off
        client = RequestClient(await memory.connect(), request_queue=s.dialogs_queues[0],
                               response_queue=s.dialogs_queues[1])
        async with client:
            with pytest.raises(RequestError) as refused:
                await client.request({"operation": "list"}, timeout=10)
    assert refused.value.type == "not-recorded" and "--dialogs off" in refused.value.message
