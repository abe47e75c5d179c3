"""Example calls built only from values a tool documents.

A small model copies an example reply's values, so the ``json`` strategy's prompt shows a
tool's example call only when every required argument has a documented value — from its
schema (``examples``, ``default``, the first of its ``enum``) or, failing that, from its
description (``e.g. USD``) — and no example at all otherwise: never ``"..."`` or
``"<value>"``. Measured on SmolLM2-135M, such examples make the model call a tool it is shown
for more of the questions that need one (docs/tool-calling.md); and a value copied from one
cannot reach the tool anyway: the step's grammar holds free values to the dialog's words
(:mod:`toolmesh.agent.grounding`), and a description's example the question does not say is
refused before the call.
"""

from __future__ import annotations

from typing import Any

from toolmesh.agent.grounding import examples
from toolmesh.agent.tools import Tool


def example_arguments(tool: Tool) -> dict[str, Any] | None:
    """An example of ``tool``'s arguments (its required ones) from documented values, or
    ``None`` when some required argument documents none."""
    out: dict[str, Any] = {}
    for argument in tool.arguments:
        if not argument.required:
            continue
        schema = argument.value_schema
        documented = [*(schema.get("examples") or ()),
                      *((schema["default"],) if "default" in schema else ()),
                      *(schema.get("enum") or ())[:1], *examples(argument.description)]
        value = next((v for v in (_typed(d, argument.type) for d in documented)
                      if v is not None), None)
        if value is None:
            return None
        out[argument.name] = value
    return out


def _typed(value: Any, kind: str) -> Any:
    """``value`` as an argument of JSON type ``kind`` (``None``: it is not one)."""
    if kind in ("number", "integer"):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        if kind == "integer":
            return int(number) if number.is_integer() else None
        return int(number) if number.is_integer() else number
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "string":
        return value if isinstance(value, str) and value.strip() else None
    return value
