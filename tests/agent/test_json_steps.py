"""The json strategy's parts: following a reply as it streams, reading it whole, and the
schemas a model is held to."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from toolmesh.agent.arguments import arguments_from_config
from toolmesh.agent.strategies.base import Answer, CallRequest, Calls, Unusable
from toolmesh.agent.strategies.json_steps import decide
from toolmesh.agent.strategies.json_stream import JsonStepStream, parse_step
from toolmesh.agent.grounding import numbers, spans
from toolmesh.agent.strategies.schemas import (
    Grounding,
    arguments_schema,
    choice_schema,
    relaxed,
    step_schema,
)
from toolmesh.agent.tools import Tool, ToolInfo
from toolmesh.agent.tools.base import Call
from toolmesh.agent.transcript import CallRecord, Transcript, Turn


class Echo(Tool):
    async def invoke(self, arguments: dict, call: Call) -> str:  # type: ignore[type-arg]
        return json.dumps(arguments)


def tool(name: str, arguments: list[dict]) -> Tool:  # type: ignore[type-arg]
    return Echo(ToolInfo(key=name, name=name, description="d",
                         arguments=arguments_from_config(arguments)))


def cuts(text: str, sizes: list[int]) -> list[str]:
    out, i = [], 0
    for n in sizes:
        out.append(text[i:i + n])
        i += n
    return [*out, text[i:]]


@given(thought=st.text(), answer=st.text(), sizes=st.lists(st.integers(1, 9), max_size=80),
       ascii=st.booleans())
def test_the_thought_and_answer_stream_out_decoded_whatever_the_chunks(
        thought: str, answer: str, sizes: list[int], ascii: bool) -> None:
    text = json.dumps({"thought": thought, "final_answer": answer}, ensure_ascii=ascii)
    follow = JsonStepStream()
    deltas = [follow.feed(chunk) for chunk in cuts(text, sizes)]
    assert "".join(t for t, _ in deltas) == thought
    assert "".join(a for _, a in deltas) == answer
    assert follow.open is None


def test_only_the_top_level_thought_and_answer_are_told() -> None:
    text = json.dumps({"thought": "t", "action": "x",
                       "arguments": {"thought": "not this", "final_answer": "nor this"}})
    assert JsonStepStream().feed(text) == ("t", "")


def test_a_reply_is_read_as_the_model_meant_it() -> None:
    follow = JsonStepStream()
    assert decide(json.dumps({"thought": "t", "action": "a", "arguments": {"k": 1}}), step=2,
                  cut=False, follow=follow) == Calls(
        thought="t", calls=(CallRequest(id="call_3", name="a", arguments={"k": 1}),),
        raw=json.dumps({"thought": "t", "action": "a", "arguments": {"k": 1}}))
    # a raw line break inside a string, as grammar-constrained servers let through
    assert decide('{"thought": "a\nb", "final_answer": "c"}', step=0, cut=False,
                  follow=follow) == Answer(thought="a\nb", answer="c")
    assert isinstance(decide('{"thought": "t"}', step=0, cut=False, follow=follow), Unusable)


def test_an_answer_cut_by_max_tokens_is_the_answer_so_far() -> None:
    text = '{"thought": "ok", "final_answer": "Once upon a time there was a very long sto'
    follow = JsonStepStream()
    follow.feed(text)
    assert follow.open == "final_answer"
    assert decide(text, step=0, cut=True, follow=follow) == Answer(
        thought="ok", answer="Once upon a time there was a very long sto", cut=True)
    # cut in the thought: the model is told to keep it short
    text = '{"thought": "I think and think and'
    follow = JsonStepStream()
    follow.feed(text)
    decision = decide(text, step=0, cut=True, follow=follow)
    assert isinstance(decision, Unusable) and "cut off" in decision.problem


def test_a_fenced_object_is_read_and_prose_is_not() -> None:
    assert parse_step('Sure:\n```json\n{"final_answer": "x"}\n```') == {"final_answer": "x"}
    assert parse_step("no object here") is None
    assert parse_step("[1, 2]") is None


def test_generation_asks_for_required_strings_and_no_made_up_keys() -> None:
    schema = arguments_schema(tool("t", [
        {"name": "city", "type": "string", "description": "City", "required": True},
        {"name": "unit", "type": "string", "enum": ["C", "F"], "required": True},
        {"name": "note", "type": "string"},
        {"name": "where", "type": "object", "properties": {"zip": {"type": "string"}},
         "required-properties": ["zip"]}]))
    props = schema["properties"]
    assert props["city"] == {"type": "string", "description": "City", "minLength": 1}
    assert "minLength" not in props["unit"] and "minLength" not in props["note"]
    assert props["where"]["properties"]["zip"]["minLength"] == 1
    assert schema["additionalProperties"] is False and schema["required"] == ["city", "unit"]


def test_a_step_has_a_branch_per_tool_the_answer_and_the_results() -> None:
    schema = step_schema([tool("a", []), tool("b", [])], ["a", "a (2)"])
    firsts = [list(b["properties"]) for b in schema["anyOf"]]
    assert firsts == [["thought", "action", "arguments"], ["thought", "action", "arguments"],
                      ["thought", "answer_with_result_of"], ["thought", "final_answer"]]
    assert relaxed(schema)["anyOf"][0]["properties"]["arguments"] == {"type": "object"}
    assert step_schema([])["required"] == ["thought", "final_answer"]  # one branch: no anyOf
    # as the json strategy asks: no thought
    bare = step_schema([tool("a", [])], thought=False)
    assert [list(b["properties"]) for b in bare["anyOf"]] == [["action", "arguments"],
                                                               ["final_answer"]]


def test_two_steps_choose_the_tool_by_name_alone_then_fill_its_arguments() -> None:
    schema = choice_schema([tool("a", []), tool("b", [])], ["a"])
    assert schema["anyOf"][0] == {"type": "object", "additionalProperties": False,
                                  "properties": {"action": {"type": "string",
                                                            "enum": ["a", "b"]}},
                                  "required": ["action"]}
    assert [list(b["properties"]) for b in schema["anyOf"][1:]] == [
        ["answer_with_result_of"], ["final_answer"]]
    assert choice_schema([])["required"] == ["final_answer"]


def test_free_values_are_held_to_the_dialogs_words_and_numbers() -> None:
    t = tool("distance", [
        {"name": "origin", "type": "string", "description": "From", "required": True},
        {"name": "unit", "type": "string", "enum": ["km", "miles"]},
        {"name": "speed", "type": "string", "enum": ["fast", "slow"]},
        {"name": "days", "type": "integer", "minimum": 1},
        {"name": "date", "type": "string", "format": "date"}])
    question = "How far is Madrid from Lisbon in km, over 2.5 or 3 days?"
    grounding = Grounding(strings=spans([question]), numbers=numbers([question]),
                          said=question)
    arguments = step_schema([t], thought=False, grounding=grounding)["anyOf"][0][
        "properties"]["arguments"]
    props = arguments["properties"]
    assert "Madrid" in props["origin"]["enum"] and "Máximilán" not in props["origin"]["enum"]
    assert "minLength" not in props["origin"]
    assert props["unit"]["enum"] == ["km", "miles"]  # an enum is the tool's own
    assert props["days"]["enum"] == [3]  # integers of the dialog, within the bounds
    assert "enum" not in props["date"]  # a format: left to the model
    # an optional argument whose value the question names is asked for; others stay optional
    assert arguments["required"] == ["origin", "unit"]


def test_results_are_labelled_latest_first_and_repeats_left_out() -> None:
    def call(name: str, obs: str, **kw: object) -> CallRecord:
        return CallRecord(id="i", name=name, arguments={}, observation=obs, **kw)  # type: ignore[arg-type]

    t = Transcript(question="q", turns=[
        Turn(calls=(call("a", "1"), call("b", "2"))), Turn(calls=(call("a", "3"),)),
        Turn(calls=(call("a", "1", redundant=True),)), Turn(calls=(call("a", "x", ok=False),))])
    assert [(label, c.observation) for label, c in t.results()] == [
        ("a (2)", "3"), ("b", "2"), ("a", "1")]
    assert len(t.shown()) == 3  # the redundant turn is not shown
    assert t.returned("a", "3") and not t.returned("a", "x")
    assert t.earlier("a", {}) is not None and t.earlier("c", {}) is None
