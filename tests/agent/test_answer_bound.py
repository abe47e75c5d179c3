"""Answers are never cut silently (issue 41, item 4): a step that calls tools is bound by
``max_step_tokens``, its answer by the model's limit (or ``max_answer_tokens``); an answer cut
all the same ends with a note and ``"cut": true``. Against an OpenAI-compatible server over
real HTTP (the test server), in each strategy, with a server that streams no usage — as
llama-cpp-python does — so the tokens are counted too (item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent.stack import agent_stack, answer_of, observations
from tests.conftest import Backend
from tests.llm.openai_server import Answer, OpenAITestServer
from toolmesh.agent.loop import AgentOptions
from toolmesh.bus.memory import new_memory_url
from toolmesh.llm.openai import OpenAICompatible

#: a 3,000-word answer, as a model writes one
LONG = " ".join(f"word{i}" for i in range(3000))
BOUND = AgentOptions(tool_timeout=5.0, max_step_tokens=64)


def memory() -> Backend:
    return Backend("memory", new_memory_url())


async def dialog(answers: list[Answer], *, strategy: str, tmp_path: Path,
                 options: AgentOptions = BOUND, question: str = "Write a long essay",
                 streaming: bool = True, default: Answer | None = None,
                 ) -> tuple[list[dict], OpenAITestServer]:  # type: ignore[type-arg]
    """One dialog against a server that acts as llama-cpp-python does (and stops a whole
    answer at ``max_tokens``); ``answers`` in turn, then ``default``."""
    backend = memory()
    async with OpenAITestServer(answers, default=default, kind="llama-cpp-python",
                                honor_max_tokens=True) as server, \
            OpenAICompatible(base_url=server.base_url, model="m") as llm:
        options = BOUND if options is BOUND else options
        async with agent_stack(backend, tmp_path, llm,  # type: ignore[arg-type]
                               options=_with(options, strategy)) as s:
            await s.load_jokes()
            messages = await s.ask(question, streaming=streaming)
    for bus in backend.buses:
        await bus.close()
    return messages, server


def _with(options: AgentOptions, strategy: str) -> AgentOptions:
    import dataclasses

    return dataclasses.replace(options, tool_calling=strategy)


@pytest.mark.parametrize("strategy,reply", [
    ("json", json.dumps({"final_answer": LONG})),
    ("react", f"Thought: here it is\nFinal Answer: {LONG}"),
    ("native", LONG),
])
@pytest.mark.parametrize("streaming", [True, False])
async def test_a_3000_word_answer_reaches_the_client_whole(
        tmp_path: Path, strategy: str, reply: str, streaming: bool) -> None:
    messages, server = await dialog([], default=Answer(text=reply, usage=False),
                                    strategy=strategy, tmp_path=tmp_path, streaming=streaming)
    assert answer_of(messages) == LONG
    last = messages[-1]
    assert "cut" not in last
    # the step may have called a tool: its reply is bound by the step's 64 tokens until it is
    # an answer, and the answer by the model's own limit (no max_tokens sent)
    asked = [r for r in server.requests if r.body.get("max_tokens") != 1]
    if strategy == "native":
        # llama-cpp-python cannot stream a request with tools: it is asked whole, within the
        # step's bound, and once more within the answer's when the reply is an answer it cut
        # (the test server stops at max_tokens words, as a real server does)
        assert [r.body.get("max_tokens") for r in asked] == [64, None]
    else:
        assert asked[0].body.get("max_tokens") is None and asked[0].body["stream"] is True
    # the server reported no usage: the dialog's tokens were counted (the prompt's by asking
    # for one token; whole answers of this server report none at all: estimated)
    assert last["in_token"] and last["out_token"] >= 3000
    assert last["token_source"] == ("estimated" if strategy == "native" else "counted")


async def test_a_runaway_tool_call_is_cut_at_the_steps_bound(tmp_path: Path) -> None:
    runaway = json.dumps({"action": "tell-joke", "arguments": {"topic": LONG}})
    messages, server = await dialog(
        [Answer(text=runaway, usage=False), Answer(text=json.dumps({"final_answer": "ok"}))],
        strategy="json", tmp_path=tmp_path, question="a joke about word0")
    assert answer_of(messages) == "ok"
    assert observations(messages)[0].startswith("Error: your reply was cut off")
    assert messages[-1]["tool_calls"] == 0  # the cut call never ran


@pytest.mark.parametrize("strategy,reply", [
    ("json", json.dumps({"final_answer": LONG})),
    ("react", f"Thought: here it is\nFinal Answer: {LONG}"),
])
async def test_an_answer_cut_all_the_same_says_so(tmp_path: Path, strategy: str,
                                                  reply: str) -> None:
    options = AgentOptions(tool_timeout=5.0, max_step_tokens=64, max_answer_tokens=200)
    messages, server = await dialog([Answer(text=reply)], strategy=strategy,
                                    tmp_path=tmp_path, options=options)
    last = messages[-1]
    answer = answer_of(messages)
    assert last["cut"] is True
    assert answer.endswith("[The answer was cut short here: the model reached its limit of "
                           "200 tokens (--max-answer-tokens).]")
    assert LONG.startswith(answer.split("\n\n[The answer")[0].split("Final Answer: ")[-1]
                           .strip())
    # the test server ignores max_tokens, as some do: the provider cut the stream itself
    assert [r.body.get("max_tokens") for r in server.requests
            if r.body.get("max_tokens") != 1][:1] == [200]
    streamed = "".join(m["content"] for m in messages if m["message_type"] == "answer")
    assert streamed == answer  # the note reached the streaming client too
