"""A ``tool`` item's declared argument on the wire, and the JSON Schema of its value.

TrustGraph declares an argument as ``{"name", "type", "description"}``. toolmesh reads the
same object and also accepts, all optional:

* ``"required": true`` — the LLM must pass it (TrustGraph's format has no such field, so an
  argument is optional unless it says so: the seed's "optional" date is only a description);
* JSON Schema keywords about the value (``enum``, ``default``, ``items``, ``properties``,
  ``minimum``...), checked before a call and shown to the LLM;
* ``"required-properties": [...]`` — for an ``object`` argument, which of its ``properties``
  must be present (its own ``required`` is taken by the flag above; nested schemas inside
  ``properties`` and ``items`` are plain JSON Schema and use ``required`` lists as usual).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

#: JSON Schema type names, the types an argument may declare
ARGUMENT_TYPES = ("string", "number", "integer", "boolean", "object", "array")

#: fields about the argument itself rather than its value
OWN_FIELDS = ("name", "type", "description", "required", "required-properties")

#: JSON Schema keywords an argument may carry about its value
VALUE_KEYWORDS = (
    "enum", "const", "default", "examples", "format", "pattern", "minLength", "maxLength",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "items", "minItems", "maxItems", "uniqueItems",
    "properties", "additionalProperties", "minProperties", "maxProperties",
    "anyOf", "oneOf", "allOf", "not", "$defs",
)


def validator() -> type[Validator]:
    """The validator class of the dialect a declared argument's value schema is read in
    (draft 2020-12, MCP's inputSchema default).

    jsonschema is imported here, at the first check, not with this module: it takes about
    0.1 s to import, and every toolmesh process imports this module at start (through config
    validation) while only a put of a ``tool`` item or an agent's tool call checks anything.
    """
    import jsonschema

    return jsonschema.Draft202012Validator


def value_schema(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a declared argument's value (without its description, which the
    prompt shows separately)."""
    schema: dict[str, Any] = {"type": raw.get("type") or "string"}
    schema.update((k, raw[k]) for k in VALUE_KEYWORDS if k in raw)
    if "required-properties" in raw:
        schema["required"] = list(raw["required-properties"])
    return schema


def argument_problem(raw: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first thing wrong with one declared argument besides its name, as ``(field,
    problem)`` with ``field`` relative to the argument (``"enum[1]"``), or ``None``."""
    for key in raw:
        if key not in OWN_FIELDS and key not in VALUE_KEYWORDS:
            # refused rather than ignored: a misspelt "requried" would silently do nothing
            return key, ("is not an argument field; an argument has "
                         + ", ".join(OWN_FIELDS) + " and the JSON Schema keywords "
                         + ", ".join(VALUE_KEYWORDS))
    type_ = raw.get("type", "string")
    if type_ not in ARGUMENT_TYPES:
        return "type", f"{type_!r} is not one of " + ", ".join(ARGUMENT_TYPES)
    if not isinstance(raw.get("description", ""), str):
        return "description", "must be a string"
    if not isinstance(raw.get("required", False), bool):
        return "required", "must be true or false"
    wanted = raw.get("required-properties")
    if wanted is not None:
        if type_ != "object":
            return "required-properties", f"is for object arguments, not {type_}"
        if not (isinstance(wanted, list) and all(isinstance(p, str) for p in wanted)):
            return "required-properties", "must be a list of property names"
        missing = [p for p in wanted if p not in (raw.get("properties") or {})]
        if isinstance(raw.get("properties"), dict) and missing:
            return "required-properties", (f"names {missing[0]!r}, which is not one of its "
                                           "properties")
    from jsonschema import SchemaError  # see validator()

    schema = value_schema(raw)
    cls = validator()
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        return _field(e.absolute_path) or "type", f"is not valid JSON Schema: {e.message}"
    # A default or an enum value the argument itself refuses would mislead the LLM.
    check = cls({k: v for k, v in schema.items() if k not in ("default", "enum")})
    for field, value in [("default", schema["default"])] if "default" in schema else []:
        error = next(iter(check.iter_errors(value)), None)
        if error is not None:
            return field, f"{value!r} does not fit the argument: {error.message}"
    for i, value in enumerate(schema.get("enum") or ()):
        error = next(iter(check.iter_errors(value)), None)
        if error is not None:
            return f"enum[{i}]", f"{value!r} does not fit the argument: {error.message}"
    return None


def _field(path: Any) -> str:
    """``deque(["items", "properties", "age", "type"])`` -> ``items.properties.age.type``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
