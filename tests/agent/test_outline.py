"""How schemas read in the prompt: the whole useful schema, compactly, declared or discovered."""

from __future__ import annotations

from toolmesh.agent.arguments import (
    Argument,
    arguments_from_config,
    arguments_from_schema,
)
from toolmesh.agent.outline import kind, outline

#: inputSchemas as @modelcontextprotocol/server-everything 2026.8.31 lists them (captured
#: with `tools/list` from `npx -y @modelcontextprotocol/server-everything stdio`)
EVERYTHING = {
    "get-annotated-message": {
        "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {
            "messageType": {"type": "string", "enum": ["error", "success", "debug"],
                            "description": "Type of message to demonstrate different "
                                           "annotation patterns"},
            "includeImage": {"default": False, "description": "Whether to include an example "
                                                              "image", "type": "boolean"}},
        "required": ["messageType"]},
    "get-resource-links": {
        "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {"count": {"default": 3, "description": "Number of resource links to "
                                                             "return (1-10)",
                                 "type": "number", "minimum": 1, "maximum": 10}}},
}


def lines(schema: dict) -> str:
    return "\n".join(a.to_prompt()["outline"] for a in arguments_from_schema(schema))


def test_server_everything_schemas() -> None:
    assert lines(EVERYTHING["get-annotated-message"]) == (
        '- messageType (string, required, one of: "error", "success", "debug") — Type of '
        "message to demonstrate different annotation patterns\n"
        "- includeImage (boolean; default false) — Whether to include an example image")
    assert lines(EVERYTHING["get-resource-links"]) == (
        "- count (number, 1 to 10; default 3) — Number of resource links to return (1-10)")


def test_a_declared_argument_shows_its_constraints() -> None:
    (mode, people) = arguments_from_config([
        {"name": "mode", "type": "string", "description": "how to travel",
         "enum": ["fast", "slow"], "default": "fast"},
        {"name": "people", "type": "array", "required": True, "minItems": 1, "items": {
            "type": "object", "required": ["name"], "properties": {
                "name": {"type": "string", "maxLength": 40},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["vip", "kid"]},
                         "uniqueItems": True}}}}])
    assert mode.to_prompt()["outline"] == \
        '- mode (string, one of: "fast", "slow"; default "fast") — how to travel'
    assert people.to_prompt()["outline"] == (
        "- people (array of objects, required, at least 1 item)\n"
        "  - name (string, required, at most 40 characters)\n"
        '  - tags (array of strings, each one of: "vip", "kid", no repeats)')


def test_optional_shows_the_real_type_not_any() -> None:
    schema = {"type": "object", "properties": {
        "when": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}],
                 "default": None, "description": "Day"},
        "n": {"type": ["integer", "null"], "exclusiveMinimum": 0},
        "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}
    assert lines(schema) == ("- when (string, format date) — Day\n"
                             "- n (integer, > 0)\n"
                             "- either (string or integer)")


def test_kinds() -> None:
    assert kind({"type": "array", "items": {"type": "array", "items": {"type": "number"}}}) == \
        "array of arrays of numbers"
    assert kind({"type": "object", "additionalProperties": {"type": "integer"}}) == \
        "object of integers"
    assert kind({"enum": ["a", "b"]}) == "string"
    assert kind({}) == "any"


def test_long_enums_and_deep_nesting_are_cut() -> None:
    many = outline("code", {"type": "integer", "enum": list(range(25))})
    assert many == ["- code (integer, one of: " + ", ".join(map(str, range(20)))
                    + ", ... (5 more))"]
    deep: dict = {"type": "string"}
    for _ in range(10):
        deep = {"type": "object", "properties": {"x": deep}}
    assert len(outline("deep", deep)) == 6  # the outline stops; the check still sees it all


def test_an_argument_built_in_code_needs_no_schema() -> None:
    assert Argument(name="q", type="string", required=True).to_prompt()["outline"] == \
        "- q (string, required)"
