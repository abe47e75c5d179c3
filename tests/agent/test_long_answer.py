"""A long streamed answer does not hold up the other dialogs of the agent (issue 12, item 6)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.agent.stack import agent_stack, answer_of
from tests.agent.steady_llm import SteadyLLM
from tests.conftest import Backend
from toolmesh.bus.memory import new_memory_url
from toolmesh.llm import Rule

#: about 1 MB of answer in lines of prose, as a model would write it
LINE = "The quick brown fox jumps over the lazy dog, and then it does so again. "
LONG_ANSWER = "\n".join(f"{i}. {(LINE * 2).strip()}" for i in range(7_000))


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_trivial_dialog_finishes_while_a_1_mb_answer_streams(tmp_path: Path) -> None:
    """Before, the agent re-read the whole text on every chunk; it fell behind the model, and
    parsed the chunks that piled up meanwhile in one go while every other dialog waited: the
    long dialog ended first (after 20 s), the trivial one after it."""
    assert len(LONG_ANSWER) > 1_000_000
    long_reply = "Thought: here it comes\nFinal Answer: " + LONG_ANSWER
    llm = SteadyLLM([Rule(r"Question: write a lot", long_reply),
                     Rule(r"Question: say ok", "Thought: easy\nFinal Answer: ok")],
                    chars_per_second=300_000, chunk_size=256)
    backend = Backend("memory", new_memory_url())
    finished: list[str] = []
    try:
        async with agent_stack(backend, tmp_path, llm, joke=False) as s:
            halfway = asyncio.Event()
            messages: list[dict[str, Any]] = []

            async def long_dialog() -> None:
                received = 0
                async for m in s.client.stream({"question": "write a lot", "streaming": True},
                                               timeout=600):
                    messages.append(m)
                    if m["message_type"] == "answer":
                        received += len(m["content"])
                        if received > len(LONG_ANSWER) // 2:
                            halfway.set()
                finished.append("long")

            long = asyncio.create_task(long_dialog())
            async with asyncio.timeout(600):
                # halfway, each chunk cost the parser before half a megabyte of parsing
                await halfway.wait()
                trivial = await s.ask("say ok", streaming=True)
                finished.append("trivial")
                await long
    finally:
        for bus in backend.buses:
            await bus.close()
    assert answer_of(trivial) == "ok"
    assert answer_of(messages) == LONG_ANSWER
    assert "".join(m["content"] for m in messages if m["message_type"] == "answer") == LONG_ANSWER
    # the trivial dialog began when half of the long answer was out
    assert finished == ["trivial", "long"]
