"""Arguments grounded in the dialog (issue 41, item 3): placeholders, description examples and
copied descriptions are caught before the call; the spans and numbers a json step's values are
held to."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.named import tool
from tests.agent.stack import TELL_JOKE, agent_stack, answer_of, observations
from tests.conftest import Backend
from toolmesh.agent.grounding import held_schema, numbers, spans, ungrounded
from toolmesh.agent.strategies.examples import example_arguments
from toolmesh.llm import ScriptedLLM




CONVERT = tool("convert-currency", "Convert an amount of money between currencies",
               {"name": "amount", "type": "number", "description": "The amount"},
               {"name": "source", "type": "string", "description": "Convert from, e.g. USD"},
               {"name": "target", "type": "string", "description": "Convert to, e.g. EUR"},
               {"name": "note", "type": "string", "description": "Why the money moves"},
               {"name": "rate", "type": "string", "enum": ["USD", "spot"],
                "description": "Which rate, e.g. USD"})


@pytest.mark.parametrize("value", ["...", "…", "", "???", "string", "STRING", "text",
                                   "<currency>", "{source}", "[code]", "your_code_here",
                                   "YOUR CURRENCY", "code here", "number", "null"])
def test_a_placeholder_is_caught_whatever_the_question(value: str) -> None:
    problems = ungrounded(CONVERT, {"amount": 5, "source": value}, "Convert 5 GBP to JPY")
    assert problems and problems[0].startswith("$.source: ") and "placeholder" in problems[0]


def test_a_description_example_the_question_does_not_say_is_caught() -> None:
    assert ungrounded(CONVERT, {"source": "USD", "target": "EUR"}, "Convert 5 GBP to JPY") == [
        "$.source: 'USD' is an example from the tool's description, and the question does "
        "not say it",
        "$.target: 'EUR' is an example from the tool's description, and the question does "
        "not say it"]
    # said in the question (or a result), the same value is the user's own
    assert ungrounded(CONVERT, {"source": "usd", "target": "EUR"},
                      "What are 5 USD in EUR?") == []
    # an enum member is the tool's own choice, even when a description names it
    assert ungrounded(CONVERT, {"rate": "USD"}, "Convert 5 GBP to JPY") == []


def test_names_and_copied_descriptions_are_caught() -> None:
    said = "Move 5 GBP to JPY for the rent"
    assert "name from the tool's definition" in ungrounded(CONVERT, {"note": "source"}, said)[0]
    assert "copied from the tool's description" in ungrounded(
        CONVERT, {"note": "Why the money moves"}, said)[0]
    assert "copied from the tool's description" in ungrounded(
        CONVERT, {"note": "convert an amount of money"}, said)[0]
    # the user's own words pass, however they read
    assert ungrounded(CONVERT, {"note": "for the rent", "source": "GBP"}, said) == []
    # nested values are checked too, each at its path
    assert ungrounded(CONVERT, {"note": ["rent", "..."]}, said) == [
        "$.note[1]: '...' is a placeholder, not a value"]


def test_spans_and_numbers_are_the_dialogs_own() -> None:
    found = spans(["Count the words of: the quick brown fox. Then say 'hi there'!"])
    assert "the quick brown fox" in found and "hi there" in found and "fox" in found
    assert "fox Then" not in found  # a span stays within a sentence
    assert numbers(["Roll two 20-sided dice, minus 3, and 1,250.50 more"]) == [
        20.0, -3.0, 1250.5, 2.0]
    schema = held_schema({"type": "object", "properties": {
        "n": {"type": "integer", "maximum": 10}, "x": {"type": "number"},
        "s": {"type": "string", "minLength": 1}, "d": {"type": "string", "format": "date"},
        "list": {"type": "array", "items": {"type": "string"}}}},
        ["a", "b"], [2.0, 20.0, 2.5])
    props = schema["properties"]
    assert props["n"]["enum"] == [2] and props["x"]["enum"] == [2.0, 20.0, 2.5]
    assert props["s"] == {"type": "string", "enum": ["a", "b"]}
    assert props["list"]["items"]["enum"] == ["a", "b"] and "enum" not in props["d"]
    # a dialog without numbers leaves numbers free
    assert "enum" not in held_schema({"type": "number"}, ["a"], [])


def test_a_tool_is_not_fed_its_own_results() -> None:
    from toolmesh.agent.grounding import dialog_numbers, dialog_spans
    from toolmesh.agent.transcript import CallRecord, Transcript, Turn

    transcript = Transcript(question="Split 200 between 5 people", turns=[Turn(calls=(
        CallRecord(id="1", name="split-bill", arguments={}, observation="Each pays 40"),
        CallRecord(id="2", name="weather", arguments={}, observation="Sunny at 25"),))])
    assert 40.0 not in dialog_numbers(transcript, tool="split-bill")
    assert dialog_numbers(transcript, tool="split-bill") == [200.0, 5.0, 25.0]
    assert 40.0 in dialog_numbers(transcript, tool="weather")
    assert "Sunny" in dialog_spans(transcript, tool="split-bill")
    assert "Each pays" not in dialog_spans(transcript, tool="split-bill")


def test_example_calls_are_made_of_documented_values_only() -> None:
    undocumented = tool("t", "d", {"name": "amount", "type": "number", "required": True},
                        {"name": "c", "type": "string", "required": True,
                         "description": "A code, e.g. USD"})
    assert example_arguments(undocumented) is None  # amount documents no value
    documented = tool("t", "d", {"name": "n", "type": "integer", "required": True,
                                 "examples": [3]},
                      {"name": "c", "type": "string", "required": True,
                       "description": "A code, e.g. USD"},
                      {"name": "u", "type": "string", "required": True, "enum": ["km", "mi"]})
    assert example_arguments(documented) == {"n": 3, "c": "USD", "u": "km"}


async def test_a_copied_value_never_reaches_the_tool(backend: Backend, tmp_path: Path) -> None:
    """A model that calls with "..." and then with its description's example is told why,
    twice; the tool runs only when the value is the question's."""
    llm = ScriptedLLM(['Thought: t\nAction: tell-joke\nArgs: {"topic": "..."}',
                       'Thought: t\nAction: tell-joke\nArgs: {"topic": "programming"}',
                       'Thought: t\nAction: tell-joke\nArgs: {"topic": "penguins"}',
                       "Thought: done\nFinal Answer: ok"])
    async with agent_stack(backend, tmp_path, llm) as s:
        await s.load_jokes()
        await s.put({("tool", "tell-joke"): TELL_JOKE})
        messages = await s.ask("Tell me a joke about penguins")
    placeholder, example, joke = observations(messages)
    assert placeholder.startswith("Error: arguments for 'tell-joke' that the question does not "
                                  "give: $.topic: '...' is a placeholder, not a value")
    assert "$.topic: 'programming' is an example from the tool's description" in example
    assert joke.startswith("Hey trustgraph!")
    calls = [m["arguments"] for m in messages if m["message_type"] == "tool-call"]
    assert calls == [{"topic": "..."}, {"topic": "programming"}, {"topic": "penguins"}]
    assert answer_of(messages) == "ok"
    assert messages[-1]["tool_calls"] == 1  # the refused calls never ran
