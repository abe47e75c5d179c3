"""Declared arguments as descriptions with optional constraints, checked together with a
tool's own schema; every problem reported at once with its JSON path."""

import jsonschema

from toolmesh.agent.arguments import (
    Argument,
    arguments_from_config,
    arguments_from_schema,
    check_arguments,
    merge_discovered,
)

DECLARED = (Argument(name="city", type="string", required=True),
            Argument(name="days", type="integer", required=True),
            Argument(name="metric", type="boolean"),
            Argument(name="scale", type="number"))

#: an inputSchema with a nested object array, as a server written with pydantic sends it
TRIP = {
    "type": "object",
    "$defs": {"Traveler": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"},
        "age": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}], "default": None}}}},
    "properties": {
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        "travelers": {"type": "array", "items": {"$ref": "#/$defs/Traveler"}, "minItems": 1}},
    "required": ["travelers"],
    "additionalProperties": False,
}


def validator(schema: dict) -> jsonschema.protocols.Validator:
    return jsonschema.Draft202012Validator(schema)


def test_valid_arguments_pass() -> None:
    assert check_arguments({"city": "Paris", "days": 3}, DECLARED) == []
    assert check_arguments({"city": "Paris", "days": 3.0, "scale": 2, "metric": True}, DECLARED) == []


def test_a_declared_argument_is_optional_unless_it_says_required() -> None:
    # the seed's bank example: TrustGraph's format has no "required", and "date" is optional
    seed = arguments_from_config([
        {"name": "account_id", "type": "string", "description": "Bank account identifier"},
        {"name": "date", "type": "string",
         "description": "Date for balance query (optional, format: YYYY-MM-DD)"}])
    assert [a.required for a in seed] == [False, False]
    assert check_arguments({"account_id": "ACC-1"}, seed) == []
    assert check_arguments({}, seed) == []
    marked = arguments_from_config([{"name": "account_id", "type": "string", "required": True}])
    assert check_arguments({}, marked) == ["$.account_id: required"]


def test_undeclared_arguments_pass_through_unless_the_schema_refuses_them() -> None:
    assert check_arguments({"city": "Paris", "days": 1, "colour": "red"}, DECLARED) == []
    assert check_arguments({"x": 1}, ()) == []
    closed = validator({"type": "object", "properties": {"a": {}, "b": {}},
                        "additionalProperties": False})
    assert check_arguments({"a": 1, "x": 1}, (), schema=closed) == [
        '$.x: not accepted (accepted: "a", "b")']


def test_every_problem_is_reported_with_its_path() -> None:
    problems = check_arguments({"days": "3", "metric": 1, "scale": True}, DECLARED)
    assert problems == [
        "$.city: required",
        "$.days: must be integer, not string",
        "$.metric: must be boolean, not integer",
        "$.scale: must be number, not boolean",
    ]


def test_declared_and_schema_problems_come_together() -> None:
    declared = arguments_from_config([{"name": "note", "type": "string", "required": True}])
    problems = check_arguments(
        {"mode": "warp", "travelers": [{"age": -1}, {"name": 7, "age": "x"}], "pets": 2},
        declared, schema=validator(TRIP))
    assert problems == [
        "$.mode: must be one of \"fast\", \"slow\", not \"warp\"",
        "$.note: required",
        '$.pets: not accepted (accepted: "mode", "travelers")',
        "$.travelers[0].age: must be at least 0, not -1",
        "$.travelers[0].name: required",
        "$.travelers[1].age: must be integer, not string",
        "$.travelers[1].name: must be string, not integer",
    ]


def test_the_same_problem_from_both_sides_is_said_once() -> None:
    declared = arguments_from_config([{"name": "mode", "type": "string", "required": True}])
    schema = validator({"type": "object", "properties": {"mode": {"type": "string"}},
                        "required": ["mode"]})
    assert check_arguments({"mode": 1}, declared, schema=schema) == [
        "$.mode: must be string, not integer"]
    assert check_arguments({}, declared, schema=schema) == ["$.mode: required"]


def test_declared_constraints_are_checked() -> None:
    declared = arguments_from_config([
        {"name": "mode", "type": "string", "enum": ["fast", "slow"]},
        {"name": "n", "type": "integer", "minimum": 1, "maximum": 5},
        {"name": "people", "type": "array", "items": {
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
        {"name": "opts", "type": "object", "properties": {"fast": {"type": "boolean"}},
         "required-properties": ["fast"]}])
    assert check_arguments({"mode": "fast", "n": 5, "people": [{"name": "A"}],
                            "opts": {"fast": True}}, declared) == []
    assert check_arguments({"mode": "x", "n": 9, "people": [{}], "opts": {}}, declared) == [
        "$.mode: must be one of \"fast\", \"slow\", not \"x\"",
        "$.n: must be at most 5, not 9",
        "$.opts.fast: required",
        "$.people[0].name: required",
    ]


def test_args_must_be_an_object() -> None:
    assert check_arguments(["Paris"], DECLARED) == ["Args must be a JSON object, not array"]


def test_discovered_arguments_inline_refs_and_show_optional_as_the_real_type() -> None:
    mode, travelers = arguments_from_schema(TRIP)
    assert (mode.name, mode.type, mode.required) == ("mode", "string", False)
    assert (travelers.type, travelers.required) == ("array", True)
    assert travelers.schema["items"]["properties"]["age"]["anyOf"][0]["type"] == "integer"
    recursive = {"type": "object", "$defs": {"Node": {"type": "object", "properties": {
        "child": {"$ref": "#/$defs/Node"}}}}, "properties": {"root": {"$ref": "#/$defs/Node"}}}
    (root,) = arguments_from_schema(recursive)
    assert root.schema["properties"]["child"] == {"type": "object"}


def test_declared_arguments_stay_authoritative_and_the_server_completes_them() -> None:
    declared = arguments_from_config([
        {"name": "mode", "type": "string", "description": "How to travel"},
        {"name": "note", "type": "string"}])
    merged = merge_discovered(declared, arguments_from_schema(TRIP))
    assert [a.name for a in merged] == ["mode", "note", "travelers"]  # + what the server needs
    mode = merged[0]
    assert mode.description == "How to travel" and mode.schema["enum"] == ["fast", "slow"]
    assert merged[2].required is True
    # a declared type the server disagrees with keeps the declaration's own shape
    (odd,) = merge_discovered(arguments_from_config([{"name": "mode", "type": "integer"}]),
                              arguments_from_schema(TRIP))[:1]
    assert "enum" not in odd.schema
