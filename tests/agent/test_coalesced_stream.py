"""A streamed dialog through the agent on the memory bus: with coalescing the client gets
fewer messages, and they say the same — the same text per message, in the same order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from itertools import groupby
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.agent.stack import agent_stack, answer_of
from tests.agent.test_streaming import chunked, cuts, protocol_replies
from tests.conftest import Backend
from toolmesh.agent.loop import AgentLoop, AgentOptions
from toolmesh.agent.toolset import ToolSet
from toolmesh.llm import Rule, ScriptedLLM
from toolmesh.llm.coalesce import OFF, Coalescing
from toolmesh.schema.agent import parse_request

THOUGHT = "I should look at this from a few sides before I answer, since it matters."
ANSWER = " ".join(f"Point {i}: the quick brown fox jumps over the lazy dog." for i in range(20))
STEP = 'Thought: a joke first\nAction: tell-joke\nArgs: {"topic": "food"}'


async def dialog(backend: Backend, tmp_path: Path, coalescing: Coalescing) -> list[dict[str, Any]]:
    llm = ScriptedLLM([STEP], rules=[Rule(r"Observation: ", f"Thought: {THOUGHT}\n"
                                                            f"Final Answer: {ANSWER}")])
    async with agent_stack(backend, tmp_path, llm, coalescing=coalescing) as s:
        await s.load_jokes()
        return await s.ask("Tell me a joke, then think", streaming=True)


def said(messages: list[dict[str, Any]]) -> list[tuple[str, str, str, bool]]:
    """What a TrustGraph client reads: per message (in order), its type, its whole content,
    and whether it ended; consecutive chunks of one message joined."""
    out = []
    for (kind, id), group in groupby(messages, key=lambda m: (m["message_type"], m["message_id"])):
        chunks = list(group)
        out.append((kind, id, "".join(m["content"] for m in chunks),
                    chunks[-1]["end_of_message"]))
    return out


def ids_renamed(messages: list[dict[str, Any]]) -> list[tuple[str, str, str, bool]]:
    """:func:`said`, with the message ids numbered by first appearance (each run makes new
    ones)."""
    order: dict[str, str] = {}
    for m in messages:
        order.setdefault(m["message_id"], str(len(order)))
    return [(kind, order[id], text, end) for kind, id, text, end in said(messages)]


async def test_coalescing_sends_fewer_messages_that_say_the_same(memory: Backend,
                                                                 tmp_path: Path) -> None:
    per_word = await dialog(memory, tmp_path, OFF)
    # a window no test outlasts: only the first piece and the end decide what goes out
    coalesced = await dialog(memory, tmp_path / "c", Coalescing(window=3600))
    assert answer_of(per_word) == answer_of(coalesced) == ANSWER

    assert ids_renamed(coalesced) == ids_renamed(per_word)
    assert [kind for kind, *_ in said(coalesced)] == [
        "thought", "tool-call", "observation", "thought", "answer"]
    answers = [m for m in coalesced if m["message_type"] == "answer"]
    assert len(answers) < 5 and answers[-1]["end_of_dialog"] is True
    assert len(coalesced) < len(per_word) / 5, (len(coalesced), len(per_word))


# -- any reply, any chunking, any timing: the same messages, joined ---------------------------

class ChunkedPrompts:
    """Prompts whose LLM streams ``chunks``, each after a pause (tenths of a millisecond)."""

    def __init__(self, chunks: list[str], pauses: list[int]) -> None:
        self.chunks = chunks
        self.pauses = pauses

    async def render_and_complete(self, id: str, variables: Mapping[str, Any], *,
                                  timeout: float, **_: Any) -> str:
        return "".join(self.chunks)

    async def stream(self, id: str, variables: Mapping[str, Any], *, timeout: float,
                     **_: Any) -> AsyncIterator[str]:
        for chunk, pause in zip(self.chunks, self.pauses + [0] * len(self.chunks)):
            if pause:
                await asyncio.sleep(pause / 10_000)
            yield chunk


async def one_step(chunks: list[str], pauses: list[int],
                   coalescing: Coalescing) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:
        messages.append(message)

    loop = AgentLoop(prompts=ChunkedPrompts(chunks, pauses), tools=ToolSet,
                     options=AgentOptions(max_iterations=1, coalescing=coalescing))
    await loop.run(parse_request({"question": "q", "streaming": True}), emit)
    return messages


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=protocol_replies(), cuts=cuts,
       pauses=st.lists(st.sampled_from([0, 0, 0, 2, 10]), max_size=30),
       window=st.sampled_from([0.0005, 0.002, 3600.0]))
def test_any_reply_coalesced_says_what_it_says_piece_by_piece(
        text: str, cuts: list[int], pauses: list[int], window: float) -> None:
    chunks = chunked(text, cuts)

    async def both() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return (await one_step(chunks, pauses, OFF),
                await one_step(chunks, pauses, Coalescing(window=window)))

    per_piece, coalesced = asyncio.run(both())
    assert ids_renamed(coalesced) == ids_renamed(per_piece)
    assert len(coalesced) <= len(per_piece)
    assert coalesced[-1]["end_of_dialog"] and per_piece[-1]["end_of_dialog"]
