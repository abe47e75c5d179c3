"""``toolmesh dialogs list`` and ``toolmesh dialogs show ID``: the dialogs the agent recorded
(docs/dialogs.md), through the gateway's ``dialogs`` service, in the caller's workspace."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any

from toolmesh.cli.config_cmd import add_gateway_flags
from toolmesh.cli.http import CliError, GatewayClient
from toolmesh.cli.output import Cell, print_json, print_table

STATUS = {"answer": Cell("answer", "green"), "running": Cell("running", "cyan"),
          "abandoned": Cell("abandoned", "yellow")}


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "dialogs", help="the dialogs the agent recorded: list them, show one",
        description="The agent records each dialog as it goes (unless run with --dialogs "
                    "off): the question, every reply of the model, every tool call and its "
                    "result, the answer, with steps, tokens and times.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = actions.add_parser("list", help="the newest dialogs first")
    ls.add_argument("--status", help="only dialogs of this status (running, answer, "
                                     "abandoned, or an error type)")
    ls.add_argument("-n", "--limit", type=int, default=20,
                    help="how many (default: %(default)s, at most 1000)")
    show = actions.add_parser("show", help="one dialog, step by step")
    show.add_argument("id", help="the dialog's id (from `toolmesh dialogs list`)")
    for sub in (ls, show):
        sub.add_argument("-f", "--flow", default="default", help="flow (default: %(default)s)")
        sub.add_argument("--json", action="store_true", help="print the agent's answer as JSON")
        add_gateway_flags(sub)
        sub.set_defaults(run=run, sync=True)


def run(args: argparse.Namespace) -> int:
    client = GatewayClient(args.url, token=args.token)
    body: dict[str, Any] = {"workspace": args.workspace, "operation": args.action}
    if args.action == "list":
        body["limit"] = args.limit
        if args.status:
            body["status"] = args.status
    else:
        body["id"] = args.id
    answer = client.post(f"api/v1/flow/{args.flow}/service/dialogs", body)
    if args.json:
        print_json(answer)
        return 0
    if args.action == "list":
        return _list(answer, args.workspace)
    dialog = answer.get("dialog")
    if not isinstance(dialog, dict):
        raise CliError(f"the agent answered without a dialog: {json.dumps(answer)[:200]}")
    _show(dialog)
    return 0


def _list(answer: dict[str, Any], workspace: str) -> int:
    dialogs = answer.get("dialogs")
    if not isinstance(dialogs, list):
        raise CliError(f"the agent answered without a dialog list: {json.dumps(answer)[:200]}")
    if not dialogs:
        print(f"no dialogs recorded in workspace {answer.get('workspace', workspace)!r}",
              file=sys.stderr)
        return 0
    rows: list[list[str | Cell]] = []
    for d in dialogs:
        status = str(d.get("status"))
        rows.append([str(d.get("id")), str(d.get("started", ""))[:19].replace("T", " "),
                     STATUS.get(status, Cell(status, "red")), str(d.get("steps", "")),
                     str(d.get("tool_calls", "")), _tokens(d), f"{d.get('seconds', 0):.1f}",
                     _short(str(d.get("question", "")), 50)])
    print_table(["ID", "STARTED (UTC)", "STATUS", "STEPS", "CALLS", "TOKENS", "SECONDS",
                 "QUESTION"], rows, right=(3, 4, 5, 6))
    return 0


def _show(dialog: dict[str, Any]) -> None:
    print(f"dialog {dialog.get('id')}  ({dialog.get('status')}; {dialog.get('steps')} steps, "
          f"{dialog.get('tool_calls')} tool calls, {_tokens(dialog)} tokens, "
          f"{dialog.get('seconds', 0):.1f} s)")
    print(f"workspace {dialog.get('workspace')}, user {dialog.get('user')}, started "
          f"{dialog.get('started')}")
    print(f"question: {dialog.get('question')}")
    started = _when(dialog.get("started"))
    step = None
    for entry in dialog.get("entries") or []:
        body = entry.get("body") or {}
        kind = entry.get("kind")
        at = _when(entry.get("at"))
        offset = f"  (+{(at - started).total_seconds():.2f} s)" if at and started else ""
        if kind in ("offer", "reply") and body.get("step") != step:
            step = body.get("step")
            print(f"\nstep {step}{offset}")
        if kind == "offer":
            tools = ", ".join(f"{t.get('name')} ({t.get('reason')})" if t.get("reason")
                              else str(t.get("name")) for t in body.get("tools") or [])
            finder = "; find-tools for the rest" if body.get("find_tools") else ""
            print(f"  shown {body.get('shown')} of {body.get('available')} tools "
                  f"({body.get('method')}): {tools or 'none'}{finder}")
        elif kind == "reply":
            if body.get("thought"):
                print(f"  thought: {body['thought']}")
            for call in body.get("calls") or []:
                print(f"  call {call.get('name')} {json.dumps(call.get('arguments'))}"
                      f"  [{call.get('id')}]")
            if body.get("problem"):
                print(f"  unusable reply: {body['problem']}")
        elif kind == "result":
            mark = "" if body.get("ok") else " (failed)"
            mark += " (nothing new)" if body.get("redundant") else ""
            print(f"  result of {body.get('name')}{mark}{offset}: "
                  f"{_short(str(body.get('observation')), 300)}")
        elif kind == "end":
            message = body.get("message") or {}
            if message.get("message_type") == "answer":
                mark = " (cut short by the model's limit)" if message.get("cut") else ""
                print(f"\nanswer{mark}{offset}: "
                      f"{body.get('answer') or message.get('content')}")
                if message.get("token_source"):
                    print(f"tokens {message.get('token_source')} by toolmesh: the LLM's server "
                          "reported none")
            else:
                error = message.get("error") or {}
                print(f"\nerror ({error.get('type')}){offset}: {error.get('message')}")


def _when(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def _tokens(d: dict[str, Any]) -> str:
    if d.get("in_token") is None and d.get("out_token") is None:
        return "-"
    return f"{d.get('in_token') or 0}+{d.get('out_token') or 0}"


def _short(text: str, most: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most - 1] + "…"
