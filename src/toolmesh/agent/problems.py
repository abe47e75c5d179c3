"""jsonschema's validation errors as short lines an LLM can act on: ``$.path: problem``.

jsonschema's own messages quote Python reprs (``None is not of type 'string'``) and put
``required`` and ``additionalProperties`` errors on the parent object; these lines name the
exact JSON path of each value and say what it must be, in JSON terms.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # the errors come from a check, which imports jsonschema (schema/tool_arguments.py)
    from jsonschema import ValidationError

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


def json_path(path: Iterable[Any]) -> str:
    """``["travelers", 0, "name"]`` -> ``$.travelers[0].name``."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(str(part)):
            out += f".{part}"
        else:
            out += f"[{json.dumps(str(part), ensure_ascii=False)}]"
    return out


def json_type(value: Any) -> str:
    """The JSON Schema name of a value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    return {str: "string", dict: "object", list: "array"}.get(type(value), type(value).__name__)


def show(value: Any) -> str:
    """A value as JSON, cut short when long (the LLM has the whole of it already)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def problems(errors: Iterable[ValidationError]) -> list[str]:
    """One line per problem, in order of path, without repeats."""
    lines: list[str] = []
    for error in errors:
        for line in _lines(error):
            if line not in lines:
                lines.append(line)
    return sorted(lines, key=_path_key)


def _path_key(line: str) -> str:
    # "$.a: x" sorts before "$.a.b: y" and "$.a[0]: z": the path is compared on its own
    return line.split(": ", 1)[0]


def _lines(e: ValidationError) -> list[str]:
    at = list(e.absolute_path)
    where = json_path(at)
    kind, expected = e.validator, e.validator_value
    if kind == "required":
        instance = e.instance if isinstance(e.instance, dict) else {}
        return [f"{json_path([*at, p])}: required" for p in expected if p not in instance]
    if kind == "additionalProperties" and isinstance(e.instance, dict):
        known = (e.schema.get("properties") or {}) if isinstance(e.schema, dict) else {}
        patterns = (e.schema.get("patternProperties") or {}) if isinstance(e.schema, dict) else {}
        accepted = ", ".join(json.dumps(k, ensure_ascii=False) for k in known) or "none"
        return [f"{json_path([*at, k])}: not accepted (accepted: {accepted})"
                for k in e.instance
                if k not in known and not any(re.search(p, k) for p in patterns)]
    if kind in ("anyOf", "oneOf"):
        return _alternatives(e, where)
    return [f"{where}: {_message(e)}"]


def _alternatives(e: ValidationError, where: str) -> list[str]:
    branches: Sequence[Any] = e.validator_value
    real = [i for i, b in enumerate(branches) if not (isinstance(b, dict) and b.get("type") == "null")]
    if len(real) == 1 and e.instance is not None:
        # Optional[X] (X or null): the value is not null, so X's own problems are the answer
        inner = [c for c in e.context or () if c.schema_path and c.schema_path[0] == real[0]]
        if inner:
            return [line for c in inner for line in _lines(c)]
    types = [b.get("type") for b in branches if isinstance(b, dict)]
    if len(types) == len(branches) and all(isinstance(t, str) for t in types):
        return [f"{where}: must be {' or '.join(types)}, not {json_type(e.instance)}"]
    if e.validator == "oneOf" and not e.context:  # no branch failed: several matched
        return [f"{where}: matches more than one of the allowed shapes; it must match one"]
    return [f"{where}: does not match any of the allowed shapes"]


def _message(e: ValidationError) -> str:
    v, value = e.validator_value, e.instance
    match e.validator:
        case "type":
            wanted = " or ".join(v) if isinstance(v, list) else v
            return f"must be {wanted}, not {json_type(value)}"
        case "enum":
            return f"must be one of {', '.join(show(x) for x in v)}, not {show(value)}"
        case "const":
            return f"must be {show(v)}, not {show(value)}"
        case "minimum":
            return f"must be at least {show(v)}, not {show(value)}"
        case "maximum":
            return f"must be at most {show(v)}, not {show(value)}"
        case "exclusiveMinimum":
            return f"must be more than {show(v)}, not {show(value)}"
        case "exclusiveMaximum":
            return f"must be less than {show(v)}, not {show(value)}"
        case "multipleOf":
            return f"must be a multiple of {show(v)}, not {show(value)}"
        case "minLength":
            return f"must have at least {v} characters, not {len(value)}"
        case "maxLength":
            return f"must have at most {v} characters, not {len(value)}"
        case "minItems":
            return f"must have at least {v} items, not {len(value)}"
        case "maxItems":
            return f"must have at most {v} items, not {len(value)}"
        case "uniqueItems":
            return "must not repeat an item"
        case "pattern":
            return f"must match the pattern {show(v)}, not {show(value)}"
        case _:
            return e.message
