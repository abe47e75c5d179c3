"""JSON text inside string fields: decoded, or refused with a message, never a RecursionError
or Python's own integer-limit ValueError."""

from __future__ import annotations

import json

import pytest

from toolmesh.schema.json_object import json_object
from toolmesh.schema.json_text import (
    MAX_DEPTH,
    JsonTextError,
    NotJson,
    check,
    loads,
    valid_text,
)

DEEP_ARRAYS = "[" * 5000 + "]" * 5000
DEEP_OBJECTS = '{"a": ' * 5000 + "1" + "}" * 5000
HUGE_INT = "1" + "0" * 5000


def nested(depth: int) -> str:
    """``depth`` containers, one inside the other."""
    return '{"a": ' * (depth - 1) + "[]" + "}" * (depth - 1)


@pytest.mark.parametrize("text", [DEEP_ARRAYS, DEEP_OBJECTS, nested(MAX_DEPTH + 1)],
                         ids=["arrays", "objects", "one-too-many"])
def test_text_nested_too_deep_is_refused(text: str) -> None:
    with pytest.raises(JsonTextError) as e:
        loads(text, what="'arguments'")
    assert str(e.value) == "'arguments' is nested more than 100 levels deep"
    assert not isinstance(e.value, NotJson)


def test_text_nested_exactly_to_the_limit_decodes() -> None:
    assert loads(nested(MAX_DEPTH), what="x") == json.loads(nested(MAX_DEPTH))


@pytest.mark.parametrize("text", [HUGE_INT, '{"n": -' + HUGE_INT + "}"])
def test_an_integer_python_will_not_convert_is_refused(text: str) -> None:
    with pytest.raises(JsonTextError) as e:
        loads(text, what="the value")
    assert str(e.value) == "the value holds an integer of more than 4300 digits"


@pytest.mark.parametrize(("text", "where"), [
    ('"\\ud800"', ""),
    ('{"auth-token": "\\ud800"}', ' at ["auth-token"]'),
    ('{"env": {"KEY": ["ok", "\\udc80x"]}}', ' at ["env"]["KEY"][1]'),
])
def test_a_lone_surrogate_is_refused_naming_where(text: str, where: str) -> None:
    with pytest.raises(JsonTextError) as e:
        loads(text, what="the value")
    assert str(e.value) == ("the value holds a string that is not valid Unicode (a lone "
                            "surrogate, like \\ud800)" + where)


def test_a_key_with_a_lone_surrogate_is_refused_naming_its_object() -> None:
    with pytest.raises(JsonTextError, match=r'a key that is not valid Unicode .* at \["env"\]$'):
        loads('{"env": {"\\ud800": "v"}}', what="the value")


def test_a_paired_surrogate_escape_is_ordinary_text() -> None:
    assert loads('{"smile": "\\ud83d\\ude00"}', what="x") == {"smile": "\U0001F600"}
    assert valid_text("\U0001F600 åsa") and not valid_text("a\ud800")


def test_text_that_is_not_json_is_the_not_json_error() -> None:
    with pytest.raises(NotJson, match=r"^'config' is not valid JSON \(Expecting"):
        loads("{not json", what="'config'")


def test_errors_are_value_errors_so_existing_handlers_catch_them() -> None:
    assert issubclass(JsonTextError, ValueError)


def test_check_takes_decoded_values_without_recursion() -> None:
    value: list = []
    for _ in range(50_000):  # far deeper than any recursive walk could go
        value = [value]
    with pytest.raises(JsonTextError, match="nested more than 100 levels"):
        check(value, what="the value")
    check({"a": [1, "ü", None, {"b": 2.5}]}, what="the value")


@pytest.mark.parametrize(("value", "complaint"), [
    (DEEP_OBJECTS, "'arguments' is nested more than 100 levels deep"),
    ('{"topic": "\\ud800"}', "'arguments' holds a string that is not valid Unicode"),
    ({"topic": "\ud800"}, "'arguments' holds a string that is not valid Unicode"),
    (json.loads(nested(150)), "'arguments' is nested more than 100 levels deep"),
    ('{"n": ' + HUGE_INT + "}", "'arguments' holds an integer of more than 4300 digits"),
])
def test_json_object_refuses_text_and_objects_alike(value: object, complaint: str) -> None:
    with pytest.raises(ValueError) as e:
        json_object(value, name="'arguments'")
    assert str(e.value).startswith(complaint)


def test_json_object_still_takes_objects_and_their_text() -> None:
    assert json_object('{"topic": "food"}', name="x") == {"topic": "food"}
    assert json_object({"topic": "Åsa"}, name="x") == {"topic": "Åsa"}
    assert json_object(None, name="x") == json_object("", name="x") == {}
