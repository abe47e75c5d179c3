"""The REST API reference (docs/reference/rest-api.md) as Markdown, read from the gateway's
OpenAPI document.

The document is the one the gateway serves at ``GET /api/v1/openapi.json``, built by
``toolmesh.gateway.openapi.document()`` from the code; ``docs/openapi.json`` is a copy of it
that tests/gateway/test_openapi.py keeps current, and tests/gateway checks the document against
every route the gateway serves. Every path and method gets a section (grouped by the
document's tags) with its summary, description, parameters, request body and responses; the
schemas and the shared responses they name follow, once each, linked from where they are used.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
#: how deep nested object properties are listed inline (``error.type``); deeper ones are
#: shown as their type
DEPTH = 3

Json = Mapping[str, Any]


def operations(doc: Json) -> Iterator[tuple[str, str, Json]]:
    """Every ``(METHOD, path, operation)`` of the document, in its order."""
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def anchor(method: str, path: str) -> str:
    """An operation's section id: ``post-api-v1-flow-flow-service-agent``."""
    return method.lower() + "-" + "-".join(re.findall(r"[a-z0-9]+", path.lower()))


def markdown(doc: Json) -> str:
    """The whole reference: the document's own description, the operations by tag, then the
    shared responses and the schemas."""
    out = [_text(doc["info"].get("description", "")), ""]
    for tag in _tags(doc):
        ops = [(m, p, op) for m, p, op in operations(doc) if (op.get("tags") or [""])[0] == tag]
        if not ops:
            continue
        described = {t["name"]: t.get("description", "") for t in doc.get("tags", [])}
        out += [f"## {_tag_title(tag)}", ""]
        if described.get(tag):
            out += [_text(described[tag]), ""]
        for method, path, op in ops:
            out += _operation(doc, method, path, op)
    components = doc.get("components", {})
    if components.get("responses"):
        out += ["## Shared responses", ""]
        for name, response in components["responses"].items():
            out += [f"### {name} {{#response-{name.lower()}}}", "", _text(response["description"]),
                    ""]
            out += _content(doc, response.get("content", {}))
    if components.get("schemas"):
        out += ["## Schemas", ""]
        for name, schema in components["schemas"].items():
            out += [f"### {name} {{#schema-{name.lower()}}}", ""]
            out += _schema_block(doc, schema)
    return "\n".join(out)


def _tag_title(tag: str) -> str:
    """``per-flow services`` -> ``Per-flow services``; a short tag is read as an acronym
    (``mcp`` -> ``MCP``)."""
    if not tag:
        return "Other routes"
    return tag.upper() if len(tag) <= 3 else tag[:1].upper() + tag[1:]


def _tags(doc: Json) -> list[str]:
    tags = [t["name"] for t in doc.get("tags", [])]
    for _, _, op in operations(doc):
        tag = (op.get("tags") or [""])[0]
        if tag not in tags:
            tags.append(tag)
    return tags


def _operation(doc: Json, method: str, path: str, op: Json) -> list[str]:
    out = [f"### `{method} {path}` {{#{anchor(method, path)}}}", ""]
    if op.get("summary"):
        out += [f"**{_text(op['summary'])}**", ""]
    if op.get("description"):
        out += [_text(op["description"]), ""]
    params = [_resolve(doc, p) for p in op.get("parameters", [])]
    if params:
        out += ["**Parameters**", "", "| Name | In | Required | Type | Description |",
                "|---|---|---|---|---|"]
        for p in params:
            out.append(f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} | "
                       f"{_type(doc, p.get('schema', {}))} | {_cell(p.get('description', ''))} |")
        out.append("")
    body = op.get("requestBody")
    if body:
        body = _resolve(doc, body)
        needed = "required" if body.get("required") else "optional"
        out += [f"**Request body** ({needed})", ""]
        if body.get("description"):
            out += [_text(body["description"]), ""]
        out += _content(doc, body.get("content", {}))
    out += ["**Responses**", "", "| Status | Description | Body |", "|---|---|---|"]
    for status, response in op.get("responses", {}).items():
        out.append(f"| {status} | {_response_summary(doc, response)} | "
                   f"{_content_cell(doc, _resolve(doc, response).get('content', {}))} |")
    return [*out, ""]


def _response_summary(doc: Json, response: Json) -> str:
    if "$ref" in response:
        name = response["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#response-{name.lower()})"
    return _cell(response.get("description", ""))


def _content(doc: Json, content: Json) -> list[str]:
    """A body's media types, each with its schema."""
    out: list[str] = []
    for media, entry in content.items():
        schema = entry.get("schema")
        if schema is None:
            out += [f"`{media}`", ""]
        elif "$ref" in schema:
            out += [f"`{media}`: {_type(doc, schema)}", ""]
        else:
            out += [f"`{media}`:", ""]
            out += _schema_block(doc, schema)
    return out


def _content_cell(doc: Json, content: Json) -> str:
    shown = []
    for media, entry in content.items():
        schema = entry.get("schema")
        shown.append(f"`{media}`" + (f" {_type(doc, schema)}" if schema else ""))
    return "<br>".join(shown)


def _schema_block(doc: Json, schema: Json) -> list[str]:
    """A schema: its description, its variants (``oneOf``) or its properties as a table."""
    out: list[str] = []
    if schema.get("description"):
        out += [_text(schema["description"]), ""]
    variants = schema.get("oneOf") or schema.get("anyOf")
    if variants and not schema.get("properties"):
        word = "One" if "oneOf" in schema else "Any"
        out += [f"{word} of:", ""]
        for i, variant in enumerate(variants, 1):
            if "$ref" in variant or not (variant.get("properties") or variant.get("description")):
                out += [f"{i}. {_type(doc, variant)}", ""]
                continue
            title = variant.get("title")
            out += [f"{i}. " + (f"**{_text(title)}**" if title else _type(doc, variant)), ""]
            out += ["    " + line if line else "" for line in _schema_block(doc, variant)]
        return out
    if "allOf" in schema:  # a named schema narrowed: what the narrowing says, as fields
        out += [f"{_type(doc, schema)}, with:", ""]
        narrowed: dict[str, Any] = {}
        for part in schema["allOf"]:
            if "$ref" not in part:
                narrowed.update(part.get("properties", {}))
        schema = {"properties": narrowed}
    rows = list(_rows(doc, schema, prefix="", depth=0))
    if rows:
        out += ["| Field | Type | Required | Description |", "|---|---|---|---|"]
        out += [f"| `{name}` | {kind} | {'yes' if required else 'no'} | {_cell(text)} |"
                for name, kind, required, text in rows]
        out.append("")
    else:
        out += [f"Type: {_type(doc, schema)}", ""]
    return out


def _rows(doc: Json, schema: Json, *, prefix: str, depth: int) -> Iterator[tuple[str, str, bool,
                                                                                   str]]:
    """``(field, type, required, description)`` of an object's properties, nested objects'
    (and arrays of objects') fields following theirs as ``a.b`` and ``a[].b``."""
    required = set(schema.get("required", ()))
    for name, prop in (schema.get("properties") or {}).items():
        field = prefix + name
        yield field, _type(doc, prop), name in required, prop.get("description", "")
        if depth + 1 >= DEPTH or "$ref" in prop:
            continue
        if prop.get("properties"):
            yield from _rows(doc, prop, prefix=field + ".", depth=depth + 1)
        items = prop.get("items")
        if isinstance(items, Mapping) and items.get("properties"):
            yield from _rows(doc, items, prefix=field + "[].", depth=depth + 1)


def _type(doc: Json, schema: Any) -> str:
    """A short type: ``string``, ``array of [ConfigKey](#schema-configkey)``, ``"get"``,
    ``string | array of string``, ``one of `a`, `b` ``."""
    if not isinstance(schema, Mapping) or not schema:
        return "any"
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#schema-{name.lower()})"
    if "const" in schema:
        return f"`{_code(schema['const'])}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{_code(v)}`" for v in schema["enum"])
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " \\| ".join(_type(doc, s) for s in schema[key])
    if "allOf" in schema:  # a named schema narrowed by the others: named by the first
        named = [s for s in schema["allOf"] if "$ref" in s]
        return " & ".join(_type(doc, s) for s in named) if named else "object"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " \\| ".join(kind)
    if kind == "array":
        return f"array of {_type(doc, schema.get('items', {}))}"
    if kind is None and "properties" in schema:
        return "object"
    return kind or "any"


def _resolve(doc: Json, item: Json) -> Json:
    """``item``, or what its ``$ref`` (``#/components/...``) names."""
    while "$ref" in item:
        node: Any = doc
        for part in item["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        item = node
    return item


def _code(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text.replace("`", "'").replace("|", "\\|")


#: a Markdown code span
_CODE = re.compile(r"(`[^`]*`)")


def _text(text: str) -> str:
    """The document's prose (CommonMark, as OpenAPI's is) as this site's Markdown: ``<`` and
    ``&`` escaped outside code spans, since the document's text is not meant as HTML
    (``Bearer <token>``); code spans show their text as written anyway."""
    parts = _CODE.split(text)
    return "".join(p if i % 2 else html.escape(p, quote=False) for i, p in enumerate(parts))


def _cell(text: str) -> str:
    """Prose inside a table cell: one line, ``|`` escaped."""
    return _text(" ".join(text.split())).replace("|", "\\|")
