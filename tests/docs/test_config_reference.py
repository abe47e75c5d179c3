"""docs/reference/config.md is written by hand; these tests keep it from drifting from the
validation, which is code (no schema to generate the page from).

The field names are read from the validation's source (its syntax tree: what each type's
validator reads from an item) and from the schema modules' own field lists, so a field added
to the code and not to the page fails here, under the type it belongs to.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from toolmesh.config import validation
from toolmesh.prompt import templates
from toolmesh.schema import mcp_auth, tool_arguments, tool_types

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "config.md"

#: the _Item methods whose first argument names the field they read
FIELD_READERS = {"string", "string_list", "queue", "fail"}


def sections() -> dict[str, str]:
    """The page's text under each ``## `TYPE` `` heading (its subsections included)."""
    found: dict[str, str] = {}
    name = None
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        heading = re.fullmatch(r"## `([a-z-]+)`", line)
        if heading:
            name = heading.group(1)
            found[name] = ""
        elif line.startswith("## "):
            name = None
        elif name is not None:
            found[name] += line + "\n"
    return found


def _fields_read(node: ast.AST, methods: dict[str, set[str]]) -> set[str]:
    """The field names a validator reads: ``item.string("id")``, ``item.value.get("url")``,
    ``p.get("name")``, and those of the ``_Item`` methods it calls (``item.approval()``)."""
    fields: set[str] = set()
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        func = call.func
        if not isinstance(func, ast.Attribute):
            continue
        first = call.args[0] if call.args else None
        named = first.value if isinstance(first, ast.Constant) and isinstance(first.value,
                                                                               str) else None
        if func.attr == "get" and named:
            fields.add(named)
        elif func.attr in FIELD_READERS and named:
            fields.add(named)
        elif func.attr in methods:
            fields |= methods[func.attr]
    # "config-params[0]" and the like name a field with a place in it
    return {f for f in fields if re.fullmatch(r"[a-z][a-z-]*", f)}


def validated_fields() -> dict[str, set[str]]:
    """Type -> the field names its validator reads, from validation.py's syntax tree."""
    tree = ast.parse(inspect.getsource(validation))
    item_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_Item")
    methods: dict[str, set[str]] = {}
    for method in (n for n in item_class.body if isinstance(n, ast.FunctionDef)):
        if method.name not in FIELD_READERS:
            methods[method.name] = _fields_read(method, {})
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    by_type = {type_: functions[check.__name__] for type_, check in
               validation.VALIDATORS.items()}
    by_type["mcp"] = functions["_mcp"]
    fields = {type_: _fields_read(fn, methods) for type_, fn in by_type.items()}
    # the fields a tool type needs are read through a loop over this table
    fields["tool"] |= {f for needed in validation.TOOL_TYPES.values() for f in needed}
    return fields


def test_the_extraction_finds_fields_of_every_validated_type() -> None:
    # a check that could never fail would pass an empty page: the extraction must find the
    # fields a reader of validation.py sees
    fields = validated_fields()
    assert {"id", "request-queue", "response-queue", "config-params", "enabled"} <= fields[
        "tool-service"]
    assert {"type", "name", "description", "template", "mcp-tool", "service", "arguments",
            "group", "applicable-states", "state", "approval", "enabled"} <= fields["tool"]
    assert {"transport", "url", "command", "args", "env", "remote-name", "sampling", "reach",
            "protocol", "approval", "auth-token", "auth"} <= fields["mcp"]
    assert {"description"} <= fields["flow"]
    assert {"accept-announcements", "tool-calling"} <= fields["settings"]


def test_every_validated_type_has_a_section() -> None:
    missing = set(validated_fields()) - set(sections())
    assert not missing, f"docs/reference/config.md has no '## `TYPE`' section for {missing}"


@pytest.mark.parametrize("type_", sorted(validated_fields()))
def test_every_field_the_validation_reads_is_on_the_page(type_: str) -> None:
    text = sections()[type_]
    missing = sorted(f for f in validated_fields()[type_] if f"`{f}`" not in text)
    assert not missing, f"docs/reference/config.md, section {type_}: no `{missing}`"


def test_the_values_the_validation_takes_are_on_the_page() -> None:
    page = sections()
    wanted = {
        "tool": [*validation.TOOL_TYPES, *validation.APPROVAL_VALUES,
                 *tool_arguments.OWN_FIELDS, *tool_arguments.ARGUMENT_TYPES,
                 *tool_arguments.VALUE_KEYWORDS, *tool_types.TRUSTGRAPH_ONLY],
        "mcp": [*validation.MCP_TRANSPORTS, *validation.APPROVAL_VALUES, *mcp_auth.FIELDS,
                *mcp_auth.PERS, *mcp_auth.GRANTS],
        "prompt": [templates.SYSTEM_KEY, templates.INDEX_KEY, templates.TEMPLATE_PREFIX + "<id>",
                   *templates.RESPONSE_TYPES],
    }
    for type_, names in wanted.items():
        missing = sorted({n for n in names if f"`{n}`" not in page[type_]})
        assert not missing, f"docs/reference/config.md, section {type_}: no {missing}"


def test_the_template_fields_the_prompt_service_reads_are_on_the_page() -> None:
    tree = ast.parse(inspect.getsource(templates))
    read = {call.args[0].value for call in ast.walk(tree)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "get" and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "raw" and call.args
            and isinstance(call.args[0], ast.Constant)}
    assert {"prompt", "response-type", "system"} <= read
    missing = sorted(f for f in read if f"`{f}`" not in sections()["prompt"])
    assert not missing, f"docs/reference/config.md, section prompt: no {missing}"
