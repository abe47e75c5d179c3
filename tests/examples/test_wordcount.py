"""examples/wordcount through the whole agent stack: the example service, its declared
items, the offline demo model's ``use TOOL with {...}`` and the example's LLM script."""

from __future__ import annotations

from pathlib import Path
from typing import Any


from tests.agent.stack import agent_stack, answer_of, observations
from tests.conftest import Backend
from tests.examples.loading import EXAMPLES, example_module
from toolmesh.llm import ScriptedLLM
from toolmesh.llm.demo import demo_llm


async def ask_with(backend: Backend, tmp_path: Path, llm: ScriptedLLM,
                   question: str) -> list[dict[str, Any]]:
    """One dialog with the example's service running on the stack's bus and the items its
    definition declares stored."""
    word_count = example_module("wordcount", "wordtools").WordCount
    async with agent_stack(backend, tmp_path, llm, joke=False) as stack:
        topic = backend.topic("wc")
        queues = {"request_queue": f"request:tg:{topic}", "response_queue": f"response:tg:{topic}"}
        async with word_count(await backend.connect(), **queues):
            await stack.put(word_count.definition.items(**queues))
            return await stack.ask(question)


async def test_the_demo_model_uses_the_tool_it_is_told_to(memory: Backend, tmp_path: Path) -> None:
    messages = await ask_with(memory, tmp_path, demo_llm(),
                              'Use count-words with {"text": "the quick brown fox"}')
    assert observations(messages) == ["4 words"]
    assert answer_of(messages) == "4 words"
    thoughts = " ".join(m["content"] for m in messages if m["message_type"] == "thought")
    assert "[offline demo model]" in thoughts and "count-words" in thoughts


async def test_the_demo_model_passes_a_failed_call_on(memory: Backend, tmp_path: Path) -> None:
    # "text" is required: the agent refuses the call before it reaches the service
    messages = await ask_with(memory, tmp_path, demo_llm(), 'use count-words with {"txt": "a"}')
    assert observations(messages)[0].startswith("Error: invalid arguments for 'count-words'")
    assert answer_of(messages).startswith("The count-words tool failed: Error: invalid arguments")


async def test_the_demo_model_says_when_the_named_tool_is_not_offered(
        memory: Backend, tmp_path: Path) -> None:
    messages = await ask_with(memory, tmp_path, demo_llm(), 'use count-lines with {"text": "a"}')
    assert observations(messages) == []
    assert answer_of(messages).startswith("The tool count-lines is not offered to me")


async def test_the_examples_llm_script_drives_the_dialog(memory: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM.from_file(EXAMPLES / "wordcount" / "llm.json")
    messages = await ask_with(memory, tmp_path, llm,
                              'How many words are in "the quick brown fox jumps"?')
    assert observations(messages) == ["5 words"]
    assert answer_of(messages) == "The text has 5 words."
    # the first prompt offered the tool as its definition declares it
    assert "Tool: count-words\nDescription: Count the words in a text" in llm.prompts[0][1]
    assert "- text (string, required) — The text whose words to count" in llm.prompts[0][1]
