"""``toolmesh services``: every tool service, configured or announced, whether it has live
instances, and what became of its tools.

The answer comes from the flow's agent (the gateway's ``agent-services`` service): only the
agent hears the services that announce themselves, and knows which of their tools it offers.
A config read (``toolmesh config show``) shows configured items only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from toolmesh.cli.agent_status import agent_answer, config_version
from toolmesh.cli.config_cmd import add_gateway_flags
from toolmesh.cli.http import CliError
from toolmesh.cli.output import Cell, print_json, print_table

SERVICE = "agent-services"

#: how each tool status is shown, and in which colour
TOOL_STATUS = {"offered": Cell("offered", "green"), "overridden": Cell("overridden", "cyan"),
               "no-live-instance": Cell("no live instance", "red"),
               "not-offered": Cell("not offered", "yellow")}

EMPTY = ("no tool services in workspace {workspace!r}. Run one that announces itself "
         "(`toolmesh run MODULE:CLASS`), or describe one in config "
         "(`toolmesh tool-service register MODULE:CLASS`)")


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "services", help="tool services: configured or announced, live instances, tools",
        description="List every tool service as the flow's agent sees it: configured (a "
                    "tool-service config item), announced (running instances that announce "
                    "themselves), or both; how many instances are live, each one's host, pid "
                    "and last heartbeat; and its tools: offered, overridden by a configured "
                    "item, without a live instance, or not offered and why.")
    p.add_argument("-f", "--flow", default="default", help="flow (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the agent's answer as JSON")
    add_gateway_flags(p)
    p.set_defaults(run=run, sync=True)


def run(args: argparse.Namespace) -> int:
    answer = agent_answer(args, args.flow, SERVICE, version=config_version(args, "tool-service"))
    services = answer.get("services")
    if not isinstance(services, list):
        raise CliError(f"the agent answered without a service list: {json.dumps(answer)[:200]}")
    if args.json:
        print_json(answer)
        return 0
    if not services:
        print(EMPTY.format(workspace=answer.get("workspace", args.workspace)), file=sys.stderr)
        return 0
    now = time.time()
    rows: list[list[str | Cell]] = []
    for service in services:
        rows.extend(service_rows(service, now=now))
    print_table(["SERVICE / TOOL", "SOURCE", "LIVE", "STATUS", "INSTANCES / REASON"], rows,
                right=(2,))
    if answer.get("accepts-announcements") is False:
        print("announced tools are not offered in this workspace (the agent runs with "
              "--no-announcements, or settings/workspace has \"accept-announcements\": false)",
              file=sys.stderr)
    return 0


def service_rows(service: dict[str, Any], *, now: float) -> list[list[str | Cell]]:
    """The rows of one service: its own (with its first instance), one per further instance,
    then one per tool, indented."""
    live = service.get("live")
    instances = [instance_text(i, now=now) for i in service.get("instances") or []]
    if not instances:
        instances = [_no_instance(service, now=now)]
    rows: list[list[str | Cell]] = [[
        str(service.get("id")), Cell(source(service), "dim"),
        str(live) if isinstance(live, int) else "-", service_status(service),
        Cell(instances[0], "dim")]]
    rows.extend(["", "", "", "", Cell(text, "dim")] for text in instances[1:])
    for tool in service.get("tools") or []:
        status = TOOL_STATUS.get(str(tool.get("status")), Cell(str(tool.get("status"))))
        rows.append([f"  {tool.get('key')}", Cell(str(tool.get("source") or ""), "dim"), "",
                     status, Cell(str(tool.get("reason") or ""), "dim")])
    return rows


def source(service: dict[str, Any]) -> str:
    """``configured``, ``announced`` or ``configured+announced``."""
    parts = [name for name in ("configured", "announced") if service.get(name)]
    return "+".join(parts) or "-"


def service_status(service: dict[str, Any]) -> Cell:
    """A service in a word: disabled, live, down (announced, no instance left) or unknown."""
    live = service.get("live")
    if service.get("enabled") is False:
        return Cell("disabled", "yellow")
    if live is None:
        return Cell("unknown", "dim")  # it never announced: it may run without saying so
    return Cell("live", "green") if live > 0 else Cell("down", "red")


def instance_text(instance: dict[str, Any], *, now: float) -> str:
    """``ID (HOST pid PID), last heartbeat 3s ago``."""
    where = " ".join(part for part in (
        str(instance.get("host") or ""),
        f"pid {instance['pid']}" if instance.get("pid") is not None else "") if part)
    heard = ago(instance.get("last-heartbeat"), now=now)
    return (f"{instance.get('instance')}{f' ({where})' if where else ''}"
            f"{f', last heartbeat {heard}' if heard else ''}")


def _no_instance(service: dict[str, Any], *, now: float) -> str:
    if not service.get("announced"):
        return "does not announce itself" if service.get("live") is None \
            else "not announced under this id"
    seen = ago(service.get("last-seen"), now=now)
    return f"none (last heard {seen})" if seen else "none"


def ago(when: Any, *, now: float) -> str | None:
    """An ISO 8601 time as ``3s ago``, ``5m ago``, ``2h ago``, ``4d ago`` (``None``: no time)."""
    if not isinstance(when, str):
        return None
    from datetime import datetime  # here: only a listing with instances needs it

    try:
        seconds = max(0.0, now - datetime.fromisoformat(when).timestamp())
    except ValueError:
        return when
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{int(seconds)}s ago"
