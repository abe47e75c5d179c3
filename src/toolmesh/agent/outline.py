"""A JSON Schema as the LLM reads it: an indented outline, one line per value.

    - mode (string, one of: "fast", "slow"; default "fast") — how to travel
    - travelers (array of objects, required, at least 1 item) — who travels
      - name (string, required) — full name
      - age (integer, 0 to 150)

Everything that decides whether a call succeeds is kept (types, required-ness, enums, bounds,
nested shapes, defaults); JSON Schema's own syntax, titles and examples are left out, because
they cost tokens a small model would have to translate anyway. ``Optional[X]`` (X or null)
reads as X: the LLM leaves an optional value out rather than passing null.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: how deep nested properties are listed; deeper shapes show only their type
MAX_DEPTH = 6
#: how many enum values are listed before "... (N more)"
MAX_ENUM = 20

_PLURALS = {"string": "strings", "number": "numbers", "integer": "integers",
            "boolean": "booleans", "object": "objects", "array": "arrays", "null": "nulls"}


def outline(name: str, schema: Mapping[str, Any], *, required: bool = False,
            description: str = "", depth: int = 0) -> list[str]:
    """The lines of one named value (an argument or a property), its children indented."""
    s = normalize(schema)
    details = []
    if required:
        details.append("required")
    details += _constraints(s)
    head = kind(s) + "".join(f", {d}" for d in details)
    if s.get("default") is not None:  # Optional[X] = None: "default null" says nothing
        head += f"; default {_show(s['default'])}"
    text = " ".join((description or str(s.get("description") or "")).split())
    lines = [f"{'  ' * depth}- {name} ({head})" + (f" — {text}" if text else "")]
    if depth + 1 < MAX_DEPTH:
        lines += _children(s, depth + 1)
    return lines


def normalize(schema: Any) -> dict[str, Any]:
    """One plain schema: ``X or null`` as X, a lone ``allOf`` merged into its parent."""
    s = dict(schema) if isinstance(schema, Mapping) else {}
    for key in ("anyOf", "oneOf"):
        branches = s.get(key)
        if isinstance(branches, list):
            real = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
            if len(real) == 1:
                del s[key]
                s = {**normalize(real[0]), **s}
    all_of = s.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        del s["allOf"]
        s = {**normalize(all_of[0]), **s}
    type_ = s.get("type")
    if isinstance(type_, list):
        real_types = [t for t in type_ if t != "null"]
        s["type"] = real_types[0] if len(real_types) == 1 else real_types
    return s


def kind(schema: Mapping[str, Any]) -> str:
    """``string``, ``array of objects``, ``integer or string``, ``any``..."""
    s = normalize(schema)
    type_ = s.get("type")
    if isinstance(type_, list):
        return " or ".join(map(str, type_)) or "any"
    if type_ is None:
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list):
                return " or ".join(dict.fromkeys(kind(b) for b in s[key]))
        type_ = ("object" if "properties" in s else "array" if "items" in s
                 else _enum_type(s) or "any")
    if type_ == "array" and isinstance(s.get("items"), Mapping):
        item = kind(s["items"])
        return "array" if item == "any" else f"array of {_plural(item)}"
    if type_ == "object" and "properties" not in s and isinstance(s.get("additionalProperties"), Mapping):
        return f"object of {_plural(kind(s['additionalProperties']))}"
    return str(type_)


def _children(s: Mapping[str, Any], depth: int) -> list[str]:
    # the fields of an object, or of the objects an array (of arrays...) holds
    while isinstance(s.get("items"), Mapping):
        s = normalize(s["items"])
    properties = s.get("properties")
    if not isinstance(properties, Mapping):
        return []
    wanted = set(s.get("required") or ())
    lines: list[str] = []
    for name, prop in properties.items():
        lines += outline(str(name), prop if isinstance(prop, Mapping) else {},
                         required=name in wanted, depth=depth)
    return lines


def _constraints(s: Mapping[str, Any]) -> list[str]:
    out = []
    if isinstance(s.get("enum"), list):
        out.append("one of: " + _values(s["enum"]))
    if "const" in s:
        out.append(f"always {_show(s['const'])}")
    item = normalize(s["items"]) if isinstance(s.get("items"), Mapping) else {}
    if isinstance(item.get("enum"), list):
        out.append("each one of: " + _values(item["enum"]))
    out += _range(s, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
    out += _count(s, "minLength", "maxLength", "character")
    out += _count(s, "minItems", "maxItems", "item")
    out += _count(s, "minProperties", "maxProperties", "field")
    if s.get("uniqueItems") is True:
        out.append("no repeats")
    if "multipleOf" in s:
        out.append(f"multiple of {_show(s['multipleOf'])}")
    if isinstance(s.get("pattern"), str):
        out.append(f"matching {_show(s['pattern'])}")
    if isinstance(s.get("format"), str):
        out.append(f"format {s['format']}")
    return out


def _range(s: Mapping[str, Any], low: str, high: str, xlow: str, xhigh: str) -> list[str]:
    lo, hi = s.get(low), s.get(high)
    if _number(lo) and _number(hi):
        return [f"{_show(lo)} to {_show(hi)}"]
    out = []
    if _number(lo):
        out.append(f">= {_show(lo)}")
    if _number(s.get(xlow)):
        out.append(f"> {_show(s[xlow])}")
    if _number(hi):
        out.append(f"<= {_show(hi)}")
    if _number(s.get(xhigh)):
        out.append(f"< {_show(s[xhigh])}")
    return out


def _count(s: Mapping[str, Any], low: str, high: str, unit: str) -> list[str]:
    lo, hi = s.get(low), s.get(high)
    if _number(lo) and _number(hi):
        return [f"{lo} to {hi} {unit}s"]
    if _number(lo) and lo:
        return [f"at least {lo} {unit}{'s' if lo != 1 else ''}"]
    if _number(hi):
        return [f"at most {hi} {unit}{'s' if hi != 1 else ''}"]
    return []


def _enum_type(s: Mapping[str, Any]) -> str | None:
    values = s.get("enum") if isinstance(s.get("enum"), list) else [s["const"]] if "const" in s else []
    names = {"string" if isinstance(v, str) else "boolean" if isinstance(v, bool)
             else "number" if isinstance(v, (int, float)) else "value" for v in values}
    return names.pop() if len(names) == 1 else None


def _plural(kind_: str) -> str:
    if " or " in kind_:
        return " or ".join(_plural(k) for k in kind_.split(" or "))
    head, _, rest = kind_.partition(" ")
    return _PLURALS.get(head, head) + (f" {rest}" if rest else "")


def _values(values: list[Any]) -> str:
    shown = ", ".join(_show(v) for v in values[:MAX_ENUM])
    return shown + (f", ... ({len(values) - MAX_ENUM} more)" if len(values) > MAX_ENUM else "")


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
