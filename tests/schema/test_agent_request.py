"""Agent and tool-service requests: every field of the wrong type is a bad request naming
the field, never a TypeError deep in the service."""

from __future__ import annotations

from typing import Any

import pytest

from toolmesh.errors import ServiceError
from toolmesh.schema import tool_service
from toolmesh.schema.agent import DEFAULT_USER, AgentRequest, Step, parse_request

QUESTION = {"question": "tell me a joke"}


def refusal(body: dict[str, Any]) -> ServiceError:
    with pytest.raises(ServiceError) as e:
        parse_request(body)
    assert e.value.type == "bad-request"
    return e.value


@pytest.mark.parametrize("history", [5, True, 1.5, "abc", {"thought": "t"}])
def test_history_that_is_not_a_list_is_a_bad_request(history: Any) -> None:
    error = refusal({**QUESTION, "history": history})
    assert error.message.startswith("'history' must be a list of steps")


@pytest.mark.parametrize(("step", "complaint"), [
    (5, "history[0] must be an object with thought, action, arguments, observation, not a number"),
    (["t"], "history[0] must be an object"),
    (None, "history[0] must be an object"),
    ({"thought": 5}, "'history[0].thought' must be a string, not a number"),
    ({"action": ["tell-joke"]}, "'history[0].action' must be a string, not an array"),
    ({"observation": {"ok": True}}, "'history[0].observation' must be a string, not an object"),
    ({"arguments": [1, 2]}, "'history[0].arguments' must be a JSON object, not list"),
    ({"arguments": 7}, "'history[0].arguments' must be a JSON object, not int"),
    ({"arguments": "{not json"}, "'history[0].arguments' is not valid JSON"),
    ({"arguments": "[" * 5000 + "]" * 5000},
     "'history[0].arguments' is nested more than 100 levels deep"),
])
def test_a_history_step_of_the_wrong_shape_is_a_bad_request(step: Any, complaint: str) -> None:
    assert refusal({**QUESTION, "history": [step]}).message.startswith(complaint)


@pytest.mark.parametrize(("field", "value", "complaint"), [
    ("question", 5, "needs 'question'"),
    ("state", {}, "'state' must be a string, not an object"),
    ("state", 0, "'state' must be a string, not a number"),
    ("group", 5, "'group' must be a list of strings"),
    ("group", ["a", 1], "'group' must be a list of strings"),
    ("user", [], "'user' must be a string, not an array"),
    ("user", False, "'user' must be a string, not a boolean"),
    ("streaming", "yes", "'streaming' must be true or false, not a string"),
    ("streaming", 1, "'streaming' must be true or false, not a number"),
])
def test_every_other_field_of_the_wrong_type_is_a_bad_request(field: str, value: Any,
                                                              complaint: str) -> None:
    assert complaint in refusal({**QUESTION, field: value}).message


def test_a_well_formed_request_is_read_whole() -> None:
    request = parse_request({
        "question": "q", "state": "s1", "group": "default", "user": "ana", "streaming": True,
        "history": [{"thought": "t", "action": "tell-joke", "arguments": {"topic": "food"},
                     "observation": "ha"},
                    {"thought": "t2", "arguments": '{"topic": "cats"}'},
                    {}]})
    assert request == AgentRequest(
        question="q", state="s1", groups=("default",), user="ana", streaming=True,
        history=(Step(thought="t", action="tell-joke", arguments={"topic": "food"},
                      observation="ha"),
                 Step(thought="t2", arguments={"topic": "cats"}),
                 Step()))


def test_absent_null_and_empty_fields_take_their_defaults() -> None:
    expected = AgentRequest(question="q")
    assert parse_request({"question": "q"}) == expected
    assert parse_request({"question": "q", "state": None, "group": None, "history": None,
                          "user": None, "streaming": None}) == expected
    assert parse_request({"question": "q", "state": "", "history": [], "user": ""}) == expected
    assert expected.user == DEFAULT_USER


@pytest.mark.parametrize(("body", "complaint"), [
    ({"user": 0}, "'user' must be a string, not int"),
    ({"user": {}}, "'user' must be a string, not dict"),
    ({"arguments": "[" * 5000 + "]" * 5000}, "'arguments' is nested more than 100 levels deep"),
    ({"config": '{"s": "\\ud800"}'}, "'config' holds a string that is not valid Unicode"),
])
def test_tool_service_requests_of_the_wrong_shape_are_malformed(body: dict[str, Any],
                                                                complaint: str) -> None:
    with pytest.raises(ServiceError) as e:
        tool_service.parse_request(body)
    assert e.value.type == "malformed-request" and e.value.message.startswith(complaint)


def test_a_tool_service_request_without_a_user_runs_as_the_default_user() -> None:
    assert tool_service.parse_request({"user": "", "arguments": '{"a": 1}'}) == (
        tool_service.DEFAULT_USER, {}, {"a": 1})
