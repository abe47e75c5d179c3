"""Tool arguments: their declarations, how the LLM is shown them, and the check of what the
LLM passes.

A declared argument describes a value, optionally with constraints; it is required only when
it says ``"required": true`` or the server's schema requires it. An argument the tool does not
declare is passed through: for a tool with a schema (an MCP tool's ``inputSchema``) the
schema decides whether it is accepted; a tool without one (tool services, prompt templates)
validates its own input (tool-service requests are untyped).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from toolmesh.agent.outline import normalize, outline
from toolmesh.agent.problems import json_type, problems
from toolmesh.schema.tool_arguments import ARGUMENT_TYPES, validator, value_schema

if TYPE_CHECKING:
    # jsonschema loads at the first check (schema/tool_arguments.py: validator())
    from jsonschema.protocols import Validator

ArgumentType = Literal["string", "number", "integer", "boolean", "object", "array"]

__all__ = ["Argument", "arguments_from_config", "arguments_from_schema", "check_arguments",
           "json_type", "merge_discovered"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Argument:
    """One argument, as the LLM is shown it."""

    name: str
    #: the JSON Schema type name (``any`` when a discovered schema gives none): what a
    #: TrustGraph-style template shows as ``arg.type``
    type: str = "string"
    description: str = ""
    required: bool = False
    #: the JSON Schema of the value (type, enum, items, properties, default, bounds...);
    #: empty: just ``type``
    schema: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @classmethod
    def from_config(cls, raw: Mapping[str, Any]) -> Argument:
        """From a config ``{"name", "type", "description", "required"?, ...}`` object."""
        return cls(name=str(raw["name"]), type=str(raw.get("type") or "string"),
                   description=str(raw.get("description") or ""),
                   required=raw.get("required") is True, schema=value_schema(raw))

    @property
    def value_schema(self) -> Mapping[str, Any]:
        if self.schema:
            return self.schema
        # a type we do not know is the tool's business, not ours
        return {"type": self.type} if self.type in ARGUMENT_TYPES else {}

    def to_prompt(self) -> dict[str, Any]:
        """The argument as the prompt template sees it: TrustGraph's name, type and
        description, plus ``outline``, the whole schema as indented lines."""
        lines = outline(self.name, self.value_schema, required=self.required,
                        description=self.description)
        return {"name": self.name, "type": self.type, "description": self.description,
                "required": self.required, "outline": "\n".join(lines)}


def arguments_from_config(raw: Any) -> tuple[Argument, ...]:
    """The ``arguments`` list of a tool config item (already validated on put)."""
    return tuple(Argument.from_config(a) for a in raw or ())


def arguments_from_schema(schema: Mapping[str, Any]) -> tuple[Argument, ...]:
    """The arguments a JSON Schema ``inputSchema`` describes (``$ref``s inlined)."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    arguments = []
    for name, prop in properties.items():
        prop = _inline_refs(prop if isinstance(prop, dict) else {}, schema)
        type_ = normalize(prop).get("type", "any")
        arguments.append(Argument(
            name=str(name), type=type_ if isinstance(type_, str) else "any",
            description=str(prop.get("description") or ""), required=name in required,
            schema={k: v for k, v in prop.items() if k not in ("description", "title")}))
    return tuple(arguments)


def merge_discovered(declared: Sequence[Argument],
                     discovered: Sequence[Argument]) -> tuple[Argument, ...]:
    """What the LLM is shown when a tool both declares arguments and has a server schema.

    The declared list stays authoritative (its descriptions, its order, which optional
    arguments are worth showing); the server adds what a call needs: its required-ness, its
    constraints where the declaration has none and agrees on the type, and the arguments it
    requires that were not declared (without them no call could succeed).
    """
    by_name = {a.name: a for a in discovered}
    merged = []
    for a in declared:
        d = by_name.get(a.name)
        if d is None:
            merged.append(a)
            continue
        schema = dict(a.value_schema)
        if d.type in (a.type, "any"):
            schema = {**d.schema, **schema}
        merged.append(replace(a, required=a.required or d.required, schema=schema))
    names = {a.name for a in declared}
    return (*merged, *(d for d in discovered if d.required and d.name not in names))


def declared_schema(declared: Sequence[Argument]) -> dict[str, Any]:
    """The JSON Schema of an arguments object, from the declared arguments. It leaves
    ``additionalProperties`` open: undeclared arguments pass through."""
    return {"type": "object",
            "properties": {a.name: dict(a.value_schema) for a in declared},
            "required": [a.name for a in declared if a.required]}


def check_arguments(arguments: Any, declared: Sequence[Argument], *,
                    schema: Validator | None = None) -> list[str]:
    """What is wrong with ``arguments`` (empty when they are fine): against the declared
    arguments and, when given, the tool's own schema (a server's ``inputSchema``).

    Every problem is listed, each with its JSON path, so the LLM can fix them all in one go.
    """
    if not isinstance(arguments, dict):
        return [f"Args must be a JSON object, not {json_type(arguments)}"]
    errors = list(validator()(declared_schema(declared)).iter_errors(arguments))
    if schema is not None:
        errors += schema.iter_errors(arguments)
    return problems(errors)


def _inline_refs(node: Any, root: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``node`` with its local ``$ref``s (``#/$defs/Traveler``) replaced by what they point
    to, so that the outline needs no root; a recursive reference stays a bare type."""
    if isinstance(node, list):
        return [_inline_refs(n, root, seen) for n in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    rest = {k: _inline_refs(v, root, seen) for k, v in node.items() if k != "$ref"}
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return rest
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
    if not isinstance(target, dict):
        return rest
    if ref in seen:
        return {"type": target.get("type", "object"), **rest}
    return {**_inline_refs(target, root, (*seen, ref)), **rest}
