"""Each tool-calling strategy through the whole stack — agent, prompt and text-completion
services on the bus — with a scripted model: what the model is asked, and what the client
sees. The same dialog reads the same on the wire whichever strategy asked it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tests.agent.stack import TELL_JOKE, agent_stack, answer_of, observations
from tests.conftest import Backend
from toolmesh.agent.loop import AgentOptions
from toolmesh.llm import Completion, Rule, ScriptedLLM
from toolmesh.llm.chat import ToolCall
from toolmesh.llm.coalesce import OFF
from toolmesh.tools.services.joke import pick_joke

OPTIONS = AgentOptions(tool_timeout=5.0)
JOKE = f"Hey trustgraph! Here's a pun for you:\n\n{pick_joke('food', 'pun')}"


def step(**fields: Any) -> str:
    return json.dumps(fields)


def kinds(messages: list[dict[str, Any]]) -> list[str]:
    """The message types of a dialog, a streamed message once."""
    out: list[str] = []
    for m in messages:
        if not out or out[-1] != m["message_type"] or m["message_type"] not in (
                "thought", "answer"):
            out.append(m["message_type"])
    return out


@pytest.mark.parametrize("streaming", [False, True])
async def test_json_steps_are_constrained_and_read_like_any_dialog(
        backend: Backend, tmp_path: Path, streaming: bool) -> None:
    llm = ScriptedLLM(rules=[
        Rule(r"Result of tell-joke", step(thought="I have it.",
                                          final_answer="Here is one: \"tomato\" \\o/")),
        Rule(r"food joke", step(thought="The joke tool fits.", action="tell-joke",
                                arguments={"topic": "food"})),
    ], tool_calling="json", chunk_size=3)
    async with agent_stack(backend, tmp_path, llm, options=OPTIONS, coalescing=OFF) as s:
        await s.load_jokes()
        await s.put({("tool", "tell-joke"): {**TELL_JOKE, "arguments": [
            {**TELL_JOKE["arguments"][0], "required": True}]}})
        messages = await s.ask("A food joke, please", streaming=streaming)
    assert answer_of(messages) == 'Here is one: "tomato" \\o/'
    assert kinds(messages) == ["thought", "tool-call", "observation", "thought", "answer"]
    thoughts = "".join(m["content"] for m in messages if m["message_type"] == "thought")
    assert thoughts == "The joke tool fits.I have it."
    if streaming:  # three characters a chunk: the answer came in pieces, decoded as they came
        pieces = [m["content"] for m in messages if m["message_type"] == "answer"][:-1]
        assert len(pieces) > 3 and "".join(pieces) == 'Here is one: "tomato" \\o/'
    assert observations(messages) == [JOKE]
    first, second = llm.requests
    # every step: one object of a schema with a branch per tool and one for the answer, no
    # thought asked for (measured: a small model's thought leads it away from the tool)
    branches = first.response_schema["anyOf"]
    assert [b["properties"].get("action", {}).get("const") for b in branches] == [
        "tell-joke", None]
    assert all("thought" not in b["properties"] for b in branches)
    # the topic is one of the question's words or runs of words (grounding.py)
    topic = branches[0]["properties"]["arguments"]["properties"]["topic"]
    assert topic["type"] == "string" and "food" in topic["enum"] and "..." not in topic["enum"]
    assert "food joke" in topic["enum"] and "A food joke" not in topic["enum"]  # no "A ..."
    assert "tomato" not in topic["enum"]
    assert first.messages[0].role == "system" and "- tell-joke: Tell a joke on a given topic." \
        in first.messages[0].content
    # an example call made of the tool's documented values (its description's e.g.), never
    # a placeholder; no example answer to copy
    assert '- to call tell-joke: {"action": "tell-joke", "arguments": {"topic": ' \
        '"programming"}}' in first.messages[0].content
    assert "..." not in first.messages[0].content and "final_answer\": " not in \
        first.messages[0].content
    # the second step begins with the first (the server's prompt cache holds); the call is
    # sent back without its thought, then the result
    assert second.messages[:2] == first.messages
    assert json.loads(second.messages[2].content) == {
        "action": "tell-joke", "arguments": {"topic": "food"}}
    assert second.messages[3].content == f"Result of tell-joke: {JOKE}"
    # a reply that calls a tool is bound by the step's tokens, one that answers (it reached
    # "final_answer") by the model's own limit
    assert first.action_max_tokens == 1024 and first.max_tokens is None
    assert first.answer_marker == '"final_answer"' and first.temperature == 0.0


async def test_an_identical_call_is_not_run_again_and_the_model_may_answer_with_a_result(
        backend: Backend, tmp_path: Path) -> None:
    call = step(thought="again", action="tell-joke", arguments={"topic": "food"})
    llm = ScriptedLLM([call, call, step(answer_with_result_of="tell-joke")], tool_calling="json")
    async with agent_stack(backend, tmp_path, llm, options=OPTIONS) as s:
        await s.load_jokes()
        messages = await s.ask("A food joke")
    # the tool's own result is the answer, as the tool gave it
    assert answer_of(messages) == JOKE
    assert messages[-1]["tool_calls"] == 1  # the repeat was not run
    assert observations(messages)[1].startswith(JOKE) and "called with these arguments " \
        "before" in observations(messages)[1]
    last = llm.requests[-1]
    # the answer step: the question and the result, no tools (nor how to call them); the
    # answer itself, or a result
    assert "tell-joke" not in last.messages[0].content
    assert "(none: answer the question yourself)" in last.messages[0].content
    assert [m.content for m in last.messages[1:]] == [
        "A food joke", f"Result of tell-joke: {JOKE}\n\nYou have what the tools can give. "
                       "Give your final answer now. If a result above answers the question, "
                       "answer with it."]
    assert last.response_schema == {"anyOf": [
        {"type": "object", "properties": {"answer_with_result_of": {
            "type": "string", "enum": ["tell-joke"]}},
         "required": ["answer_with_result_of"], "additionalProperties": False},
        {"type": "object", "properties": {"final_answer": {"type": "string"}},
         "required": ["final_answer"], "additionalProperties": False}]}


async def test_a_call_that_brings_nothing_new_ends_in_an_answer_step(
        backend: Backend, tmp_path: Path) -> None:
    # two topics the joke service has no jokes for: the same catch-all joke twice
    llm = ScriptedLLM([step(thought="", action="tell-joke", arguments={"topic": "cars"}),
                       step(thought="", action="tell-joke", arguments={"topic": "boats"}),
                       step(final_answer="done")], tool_calling="json")
    async with agent_stack(backend, tmp_path, llm, options=OPTIONS) as s:
        await s.load_jokes()
        messages = await s.ask("Jokes")
    assert answer_of(messages) == "done" and messages[-1]["tool_calls"] == 2
    assert "the same result as an earlier call of tell-joke" in observations(messages)[1]
    assert "answer_with_result_of" in json.dumps(llm.requests[-1].response_schema)


async def test_a_reply_that_is_not_json_goes_back_to_the_model(backend: Backend,
                                                               tmp_path: Path) -> None:
    # a server that ignores the schema: words, or a fenced object the agent still reads
    llm = ScriptedLLM(["Sure! Let me think.",
                       "```json\n" + step(thought="ok", final_answer="42") + "\n```"],
                      tool_calling="json")
    async with agent_stack(backend, tmp_path, llm, options=OPTIONS) as s:
        messages = await s.ask("6 x 7?")
    assert answer_of(messages) == "42"
    assert observations(messages) == ["Error: your reply was not one JSON object"]


async def test_native_calls_run_together_and_are_answered_in_order(
        backend: Backend, tmp_path: Path) -> None:
    calls = Completion(text="Two jokes.", tool_calls=(
        ToolCall(id="a1", name="tell-joke", arguments='{"topic": "food"}'),
        ToolCall(id="b2", name="tell-joke", arguments='{"topic": "animals"}'),
        ToolCall(id="c3", name="tell-joke", arguments='{"topic": ')))
    llm = ScriptedLLM([calls, "Both told."], tool_calling="native")
    async with agent_stack(backend, tmp_path, llm, options=OPTIONS) as s:
        await s.load_jokes()
        messages = await s.ask("Two jokes, about food and animals")
    assert answer_of(messages) == "Both told."
    assert [m["arguments"] for m in messages if m["message_type"] == "tool-call"] == [
        {"topic": "food"}, {"topic": "animals"}, '{"topic": ']
    got = observations(messages)
    assert got[0] == JOKE and pick_joke("animals", "pun") in got[1]
    assert got[2].startswith("Error: the arguments are not valid JSON")
    first, second = llm.requests
    assert [t.name for t in first.tools] == ["tell-joke"] and first.tool_choice == "auto"
    assistant, *results = second.messages[2:]
    assert assistant.content == "Two jokes." and [c.id for c in assistant.tool_calls] == [
        "a1", "b2", "c3"]
    assert [(r.role, r.tool_call_id) for r in results] == [("tool", "a1"), ("tool", "b2"),
                                                           ("tool", "c3")]


async def test_at_the_step_limit_the_model_is_asked_once_for_its_answer(
        backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM([step(thought="", action="tell-joke", arguments={"topic": "food"}),
                       step(thought="", action="tell-joke", arguments={"topic": "animals"}),
                       step(final_answer="Two jokes it is.")], tool_calling="json")
    options = dataclasses.replace(OPTIONS, max_iterations=2)
    async with agent_stack(backend, tmp_path, llm, options=options) as s:
        await s.load_jokes()
        messages = await s.ask("Jokes")
    assert answer_of(messages) == "Two jokes it is."
    last = llm.requests[-1]
    assert "You have no steps left." in last.messages[-1].content
    assert "action" not in json.dumps(last.response_schema)  # the tools withheld


async def test_the_token_budget_ends_a_dialog_with_an_answer_step(
        backend: Backend, tmp_path: Path) -> None:
    call = step(thought="a long think " * 20, action="tell-joke", arguments={"topic": "food"})
    llm = ScriptedLLM([call, step(thought="", action="tell-joke", arguments={"topic": "x"}),
                       "not json at all"], tool_calling="json")
    options = dataclasses.replace(OPTIONS, token_budget=50)
    async with agent_stack(backend, tmp_path, llm, options=options) as s:
        await s.load_jokes()
        messages = await s.ask("Jokes")
    # one step, then the budget is spent: one answer step, and it failed too
    assert messages[-1]["message_type"] == "error"
    assert messages[-1]["error"]["type"] == "token-budget"
    assert "budget of 50 tokens" in messages[-1]["error"]["message"]
    assert len(llm.requests) == 2


async def test_a_workspace_setting_picks_the_strategy(backend: Backend, tmp_path: Path) -> None:
    # the scripted model says react, the workspace says json: json it is
    llm = ScriptedLLM([step(thought="", final_answer="from json")], tool_calling="react")
    async with agent_stack(backend, tmp_path, llm, options=OPTIONS) as s:
        await s.put({("settings", "workspace"): {"tool-calling": "json"}})
        messages = await s.ask("q")
    assert answer_of(messages) == "from json"
    assert llm.requests[0].response_schema is not None


async def test_the_tools_listing_says_how_tools_are_called_and_why(backend: Backend,
                                                                   tmp_path: Path) -> None:
    from toolmesh import RequestClient

    llm = ScriptedLLM(tool_calling="react")
    async with agent_stack(backend, tmp_path, llm, options=OPTIONS) as s:
        request_queue, response_queue = s.tools_queues
        async with RequestClient(await backend.connect(), request_queue=request_queue,
                                 response_queue=response_queue) as tools:
            before = (await tools.request({}, timeout=10))["tool_calling"]
            await s.put({("settings", "workspace"): {"tool-calling": "native"}})
            after = (await tools.request({}, timeout=10))["tool_calling"]
    assert before == {"tool_calling": "react", "source": "provider", "llm": llm.name,
                      "detail": f"{llm.name} follows the react protocol"}
    assert (after["tool_calling"], after["source"]) == ("native", "workspace")
