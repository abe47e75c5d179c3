"""``toolmesh tools``: the agent's tools, each offered to the LLM or not, and why.

The answer comes from the flow's agent (the gateway's ``agent-tools`` service), not from the
config: only the agent knows whether an MCP server still has a tool, or which of two tools
with one name it offers. ``tg-show-tools`` shows the same as a ``status`` row.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from toolmesh.cli.agent_status import agent_answer, config_version
from toolmesh.cli.config_cmd import add_gateway_flags
from toolmesh.cli.http import CliError
from toolmesh.cli.output import Cell, print_json, print_table, status_cell

SERVICE = "agent-tools"


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "tools", help="the agent's tools: offered or not, and why",
        description="List every tool as the flow's agent sees it — config items and the tools "
                    "of running services that announce themselves: available (offered to the "
                    "LLM) or not offered, with the reason.")
    p.add_argument("-f", "--flow", default="default", help="flow (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the agent's answer as JSON")
    add_gateway_flags(p)
    p.set_defaults(run=run, sync=True)


def statuses(args: argparse.Namespace, flow: str, *, version: int | None,
             timeout: float | None = None) -> dict[str, Any]:
    """The agent's ``agent-tools`` answer for ``flow`` (raises :class:`CliError`), from
    config ``version`` or later (the agent loads it if its tools are older); ``timeout``:
    seconds to wait (default: the gateway's deadline for the route)."""
    return agent_answer(args, flow, SERVICE, version=version, timeout=timeout)


def status_text(tool: dict[str, Any]) -> str:
    """One tool's status in words: ``available``, or ``not offered: <reason>``."""
    if tool.get("status") == "available":
        return "available"
    return f"not offered: {tool.get('reason') or 'no reason given'}"


def source(tool: dict[str, Any]) -> Cell:
    """Where a tool comes from: its config item, or a service that announced it (which one:
    `toolmesh services`, or ``service`` in ``--json``)."""
    return Cell("announced" if tool.get("source") == "announced" else "configured", "dim")


def calling_line(calling: dict[str, Any]) -> str:
    """How the agent calls tools, in one line: ``tool calling: json (detected; ...)``."""
    why = "; ".join(str(p) for p in (calling.get("source"), calling.get("detail")) if p)
    llm = f" — {calling['llm']}" if calling.get("llm") else ""
    return f"tool calling: {calling.get('tool_calling')} ({why}){llm}"


def run(args: argparse.Namespace) -> int:
    answer = statuses(args, args.flow, version=config_version(args, "tool"))
    tools = answer.get("tools")
    if not isinstance(tools, list):
        raise CliError(f"the agent answered without a tool list: {json.dumps(answer)[:200]}")
    if args.json:
        print_json(answer)
        return 0
    calling = answer.get("tool_calling")
    if isinstance(calling, dict):
        # a note beside the table, not in it: piped stdout stays one table to cut and sort
        print(calling_line(calling), file=sys.stderr)
    if not tools:
        print("no tools (add one with `tg-set-tool` or `toolmesh config put tool/KEY`, or run "
              "a tool service that announces itself: `toolmesh run MODULE:CLASS`)",
              file=sys.stderr)
        return 0
    print_table(["KEY", "NAME", "TYPE", "SOURCE", "STATUS", "REASON"],
                [[str(t.get("key")), str(t.get("name") or "-"),
                  Cell(str(t.get("type") or "-"), "dim"), source(t),
                  status_cell("available" if t.get("status") == "available" else "not offered"),
                  Cell(str(t.get("reason") or ""), "dim")] for t in tools])
    return 0
