"""TrustGraph's tool and MCP-tool commands with its flags: ``tg-set-tool``, ``tg-show-tools``,
``tg-delete-tool``, ``tg-set-mcp-tool``, ``tg-show-mcp-tools``, ``tg-delete-mcp-tool`` and
``tg-invoke-mcp-tool``.

They print what trustgraph-cli 2.11.1 prints on success. The differences: a failure is one
line on stderr and exit status 1 (trustgraph-cli prints ``Exception: ...`` and exits 0);
``tg-set-tool`` also takes ``--type tool-service --service ID --config-param k=v``, any
JSON Schema argument type and ``--argument name:type:description:required``; the MCP
commands also handle the stdio and sse transports.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from collections.abc import Sequence
from typing import Any

from toolmesh.cli import config_cmd, mcp_cmd, tools_cmd
from toolmesh.cli.http import CliError
from toolmesh.cli.tg_config import guarded, parser
from toolmesh.schema.tool_arguments import ARGUMENT_TYPES

TOOL_TYPE = "tool"

#: keys of a tool item that a --config-param must not overwrite
TOOL_FIELDS = ("name", "description", "type", "service", "arguments", "group", "state",
               "applicable-states")


# -- output ----------------------------------------------------------------------------------

def table(rows: Sequence[tuple[str, Any]], width: int = 70) -> str:
    """Two columns in tabulate's "pretty" format, as trustgraph-cli prints them.

    Written out rather than depending on tabulate for this one layout; the second column
    wraps at ``width`` like trustgraph-cli's ``maxcolwidths=[None, 70]``.
    """
    cells = [([str(k)], _wrap("" if v is None else str(v), width)) for k, v in rows]
    w1 = max((len(line) for k, _ in cells for line in k), default=0)
    w2 = max((len(line) for _, v in cells for line in v), default=0)
    rule = f"+{'-' * (w1 + 2)}+{'-' * (w2 + 2)}+"
    out = [rule]
    for k, v in cells:
        for i in range(max(len(k), len(v))):
            left = k[i] if i < len(k) else ""
            right = v[i] if i < len(v) else ""
            out.append(f"| {left.ljust(w1)} | {right.ljust(w2)} |")
    out.append(rule)
    return "\n".join(out)


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for line in text.split("\n"):
        lines.extend(textwrap.wrap(line, width) or [""])
    return lines


# -- MCP tools -------------------------------------------------------------------------------

@guarded
def set_mcp_tool(argv: Sequence[str] | None = None) -> int:
    p = parser("tg-set-mcp-tool", "Store an MCP tool (config item mcp/ID).")
    p.add_argument("-i", "--id", required=True, help="MCP tool identifier")
    p.add_argument("--tool-url", dest="server_url", help="the MCP server's URL")
    mcp_cmd.add_server_flags(p)
    args = p.parse_args(argv)
    item = readable_by_trustgraph(mcp_cmd.mcp_item(args.id, args))
    config_cmd.put(args, mcp_cmd.MCP_TYPE, args.id, json.dumps(item))
    return 0  # trustgraph-cli prints nothing on success


def readable_by_trustgraph(item: dict[str, Any]) -> dict[str, Any]:
    """An ``mcp`` item as trustgraph-cli's own ``tg-show-mcp-tools`` can show it.

    That command reads ``remote-name`` and ``url`` from every item and fails on the first
    without them (``Exception: 'url'``), so a stdio item carries ``"url": ""``: it has no URL,
    and an empty one is nothing a client could call (toolmesh ignores it, TrustGraph's own
    mcp-tool service, which speaks HTTP only, fails at once on it).
    """
    if item.get("transport") == "stdio" and "url" not in item:
        return {"url": "", **item}
    return item


@guarded
def show_mcp_tools(argv: Sequence[str] | None = None) -> int:
    p = parser("tg-show-mcp-tools", "Show the MCP tools (tokens and env values masked).")
    args = p.parse_args(argv)
    for key, item in mcp_cmd.mcp_items(args):
        fields = dict(mcp_cmd.masked(item))
        rows = [("id", key), ("remote-name", fields.pop("remote-name")),
                ("url", fields.pop("url", ""))]
        rows += [(f, t) for f, t in fields.items() if f != "auth-token"]
        # trustgraph-cli's wording: only whether a token is set, never the token
        rows.append(("auth", "Yes (configured)" if item.get("auth-token") else "No"))
        print()
        print(table(rows))
    print()
    return 0


@guarded
def delete_mcp_tool(argv: Sequence[str] | None = None) -> int:
    p = parser("tg-delete-mcp-tool", "Delete an MCP tool.")
    p.add_argument("-i", "--id", required=True)
    args = p.parse_args(argv)
    if not mcp_cmd.exists(args, mcp_cmd.MCP_TYPE, args.id):
        raise CliError(f"MCP tool '{args.id}' not found.")
    config_cmd.delete(args, [(mcp_cmd.MCP_TYPE, args.id)])
    print(f"MCP tool '{args.id}' deleted successfully.")
    return 0


@guarded
def invoke_mcp_tool(argv: Sequence[str] | None = None) -> int:
    # trustgraph-cli's invoke commands spell the gateway flag -u/--url, not --api-url
    p = parser("tg-invoke-mcp-tool", "Call an MCP tool through the gateway.",
               url_flags=("-u", "--url", "--api-url"))
    p.add_argument("-f", "--flow-id", default="default", help="flow (default: %(default)s)")
    p.add_argument("-n", "--name", required=True, metavar="tool-name", help="MCP tool name")
    mcp_cmd.add_parameter_flags(p)
    args = p.parse_args(argv)
    params = mcp_cmd.parameters(args)
    result = mcp_cmd.invoke(args, args.flow_id, args.name, params)
    print(mcp_cmd.result_text(result, indent=4))  # indent 4 as trustgraph-cli
    return 0


# -- tools -----------------------------------------------------------------------------------

#: the last part of ``--argument name:type:description:FLAG`` -> whether it is required
REQUIRED_FLAGS = {"required": True, "optional": False}


def parse_argument(spec: str) -> dict[str, Any]:
    """``name:type:description[:required|:optional]`` → an argument definition.

    The description may hold colons; a last part that is exactly ``required`` or
    ``optional`` is the flag (TrustGraph's three-part form declares an optional argument).
    """
    parts = spec.split(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise CliError(f"--argument {spec!r} is not name:type:description[:required]")
    name, type, description = parts
    if type not in ARGUMENT_TYPES:
        raise CliError(f"--argument {spec!r}: type {type!r} is not one of "
                       + ", ".join(ARGUMENT_TYPES))
    argument: dict[str, Any] = {"name": name, "type": type, "description": description}
    head, _, flag = description.rpartition(":")
    if flag in REQUIRED_FLAGS:
        argument["description"] = head
        if REQUIRED_FLAGS[flag]:
            argument["required"] = True
    return argument


def tool_item(args: argparse.Namespace) -> dict[str, Any]:
    """The ``tool/ID`` value, keyed as trustgraph-cli keys it.

    Only the command-line syntax is checked here; whether the tool is complete (a
    description, a template for a prompt tool, a service for a tool-service tool...) is the
    gateway's to say, so that every client gets the same answer.
    """
    # name, description and type always present (null when not given), as trustgraph-cli
    item: dict[str, Any] = {"name": args.name, "description": args.description,
                            "type": args.type}
    for flag, key in (("mcp_tool", "mcp-tool"), ("service", "service"),
                      ("collection", "collection"), ("template", "template"),
                      ("schema_name", "schema-name"), ("index_name", "index-name"),
                      ("limit", "limit")):
        if getattr(args, flag):
            item[key] = getattr(args, flag)
    if args.config_param:
        if args.type != "tool-service":
            raise CliError("--config-param is for --type tool-service")
        for pair in args.config_param:
            key, value = mcp_cmd.parse_pair(pair, "--config-param")
            if key in TOOL_FIELDS:
                raise CliError(f"--config-param {pair!r}: {key!r} is a tool field, "
                               "not a config param")
            item[key] = value
    if args.argument:
        arguments = [parse_argument(a) for a in args.argument]
        names = [a["name"] for a in arguments]
        if len(set(names)) != len(names):
            raise CliError("--argument names the same argument twice")
        item["arguments"] = arguments
    # present whenever the flag is, even empty, as trustgraph-cli
    if args.group is not None:
        item["group"] = args.group
    if args.state:
        item["state"] = args.state
    if args.applicable_states is not None:
        item["applicable-states"] = args.applicable_states
    return item


@guarded
def set_tool(argv: Sequence[str] | None = None) -> int:
    p = parser("tg-set-tool", "Store an agent tool (config item tool/ID).")
    p.add_argument("--id", required=True, help="the tool's config key")
    p.add_argument("--name", required=True, help="the name the LLM calls the tool by")
    p.add_argument("--description", help="what the tool does, shown to the LLM")
    p.add_argument("--type", help="text-completion, prompt, mcp-tool or tool-service "
                                  "(TrustGraph's knowledge-query, structured-query and "
                                  "row-embeddings-query are refused: nothing here serves them)")
    p.add_argument("--mcp-tool", help="mcp-tool: the id of the mcp item")
    p.add_argument("--service", help="tool-service: the id of the tool-service item")
    p.add_argument("--config-param", action="append", metavar="NAME=VALUE",
                   help="tool-service: a config-param value (repeat; NAME:=JSON for non-text)")
    p.add_argument("--collection", help="query tools: the collection")
    p.add_argument("--template", help="prompt: the template id")
    p.add_argument("--schema-name", help="row-embeddings-query: the schema")
    p.add_argument("--index-name", help="row-embeddings-query: the index")
    p.add_argument("--limit", type=int, help="row-embeddings-query: most results")
    # action=extend: several values per flag as trustgraph-cli, and the flag may also repeat
    p.add_argument("--argument", nargs="*", action="extend",
                   metavar="NAME:TYPE:DESCRIPTION[:required]",
                   help="an argument, optional unless it ends in ':required'; TYPE is one of "
                        + ", ".join(ARGUMENT_TYPES))
    p.add_argument("--group", nargs="*", action="extend", help="the tool's groups")
    p.add_argument("--state", help="the state the agent moves to after using the tool")
    p.add_argument("--applicable-states", nargs="*", action="extend",
                   help="the states the tool is offered in ('*' = all)")
    args = p.parse_args(argv)
    config_cmd.put(args, TOOL_TYPE, args.id, json.dumps(tool_item(args)))
    print("Tool set.")
    return 0


def tool_rows(key: str, data: dict[str, Any]) -> list[tuple[str, Any]]:
    """trustgraph-cli's rows for a tool, plus the ones it lacks (tool-service, arguments of
    every type); ``.get`` throughout so that one odd item cannot stop the listing."""
    tp = data.get("type")
    rows: list[tuple[str, Any]] = [("id", key), ("name", data.get("name")),
                                   ("description", data.get("description")), ("type", tp)]
    if tp == "mcp-tool":
        rows.append(("mcp-tool", data.get("mcp-tool")))
    if tp == "tool-service":
        rows.append(("service", data.get("service")))
        params = {k: v for k, v in data.items() if k not in TOOL_FIELDS}
        rows += [(f"config {k}", v if isinstance(v, str) else json.dumps(v))
                 for k, v in params.items()]
    for field in ("collection", "schema-name", "index-name", "limit"):
        if field in data and tp != "tool-service":
            rows.append((field, data[field]))
    if tp == "prompt":
        rows.append(("template", data.get("template")))
    for n, arg in enumerate(data.get("arguments") or []):
        if isinstance(arg, dict):
            required = " (required)" if arg.get("required") is True else ""
            text = (f"{arg.get('name')}: {arg.get('type', 'string')}{required}\n"
                    f"{arg.get('description', '')}")
            rows.append((f"arg {n}", text))
    if "group" in data:
        rows.append(("groups", ", ".join(data["group"]) or "(empty - no groups)"))
    if "state" in data:
        rows.append(("next state", data["state"]))
    if "applicable-states" in data:
        states = data["applicable-states"]
        rows.append(("available in", "all states" if "*" in states
                     else ", ".join(states) or "(empty - never available)"))
    return rows


#: seconds tg-show-tools waits for the agent's statuses before showing the config without them
STATUS_TIMEOUT = 10.0


def statuses(args: argparse.Namespace, version: Any) -> dict[str, str] | str:
    """Each tool key's status in words, from the flow's agent as of config ``version`` (the
    one just listed); or, when the agent cannot be asked, why (the config is still worth
    showing then)."""
    try:
        answer = tools_cmd.statuses(args, args.flow_id, timeout=STATUS_TIMEOUT,
                                    version=version if isinstance(version, int) else None)
    except CliError as e:
        return f"unknown ({e.message})"
    return {str(t.get("key")): tools_cmd.status_text(t) for t in answer.get("tools") or []
            if isinstance(t, dict)}


@guarded
def show_tools(argv: Sequence[str] | None = None) -> int:
    p = parser("tg-show-tools", "Show the agent's tools, and whether the agent offers each "
                                "(the status row; trustgraph-cli has none).")
    p.add_argument("-f", "--flow-id", default="default",
                   help="the flow whose agent says which tools it offers (default: %(default)s)")
    args = p.parse_args(argv)
    response = config_cmd.config_request(args, {"operation": "getvalues", "type": TOOL_TYPE})
    values = response.get("values") or []
    status = statuses(args, response.get("version")) if values else {}
    for v in values:
        key = str(v.get("key"))
        data = config_cmd.decoded(v.get("value"))
        rows = (tool_rows(key, data) if isinstance(data, dict)
                else [("id", key), ("error", "the stored value is not a JSON object")])
        rows.append(("status", status if isinstance(status, str) else status.get(
            key, "unknown (the agent has not loaded this item yet)")))
        print()
        print(table(rows))
    print()
    return 0


@guarded
def delete_tool(argv: Sequence[str] | None = None) -> int:
    p = parser("tg-delete-tool", "Delete an agent tool.")
    p.add_argument("--id", required=True)
    args = p.parse_args(argv)
    if not mcp_cmd.exists(args, TOOL_TYPE, args.id):
        raise CliError(f"Tool configuration for '{args.id}' not found.")
    config_cmd.delete(args, [(TOOL_TYPE, args.id)])
    print(f"Tool '{args.id}' deleted successfully.")
    return 0
