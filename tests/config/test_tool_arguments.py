"""A tool item's declared arguments on put: TrustGraph's three fields, the required flag and
JSON Schema constraints; a bad one is a config-error naming the argument's field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolmesh.config.errors import ConfigError
from toolmesh.config.validation import validate


def put(*arguments: dict[str, Any]) -> None:
    validate("tool", "t", json.dumps({"type": "mcp-tool", "name": "n", "description": "d",
                                      "mcp-tool": "m", "arguments": list(arguments)}))


def test_trustgraphs_form_and_the_extensions_are_accepted() -> None:
    put({"name": "account_id", "type": "string", "description": "Bank account identifier"},
        {"name": "date", "type": "string", "description": "optional"})
    put({"name": "mode", "type": "string", "enum": ["fast", "slow"], "default": "fast",
         "required": True},
        {"name": "n", "type": "integer", "minimum": 1, "maximum": 9, "default": 3},
        {"name": "travelers", "type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}},
        {"name": "opts", "type": "object", "properties": {"fast": {"type": "boolean"}},
         "required-properties": ["fast"], "additionalProperties": False})


@pytest.mark.parametrize(("argument", "complaint"), [
    ({"name": "a", "type": "str"},
     "field 'arguments[0].type' of tool/t: 'str' is not one of string, number, integer"),
    ({"name": "a", "required": "yes"}, "field 'arguments[0].required' of tool/t: must be true or false"),
    ({"name": "a", "requried": True},
     ("field 'arguments[0].requried' of tool/t: is not an argument field; an argument has "
      "name, type, description, required, required-properties and the JSON Schema keywords "
      "enum,")),
    ({"name": "a", "type": "string", "enum": "fast"},
     "field 'arguments[0].enum' of tool/t: is not valid JSON Schema: 'fast' is not of type 'array'"),
    ({"name": "a", "type": "array", "items": {"type": "text"}},
     "field 'arguments[0].items.type' of tool/t: is not valid JSON Schema:"),
    ({"name": "a", "type": "integer", "enum": [1, "two"]},
     ("field 'arguments[0].enum[1]' of tool/t: 'two' does not fit the argument: 'two' is not "
      "of type 'integer'")),
    ({"name": "a", "type": "integer", "minimum": 1, "default": 0},
     ("field 'arguments[0].default' of tool/t: 0 does not fit the argument: 0 is less than "
      "the minimum of 1")),
    ({"name": "a", "type": "string", "required-properties": ["x"]},
     "field 'arguments[0].required-properties' of tool/t: is for object arguments, not string"),
    ({"name": "a", "type": "object", "properties": {"x": {}}, "required-properties": ["y"]},
     ("field 'arguments[0].required-properties' of tool/t: names 'y', which is not one of "
      "its properties")),
], ids=["type", "required", "unknown-field", "enum-not-a-list", "nested-type", "enum-value",
        "default", "required-properties-on-string", "required-properties-unknown"])
def test_a_bad_argument_is_refused_naming_its_field(argument: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigError) as e:
        put(argument)
    assert e.value.message.startswith(f"invalid {complaint}"), e.value.message
