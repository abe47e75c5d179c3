"""The agent service end to end on every bus: real config, text-completion, prompt and tool
services, a scripted LLM."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.agent.stack import TELL_JOKE, agent_stack, answer_of, observations
from tests.conftest import Backend
from toolmesh import DynamicToolService
from toolmesh.agent.loop import AgentOptions
from toolmesh.llm import Rule, ScriptedLLM
from toolmesh.llm.coalesce import OFF
from toolmesh.tools.services.joke import pick_joke

#: after a step, end with the last observation
FINISH = Rule(r"\nObservation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")
JOKE_FOOD = 'Thought: a joke is needed\nAction: tell-joke\nArgs: {"topic": "food"}'


@pytest.mark.parametrize("streaming", [False, "coalesced", "per word"])
async def test_a_dialog_that_calls_the_joke_tool_service(backend: Backend, tmp_path: Path,
                                                         streaming: bool | str) -> None:
    llm = ScriptedLLM([JOKE_FOOD], rules=[Rule(r"Observation: (?P<obs>.*?)\n\nYour reply",
                                               "Thought: I have it\nFinal Answer: {obs}")])
    async with agent_stack(backend, tmp_path, llm,
                           coalescing=OFF if streaming == "per word" else None) as s:
        await s.load_jokes()
        messages = await s.ask("Tell me a joke about food", user="alice",
                               streaming=bool(streaming))
    expected = f"Hey alice! Here's a pun for you:\n\n{pick_joke('food', 'pun')}"
    assert observations(messages) == [expected]
    assert answer_of(messages) == expected
    kinds = [m["message_type"] for m in messages]
    assert kinds[0] == "thought" and "observation" in kinds and kinds[-1] == "answer"
    if streaming:
        # thoughts and the answer arrive in chunks that join to the whole text
        # (a chunk per word, or fewer when they are gathered), then an empty last one
        answer_chunks = [m["content"] for m in messages if m["message_type"] == "answer"]
        assert len(answer_chunks) > (2 if streaming == "per word" else 1)
        assert "".join(answer_chunks) == expected and answer_chunks[-1] == ''
        first_thought = [m for m in messages if m["message_type"] == "thought"
                         and m["message_id"] == messages[0]["message_id"]]
        assert "".join(m["content"] for m in first_thought) == "a joke is needed"
        assert [m["end_of_message"] for m in first_thought][-1] is True
    assert all(not m["end_of_dialog"] for m in messages[:-1])


async def test_the_prompt_lists_every_tool_with_its_arguments(backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(["Thought: nothing to do\nFinal Answer: ok"])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.load_jokes()
        await s.put({
            ("tool", "summarise"): {"type": "prompt", "name": "summarise", "template": "summary",
                                    "description": "Summarise a text in one sentence",
                                    "arguments": [{"name": "text", "type": "string",
                                                   "description": "The text to summarise"},
                                                  {"name": "words", "type": "integer",
                                                   "description": "Most words", "required": False}]},
            ("tool", "ask-llm"): {"type": "text-completion", "name": "ask-llm",
                                  "description": "Ask the language model directly"},
            ("tool", "clock"): {"type": "tool-service", "name": "clock", "service": "joke-service",
                                "description": "Tell the time"}})
        assert answer_of(await s.ask("What can you do?")) == "ok"
    prompt = llm.prompts[0][1]
    # TrustGraph's arguments have no "required": declared arguments are optional unless marked
    assert ("Tool: tell-joke\nDescription: Tell a joke on a given topic\nArguments:\n"
            "- topic (string) — The topic for the joke (e.g., programming, animals, food)") in prompt
    assert ("Tool: summarise\nDescription: Summarise a text in one sentence\nArguments:\n"
            "- text (string) — The text to summarise\n- words (integer) — Most words") in prompt
    assert ("Tool: ask-llm\nDescription: Ask the language model directly\nArguments:\n"
            "- question (string, required) — ") in prompt
    assert "Tool: clock\nDescription: Tell the time\nArguments: none" in prompt
    assert "Question: What can you do?" in prompt


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(("reply", "complaint"), [
    ('Thought: t\nAction: teleport\nArgs: {}', "Error: there is no tool 'teleport'. Available tools: 'tell-joke'."),
    ('Thought: t\nAction: tell-joke\nArgs: {"topic": "food",}', "Error: your reply could not be parsed: the Args of 'tell-joke' are not valid JSON"),
    ("I will just chat", "Error: your reply could not be parsed: the reply has neither 'Action:' nor 'Final Answer:'"),
    ('Thought: t\nAction: tell-joke\nArgs: {"topic": 7}', "Error: invalid arguments for 'tell-joke': $.topic: must be string, not integer"),
    ('Thought: t\nAction: tell-joke\nArgs: ["food"]', "Error: invalid arguments for 'tell-joke': Args must be a JSON object, not array"),
])
async def test_the_models_mistakes_become_observations_and_the_loop_goes_on(
        backend: Backend, tmp_path: Path, streaming: bool, reply: str, complaint: str) -> None:
    llm = ScriptedLLM([reply], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.load_jokes()
        messages = await s.ask("joke please", streaming=streaming)
    assert observations(messages)[0].startswith(complaint), observations(messages)
    assert answer_of(messages).startswith(complaint)  # the LLM saw it and answered with it
    assert complaint in llm.prompts[1][1]


async def test_a_tools_error_and_timeout_become_error_observations(backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(['Thought: t\nAction: tell-joke\nArgs: {"topic": "x"}',
                       'Thought: t\nAction: slow\nArgs: {}'],
                      rules=[Rule(r"Observation: Error: the tool 'slow'(?P<rest>[^\n]*)",
                                  "Thought: both failed\nFinal Answer: the tool 'slow'{rest}")])
    async with agent_stack(backend, tmp_path, llm, options=AgentOptions(tool_timeout=0.5)) as s:
        await s.load_jokes()
        await s.put({("tool", "tell-joke"): {**TELL_JOKE, "style": "limerick"},
                     ("tool-service", "nobody"): {"id": "nobody", "request-queue": f"request:tg:{s.backend.topic()}",
                                                  "response-queue": f"response:tg:{s.backend.topic()}"},
                     ("tool", "slow"): {"type": "tool-service", "name": "slow", "service": "nobody",
                                        "description": "never answers"}})
        messages = await s.ask("go")
    first, second = observations(messages)
    assert first == "Error: unknown joke style 'limerick'; known styles: pun, dad-joke, one-liner"
    assert second == "Error: the tool 'slow' did not answer within 0.5 s"
    assert answer_of(messages) == "the tool 'slow' did not answer within 0.5 s"


async def test_too_many_steps_end_the_dialog_with_an_error(backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(default=JOKE_FOOD)
    async with agent_stack(backend, tmp_path, llm, options=AgentOptions(max_iterations=3)) as s:
        await s.load_jokes()
        messages = await s.ask("loop forever")
    assert len(observations(messages)) == 3
    last = messages[-1]
    assert last["message_type"] == "error" and last["end_of_dialog"] is True
    assert last["error"]["type"] == "max-iterations" and "3 steps" in last["error"]["message"]


async def test_an_unreachable_llm_ends_the_dialog_with_an_error(backend: Backend, tmp_path: Path) -> None:
    async with agent_stack(backend, tmp_path, ScriptedLLM()) as s:  # no answers at all
        messages = await s.ask("hello")
    assert len(messages) == 1
    assert messages[0]["message_type"] == "error" and messages[0]["end_of_dialog"]
    assert messages[0]["error"]["type"] == "llm-error"
    assert "no response for this prompt" in messages[0]["error"]["message"]


async def test_a_bad_request_gets_an_error_message(backend: Backend, tmp_path: Path) -> None:
    async with agent_stack(backend, tmp_path, ScriptedLLM()) as s:
        messages = [m async for m in s.client.stream({"question": ""}, timeout=10)]
    assert messages[0]["message_type"] == "error" and messages[0]["end_of_dialog"] is True
    assert messages[0]["error"]["type"] == "bad-request"


async def test_groups_and_states_choose_the_tools(backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(default="Thought: t\nFinal Answer: ok")
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.load_jokes()
        await s.put({("tool", "math"): {**TELL_JOKE, "name": "add", "group": ["math"]},
                     ("tool", "later"): {**TELL_JOKE, "name": "follow-up",
                                         "applicable-states": ["joked"]},
                     ("tool", "tell-joke"): {**TELL_JOKE, "state": "joked"}})
        await s.ask("q")
        await s.ask("q", group=["math"])
        await s.ask("q", group=["math", "default"], state="joked")
    default, math, both = (p for _, p in llm.prompts)
    assert "Tool: tell-joke" in default and "Tool: add" not in default
    assert "Tool: follow-up" not in default
    assert "Tool: add" in math and "Tool: tell-joke" not in math
    assert all(f"Tool: {n}" in both for n in ("add", "tell-joke", "follow-up"))


async def test_using_a_tool_moves_the_dialog_to_its_state(backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM([JOKE_FOOD, "Thought: t\nFinal Answer: done"])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.load_jokes()
        await s.put({("tool", "tell-joke"): {**TELL_JOKE, "state": "joked"},
                     ("tool", "later"): {**TELL_JOKE, "name": "follow-up",
                                         "applicable-states": ["joked"]}})
        assert answer_of(await s.ask("a joke about food")) == "done"
    assert "Tool: follow-up" not in llm.prompts[0][1]
    assert "Tool: follow-up" in llm.prompts[1][1]


async def test_config_changes_apply_to_a_running_agent(backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(default="Thought: t\nFinal Answer: ok")
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.ask("before")
        await s.load_jokes()
        await s.ask("added")
        await s.put({("tool", "tell-joke"): {**TELL_JOKE, "description": "Jokes, new and improved"}})
        await s.ask("changed")
        # a tool that cannot be built is not offered (it could only fail), and says why
        await s.put({("tool", "tell-joke"): {**TELL_JOKE, "service": "missing-service"}})
        await s.ask("broken")
        assert "tool/tell-joke" in s.agent.toolset.problems
        (status,) = s.agent.toolset.statuses()
        assert (status.key, status.status) == ("tell-joke", "not-offered")
        assert "no config item tool-service/missing-service" in str(status.reason)
        await s.delete(("tool", "tell-joke"))
        await s.ask("deleted")
    before, added, changed, broken, deleted = (p for _, p in llm.prompts)
    assert "Tool: tell-joke" not in before
    assert "Description: Tell a joke on a given topic" in added
    assert "Description: Jokes, new and improved" in changed
    assert "Tool: tell-joke" not in broken
    assert "Tool: tell-joke" not in deleted


class Gated(DynamicToolService):
    """A tool service that holds each call until the test opens the gate."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def invoke(self, user: str, config: dict[str, Any], arguments: dict[str, Any]) -> str:
        self.entered.set()
        await self.gate.wait()
        return "opened"


async def test_a_change_in_the_middle_of_a_dialog_applies_from_the_next_step(
        backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(['Thought: t\nAction: wait\nArgs: {}'], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm) as s:
        topic = backend.topic("gated")
        async with Gated(s.agent.bus, topic=topic) as gated:
            await s.load_jokes()
            await s.put({("tool-service", "gated"): {
                             "id": "gated", "request-queue": f"non-persistent://tg/request/{topic}",
                             "response-queue": f"non-persistent://tg/response/{topic}"},
                         ("tool", "wait"): {"type": "tool-service", "name": "wait",
                                            "service": "gated", "description": "waits"}})
            dialog = asyncio.ensure_future(s.ask("joke"))
            async with asyncio.timeout(10):
                await gated.entered.wait()  # the dialog is now in the middle of a step
            await s.put({("tool", "extra"): {**TELL_JOKE, "name": "extra"}})
            gated.gate.set()
            messages = await asyncio.wait_for(dialog, 20)
    assert answer_of(messages) == "opened"
    assert "Tool: extra" not in llm.prompts[0][1] and "Tool: extra" in llm.prompts[1][1]


async def test_many_dialogs_at_once_each_with_its_own_history(backend: Backend, tmp_path: Path) -> None:
    topics = ["food", "animals", "programming", "anything"] * 10
    llm = ScriptedLLM(rules=[
        Rule(r"Question: about (?P<topic>\w+)\n.*Observation: (?P<obs>.*?)\n\nYour reply",
             "Thought: done\nFinal Answer: {topic}: {obs}"),
        Rule(r"Question: about (?P<topic>\w+)",
             'Thought: t\nAction: tell-joke\nArgs: {"topic": "{topic}"}')])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.load_jokes()
        results = await asyncio.gather(*[s.ask(f"about {t}", user=f"u{i}")
                                         for i, t in enumerate(topics)])
    for i, (topic, messages) in enumerate(zip(topics, results)):
        assert answer_of(messages) == (f"{topic}: Hey u{i}! Here's a pun for you:\n\n"
                                       f"{pick_joke(topic, 'pun')}")


async def test_history_from_the_request_is_shown_to_the_llm(backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(["Thought: t\nFinal Answer: ok"])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.ask("and now?", history=[{"thought": "earlier", "action": "tell-joke",
                                          "arguments": {"topic": "ü"}, "observation": "ha"}])
    assert ('Thought: earlier\nAction: tell-joke\nArgs: {"topic": "ü"}\nObservation: ha'
            in llm.prompts[0][1])


async def test_prompt_and_text_completion_tools(backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(rules=[
        Rule(r"^SUMMARISE: (?P<text>.*)$", "short version of {text}"),
        Rule(r"^What is 6x7\?$", "42"),
        Rule(r"Observation: short version of (?P<a>[^\n]*)\n.*Observation: (?P<b>[^\n]*)\n\nYour reply",
             "Thought: t\nFinal Answer: {a} / {b}"),
        Rule(r"Observation: short version",
             'Thought: t\nAction: ask-llm\nArgs: {"question": "What is 6x7?"}'),
        Rule(r"Question: go", 'Thought: t\nAction: summarise\nArgs: {"text": "a long story"}')])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.put({("prompt", "summary"): {"prompt": "SUMMARISE: {{text}}"},
                     ("tool", "summarise"): {"type": "prompt", "name": "summarise", "template": "summary",
                                             "description": "Summarise",
                                             "arguments": [{"name": "text", "type": "string",
                                                            "description": "text"}]},
                     ("tool", "ask-llm"): {"type": "text-completion", "name": "ask-llm",
                                           "description": "Ask the LLM"}})
        messages = await s.ask("go")
    assert observations(messages) == ["short version of a long story", "42"]
    assert answer_of(messages) == "a long story / 42"


async def test_a_call_of_a_tool_whose_mcp_server_is_down_is_told_why(
        backend: Backend, tmp_path: Path) -> None:
    # the tool is left out of the offer (its server cannot be reached); a model that calls it
    # anyway learns why, not that there is no such tool
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = ScriptedLLM(["Thought: t\nAction: clock\nArgs: {}",
                       "Thought: t\nFinal Answer: no clock"])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.load_jokes()
        await s.put({("mcp", "clock"): {"url": f"http://127.0.0.1:{port}/mcp",
                                        "remote-name": "now"},
                     ("tool", "clock"): {"type": "mcp-tool", "name": "clock",
                                         "description": "Tell the time", "mcp-tool": "clock"}})
        messages = await s.ask("What time is it?")
    (observation,) = observations(messages)
    assert observation.startswith(
        f"Error: the tool 'clock' cannot be used now: cannot connect to MCP server 'clock' at "
        f"http://127.0.0.1:{port}/mcp: it cannot be reached"), observation
    assert observation.endswith("Available tools: 'tell-joke'.")
