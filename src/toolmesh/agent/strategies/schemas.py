"""The JSON Schemas a model's replies are constrained by.

:func:`arguments_schema` is a tool's arguments as the model is asked to write them: the tool's
own schema (declared arguments, an MCP ``inputSchema``), made a little stricter for
generation — a required string argument must not be empty (``minLength: 1``) and an object
lists no properties it does not declare (``additionalProperties: false``) unless the schema
says otherwise. Small models write ``"topic": ""`` or invent keys when they may; the check
before the call still uses the tool's own schema, so nothing valid is refused.

:func:`step_schema` is one ``json`` step: one branch per offered tool (``action`` = that
tool's name, ``arguments`` = its schema) and one for the answer (``final_answer``), each
optionally after a ``thought`` — bounded (:data:`THOUGHT_MAX` characters): a small model's
thought otherwise runs on until ``max_tokens``. A :class:`Grounding` holds free argument
values to the dialog's words and numbers. :func:`choice_schema` is the first half of a
two-step step (the tool's name alone, or the answer); :func:`answer_alone` is a step that may
only answer.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolmesh.agent.grounding import held_schema
from toolmesh.agent.tools import Tool

#: characters a step's thought may take
THOUGHT_MAX = 300


def arguments_schema(tool: Tool) -> dict[str, Any]:
    """``tool``'s arguments as a model is asked for them (module docstring)."""
    return _stricter(copy.deepcopy(tool.parameters()))


def _stricter(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name in schema.get("required") or ():
            prop = properties.get(name)
            if isinstance(prop, dict) and prop.get("type") == "string" \
                    and "minLength" not in prop and "enum" not in prop \
                    and "const" not in prop:
                prop["minLength"] = 1
        for prop in properties.values():
            _stricter(prop)
        if schema.get("type") == "object":
            schema.setdefault("additionalProperties", False)
    if isinstance(schema.get("items"), dict):
        _stricter(schema["items"])
    return schema


def thought_schema() -> dict[str, Any]:
    return {"type": "string", "maxLength": THOUGHT_MAX}


def answer_branch() -> dict[str, Any]:
    return _object({"thought": thought_schema(), "final_answer": {"type": "string"}})


#: the key of an answer that is one of the dialog's tool results, as the tool returned it
ANSWER_FROM = "answer_with_result_of"


def answer_alone(results: Sequence[str] = ()) -> dict[str, Any]:
    """A step that may only answer: the answer alone (a thought first takes a small model
    away from the result it was to pass on) — or, when the dialog has ``results`` (their
    labels), which of them is the answer, passed on as the tool returned it. (Choosing one of
    a few labels is what a small model does well; retyping a result word for word is not.)"""
    own = _object({"final_answer": {"type": "string"}})
    if not results:
        return own
    return {"anyOf": [_object({ANSWER_FROM: {"type": "string", "enum": list(results)}}), own]}


@dataclass(frozen=True, kw_only=True)
class Grounding:
    """The values a step's free arguments may take (:func:`toolmesh.agent.grounding.
    held_schema`): the dialog's spans and numbers."""

    strings: Sequence[str] = ()
    numbers: Sequence[float] = ()
    #: the dialog's text (an optional argument with an enum value it names is asked for)
    said: str = ""


#: the values each tool's free arguments are held to, by tool name, or one for all
Groundings = Grounding | Mapping[str, Grounding]


def tool_branch(tool: Tool, *, thought: bool = True,
                grounding: Groundings | None = None) -> dict[str, Any]:
    arguments = arguments_schema(tool)
    if isinstance(grounding, Mapping):
        grounding = grounding.get(tool.name)
    if grounding is not None:
        arguments = held_schema(arguments, grounding.strings, grounding.numbers,
                                said=grounding.said)
    return _object({**({"thought": thought_schema()} if thought else {}),
                    "action": {"type": "string", "const": tool.name},
                    "arguments": arguments})


def step_schema(tools: Iterable[Tool], results: Sequence[str] = (), *, thought: bool = True,
                grounding: Groundings | None = None) -> dict[str, Any]:
    """The schema of one ``json`` step (module docstring); ``results``: the labels of the
    dialog's results, one of which the model may answer with (:func:`answer_alone`);
    ``thought``: each branch begins with one; ``grounding``: the values free arguments are
    held to (``None``: any)."""
    first = {"thought": thought_schema()} if thought else {}
    branches = [tool_branch(t, thought=thought, grounding=grounding) for t in tools]
    if results:
        branches.append(_object({**first, ANSWER_FROM: {"type": "string",
                                                        "enum": list(results)}}))
    branches.append(_object({**first, "final_answer": {"type": "string"}}))
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def choice_schema(tools: Iterable[Tool], results: Sequence[str] = ()) -> dict[str, Any]:
    """The first of a two-step ``json`` step: which tool (its name alone), or the answer."""
    names = [t.name for t in tools]
    branches = [_object({"action": {"type": "string", "enum": names}})] if names else []
    if results:
        branches.append(_object({ANSWER_FROM: {"type": "string", "enum": list(results)}}))
    branches.append(_object({"final_answer": {"type": "string"}}))
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def relaxed(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with each tool's arguments just "an object": for a server that cannot
    turn a tool's own schema into a grammar."""
    out = copy.deepcopy(dict(schema))
    for branch in out.get("anyOf", [out]):
        props = branch.get("properties", {})
        if "arguments" in props:
            props["arguments"] = {"type": "object"}
    return out


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}
