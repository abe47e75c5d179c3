"""An MCP server's questions during a call, asked of the person behind the dialog:
server-everything 2026.8.31 (npm, the TypeScript SDK) over streamable HTTP, its
``trigger-elicitation-request`` (form mode) and ``trigger-url-elicitation`` (URL mode) tools,
through the whole agent stack; the answers go through the ``approvals`` service."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.stack import Stack, agent_stack, answer_of, observations
from tests.agent.test_tool_status import patient
from tests.approvals.test_approval import approvals
from tests.conftest import Backend
from tests.mcp import everything
from tests.mcp.everything import EverythingServer
from tests.mcp.servers import running_server
from toolmesh import RequestClient, RequestError
from toolmesh.dialogs import DialogJournal, open_journal
from toolmesh.llm import Rule, ScriptedLLM

# slow (tests/conftest.py): the npm server-everything, on Node
pytestmark = pytest.mark.slow

on_memory = pytest.mark.parametrize("backend", ["memory"], indirect=True)
FINISH = Rule(r"\nObservation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")
FORM = "Thought: ask them\nAction: ask-form\nArgs: {}"
URL = ('Thought: send them there\nAction: ask-url\n'
       'Args: {"url": "https://example.com/consent", "message": "Please consent"}')


@pytest.fixture(scope="module")
def server() -> Iterator[EverythingServer]:
    problem = everything.missing_node()
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    with everything.everything_http() as s:
        yield s


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[DialogJournal]:
    j = await open_journal(str(tmp_path / "dialogs.db"))
    yield j
    await j.close()


async def tools(s: Stack, server: EverythingServer) -> None:
    patient(s)
    await s.put({("mcp", "form"): {"url": server.url, "remote-name": "trigger-elicitation-request"},
                 ("mcp", "link"): {"url": server.url, "remote-name": "trigger-url-elicitation"},
                 ("tool", "ask-form"): {"type": "mcp-tool", "name": "ask-form", "mcp-tool": "form",
                                        "description": "asks the user for their details"},
                 ("tool", "ask-url"): {"type": "mcp-tool", "name": "ask-url", "mcp-tool": "link",
                                       "description": "sends the user to a page"}})


class Asked:
    """A dialog in the background, and the question it brings."""

    def __init__(self, s: Stack, question: str) -> None:
        self.messages: list[dict[str, Any]] = []
        self._asked = asyncio.Event()
        self.task = asyncio.ensure_future(self._run(s, question))

    async def _run(self, s: Stack, question: str) -> list[dict[str, Any]]:
        async for m in s.client.stream({"question": question}, timeout=60):
            self.messages.append(m)
            if m["message_type"] == "elicitation-request":
                self._asked.set()
        return self.messages

    async def question(self) -> dict[str, Any]:
        async with asyncio.timeout(20):
            await self._asked.wait()
        return next(m for m in self.messages
                    if m["message_type"] == "elicitation-request")["elicitation"]

    async def end(self) -> list[dict[str, Any]]:
        async with asyncio.timeout(30):
            return await self.task


async def answer(client: RequestClient, question: dict[str, Any], action: str,
                 content: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {"operation": "answer", "dialog": question["dialog"], "call": question["call"],
            "action": action}
    if content is not None:
        body["content"] = content
    return await client.request(body, timeout=10)


@on_memory
async def test_a_form_question_reaches_the_person_and_their_answer_the_server(
        backend: Backend, tmp_path: Path, server: EverythingServer,
        journal: DialogJournal) -> None:
    llm = ScriptedLLM([FORM], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, joke=False, journal=journal) as s, \
            approvals(s) as client:
        await tools(s, server)
        dialog = Asked(s, "who am I?")
        question = await dialog.question()
        assert (question["mode"], question["tool"]) == ("form", "ask-form")
        assert question["message"] == "Please provide inputs for the following fields:"
        assert question["schema"]["required"] == ["name"]
        assert "email" in question["schema"]["properties"]
        listed = await client.request({"operation": "list"}, timeout=10)
        assert [q["call"] for q in listed["approvals"]] == [question["call"]]
        with pytest.raises(RequestError) as unfit:  # the form's own rules are kept
            await answer(client, question, "accept", {"check": True})
        with pytest.raises(RequestError) as not_an_approval:
            await client.request({"operation": "approve", "dialog": question["dialog"],
                                  "call": question["call"], "digest": question["digest"]},
                                 timeout=10)
        await answer(client, question, "accept", {"name": "Ada Lovelace", "check": True,
                                                  "integer": 7})
        messages = await dialog.end()
    assert unfit.value.type == "bad-request" and "'name' is a required" in unfit.value.message
    assert not_an_approval.value.type == "bad-request"
    seen = observations(messages)[0]
    assert "- Name: Ada Lovelace" in seen and "- Favorite Integer: 7" in seen
    assert "Ada Lovelace" in answer_of(messages)
    _, entries = await journal.get(question["dialog"]) or (None, [])
    kinds = [e.kind for e in entries]
    assert kinds.index("approval") < kinds.index("answer") < kinds.index("result")


@on_memory
async def test_a_declined_question_is_the_servers_to_handle(
        backend: Backend, tmp_path: Path, server: EverythingServer,
        journal: DialogJournal) -> None:
    llm = ScriptedLLM([FORM], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, joke=False, journal=journal) as s, \
            approvals(s) as client:
        await tools(s, server)
        dialog = Asked(s, "who am I?")
        await answer(client, await dialog.question(), "decline")
        messages = await dialog.end()
    assert "User declined to provide the requested information" in observations(messages)[0]


@on_memory
async def test_a_url_question_shows_the_link_and_asks_nothing_in_a_form(
        backend: Backend, tmp_path: Path, server: EverythingServer) -> None:
    """URL mode with no journal (``--dialogs off``): the agent process holds the question."""
    llm = ScriptedLLM([URL], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, joke=False) as s, approvals(s) as client:
        await tools(s, server)
        dialog = Asked(s, "consent")
        question = await dialog.question()
        assert (question["mode"], question["url"], question["message"]) == (
            "url", "https://example.com/consent", "Please consent")
        assert "schema" not in question
        await answer(client, question, "accept")
        messages = await dialog.end()
    assert "User completed the URL elicitation flow" in observations(messages)[0]
    assert "https://example.com/consent" in observations(messages)[0]


@on_memory
async def test_a_question_of_a_call_no_person_follows_is_refused_to_the_server(
        backend: Backend, tmp_path: Path, server: EverythingServer) -> None:
    """A direct mcp-tool request (TrustGraph's, no dialog behind it): the server hears that
    there is no one to ask, at once, instead of waiting for an answer that never comes."""
    llm = ScriptedLLM([FORM], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, joke=False) as s:
        await tools(s, server)
        with pytest.raises(RequestError) as refused:
            async with asyncio.timeout(20):
                await s.agent.mcp.invoke("form", {}, timeout=15)
    assert "no person to ask" in refused.value.message


@on_memory
async def test_a_url_the_server_requires_by_error_reaches_the_model_with_its_link(
        backend: Backend, tmp_path: Path, server: EverythingServer) -> None:
    """The error path of URL elicitation (-32042): nothing to answer, the link is told."""
    llm = ScriptedLLM([URL.replace('"Please consent"}', '"Please consent", "errorPath": true}')],
                      rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, joke=False) as s:
        await tools(s, server)
        messages = await s.ask("consent")
    seen = observations(messages)[0]
    assert seen.startswith("Error: ") and "https://modelcontextprotocol.io" in seen, seen
    assert "elicitation-request" not in [m["message_type"] for m in messages]


@on_memory
@pytest.mark.parametrize("protocol", ["handshake", "auto"])
async def test_both_forms_of_a_question_reach_the_person(
        backend: Backend, tmp_path: Path, protocol: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """A server written with the Python SDK asks with ``Elicit``: during the call when the
    session agreed 2025-11-25 (``handshake``), as an ``InputRequiredResult`` the call is made
    again with when it agreed 2026-07-28 (``auto``)."""
    caplog.set_level(logging.INFO, logger="toolmesh.mcp.elicitation")
    llm = ScriptedLLM(["Thought: greet\nAction: greet\nArgs: {}"], rules=[FINISH])
    async with running_server() as mcp_server, \
            agent_stack(backend, tmp_path, llm, joke=False) as s, approvals(s) as client:
        patient(s)
        await s.put({("mcp", "greeter"): {"url": mcp_server.url, "remote-name": "greet",
                                          "protocol": protocol},
                     ("tool", "greet"): {"type": "mcp-tool", "name": "greet",
                                         "mcp-tool": "greeter", "description": "greets"}})
        dialog = Asked(s, "greet me")
        question = await dialog.question()
        assert question["message"] == "What is your name?"
        assert question["schema"]["required"] == ["name"]
        await answer(client, question, "accept", {"name": "Grace"})
        messages = await dialog.end()
    assert observations(messages) == ["hello Grace"]
    retried = "asks 1 question(s) in the retry form" in caplog.text
    assert retried is (protocol == "auto")
