"""Tool arguments: their declarations and the check of what the LLM passes against them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

ArgumentType = Literal["string", "number", "integer", "boolean", "object", "array"]

_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Argument:
    """One declared argument, as the LLM is shown it."""

    name: str
    type: str = "string"
    description: str = ""
    required: bool = True

    @classmethod
    def from_config(cls, raw: Mapping[str, Any]) -> Argument:
        """From a config ``{"name", "type", "description", "required"?}`` object."""
        return cls(name=str(raw["name"]), type=str(raw.get("type") or "string"),
                   description=str(raw.get("description") or ""),
                   required=bool(raw.get("required", True)))

    def to_prompt(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "description": self.description,
                "required": self.required}


def arguments_from_config(raw: Any) -> tuple[Argument, ...]:
    """The ``arguments`` list of a tool config item (already validated on put)."""
    return tuple(Argument.from_config(a) for a in raw or ())


def _matches(value: Any, type: str) -> bool:
    expected = _PYTHON_TYPES.get(type)
    if expected is None:
        return True  # a type we do not know is the tool's business, not ours
    if isinstance(value, bool) and type in ("number", "integer"):
        return False  # JSON true is not a number, though Python says bool is an int
    if type == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, expected)


def json_type(value: Any) -> str:
    """The JSON Schema name of a value's type, for messages to the LLM."""
    for name in ("boolean", "integer", "number", "string", "object", "array"):
        if _matches(value, name) and not (name == "integer" and isinstance(value, float)):
            return name
    return "null" if value is None else type(value).__name__


def check_arguments(arguments: Any, declared: Sequence[Argument]) -> list[str]:
    """What is wrong with ``arguments`` for ``declared`` (empty when they are fine).

    Every problem is listed, so the LLM can fix them all in one go.
    """
    if not isinstance(arguments, dict):
        return [f"Args must be a JSON object, not {json_type(arguments)}"]
    problems = []
    by_name = {a.name: a for a in declared}
    for a in declared:
        if a.required and a.name not in arguments:
            problems.append(f"missing required argument {a.name!r} ({a.type})")
    for name, value in arguments.items():
        a = by_name.get(name)
        if a is None:
            allowed = ", ".join(repr(n) for n in by_name) or "none"
            problems.append(f"unknown argument {name!r} (arguments: {allowed})")
        elif not _matches(value, a.type):
            problems.append(f"argument {name!r} must be {a.type}, not {json_type(value)}")
    return problems
