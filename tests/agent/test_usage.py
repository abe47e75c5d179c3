"""Token usage of a dialog: every LLM answer of it summed on its last message, as TrustGraph's
agent reports it (`tg-invoke-agent --show-usage` prints the last message's)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.agent.stack import agent_stack
from tests.conftest import Backend
from toolmesh.agent.loop import AgentLoop, AgentOptions
from toolmesh.agent.toolset import ToolSet
from toolmesh.llm import ScriptedLLM
from toolmesh.llm.usage import record
from toolmesh.schema.agent import AgentRequest

JOKE_FOOD = 'Thought: a joke is needed\nAction: tell-joke\nArgs: {"topic": "food"}'
DONE = "Thought: I have it\nFinal Answer: a joke"


def words(*texts: str) -> int:
    """The scripted LLM's token count: whitespace-separated words (its documented rule)."""
    return sum(len(t.split()) for t in texts)


@pytest.mark.parametrize("streaming", [False, True])
async def test_the_last_message_carries_the_usage_of_the_whole_dialog(
        backend: Backend, tmp_path: Path, streaming: bool) -> None:
    llm = ScriptedLLM([JOKE_FOOD, DONE])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.load_jokes()
        messages = await s.ask("Tell me a joke about food", streaming=streaming)
    last = messages[-1]
    assert last["message_type"] == "answer" and last["end_of_dialog"] is True
    assert len(llm.prompts) == 2
    assert (last["in_token"], last["out_token"], last["model"]) == (
        sum(words(system, prompt) for system, prompt in llm.prompts), words(JOKE_FOOD, DONE),
        "scripted")
    assert all("in_token" not in m for m in messages[:-1])


class Reporting:
    """Prompts answered from a list; each answer reports usage as the prompt client does."""

    def __init__(self, *replies: tuple[str, Mapping[str, Any]]) -> None:
        self.replies = list(replies)

    def _next(self) -> str:
        text, usage = self.replies.pop(0)
        record({"text": text, "end_of_stream": True, **usage})
        return text

    async def render_and_complete(self, id: str, variables: Mapping[str, Any], *,
                                  timeout: float, **_: Any) -> str:
        return self._next()

    async def stream(self, id: str, variables: Mapping[str, Any], *, timeout: float,
                     **_: Any) -> AsyncIterator[str]:
        yield self._next()


async def emitted(loop: AgentLoop, question: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:
        out.append(message)

    await loop.run(AgentRequest(question=question), emit)
    return out


async def test_a_dialog_that_fails_still_reports_what_it_used() -> None:
    # two steps, then the one that asks for the answer with the tools withheld
    prompts = Reporting(("Thought: t\nAction: nothing\nArgs: {}",
                         {"in_token": 10, "out_token": 4, "model": "m1"}),
                        ("Thought: t\nAction: nothing\nArgs: {}",
                         {"in_token": 11, "out_token": 4, "model": "m1"}),
                        ("Thought: t\nAction: nothing\nArgs: {}",
                         {"in_token": 12, "out_token": 4, "model": "m2"}))
    loop = AgentLoop(prompts=prompts, tools=ToolSet, options=AgentOptions(max_iterations=2))
    messages = await emitted(loop, "q")
    assert messages[-1]["message_type"] == "error" and messages[-1]["end_of_dialog"]
    # summed; the model of the last answer
    assert {k: messages[-1][k] for k in ("in_token", "out_token", "model")} == {
        "in_token": 33, "out_token": 12, "model": "m2"}


async def test_a_model_that_reports_nothing_gives_no_counts() -> None:
    loop = AgentLoop(prompts=Reporting(("Thought: t\nFinal Answer: a", {})), tools=ToolSet)
    last = (await emitted(loop, "q"))[-1]
    assert (last["in_token"], last["out_token"], last["model"]) == (None, None, None)


async def test_each_dialog_has_its_own_count() -> None:
    usage = {"in_token": 5, "out_token": 3, "model": "m"}
    loop = AgentLoop(prompts=Reporting(("Thought: t\nFinal Answer: a", usage),
                                       ("Thought: t\nFinal Answer: b", usage)), tools=ToolSet)
    first, second = (await emitted(loop, "q"))[-1], (await emitted(loop, "q"))[-1]
    assert first["in_token"] == second["in_token"] == 5
