"""``toolmesh dialogs list`` and ``toolmesh dialogs show [ID]``: the dialogs the agent recorded
(docs/dialogs.md), through the gateway's ``dialogs`` service, in the caller's workspace.

Times are shown in this machine's local time. ``show`` prints each call that waited for a
person — the request (tool, arguments, digest) and its answer, with who gave it, through which
face, and when (docs/approvals.md)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any

from toolmesh.cli.approvals_cmd import DONE, approver_text
from toolmesh.cli.config_cmd import add_gateway_flags
from toolmesh.cli.http import CliError, GatewayClient
from toolmesh.cli.output import Cell, counted, local_time, print_json, print_table, printable

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
    show.add_argument("id", nargs="?",
                      help="the dialog's id (from `toolmesh dialogs list`; default: the newest)")
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
        body["id"] = args.id or _newest(client, args)
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


def _newest(client: GatewayClient, args: argparse.Namespace) -> str:
    """The id of the newest dialog of the workspace: ``show`` with no id shows it."""
    answer = client.post(f"api/v1/flow/{args.flow}/service/dialogs",
                         {"workspace": args.workspace, "operation": "list", "limit": 1})
    dialogs = answer.get("dialogs")
    if not isinstance(dialogs, list):
        raise CliError(f"the agent answered without a dialog list: {json.dumps(answer)[:200]}")
    if not dialogs:
        raise CliError(f"no dialogs recorded in workspace "
                       f"{answer.get('workspace', args.workspace)!r}: ask the agent something "
                       "first (toolmesh agent \"...\")")
    return str(dialogs[0]["id"])


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
        rows.append([str(d.get("id")), local_time(d.get("started")),
                     STATUS.get(status, Cell(status, "red")), str(d.get("steps", "")),
                     str(d.get("tool_calls", "")), _tokens(d, label=""),
                     f"{d.get('seconds', 0):.1f}",
                     _short(str(d.get("question", "")), 50)])
    print_table(["ID", "STARTED", "STATUS", "STEPS", "CALLS", "TOKENS", "SECONDS",
                 "QUESTION"], rows, right=(3, 4, 6))
    return 0


def _show(dialog: dict[str, Any]) -> None:
    print(printable(f"dialog {dialog.get('id')}  ({dialog.get('status')}; "
                    f"{counted(dialog.get('steps'), 'step')}, "
                    f"{counted(dialog.get('tool_calls'), 'tool call')}, {_tokens(dialog)}, "
                    f"{dialog.get('seconds', 0):.1f} s)"))
    print(printable(f"workspace {dialog.get('workspace')}, user {dialog.get('user')}, "
                    f"started {local_time(dialog.get('started'), zone=True)}"))
    print(f"question: {dialog.get('question')}")
    started = _when(dialog.get("started"))
    step = None
    asked: dict[str, dict[str, Any]] = {}
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
        elif kind == "approval":
            asked[str(body.get("call"))] = body
            _request(body, offset)
        elif kind == "answer":
            _decision(body, asked.get(str(body.get("call"))), offset)
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


def _request(request: dict[str, Any], offset: str) -> None:
    """A call's request for a person: what it asks about, exactly."""
    if request.get("kind") == "elicitation":
        what = f"{request.get('tool')} asks: {request.get('message') or ''}"
        if request.get("mode") == "url":
            what += f" (open {request.get('url')})"
    else:
        what = (f"{request.get('tool')} "
                f"{json.dumps(request.get('arguments'), ensure_ascii=False)}")
    print(printable(f"  ✋ waits for a person{offset}: {what}"))
    print(printable(f"     call {request.get('call')}, digest {request.get('digest')}, expires "
                    f"{local_time(request.get('expires'))}"))


def _decision(answer: dict[str, Any], request: dict[str, Any] | None, offset: str) -> None:
    """A request's answer: what was decided, by whom, through which face, when."""
    decision = str(answer.get("decision"))
    done = DONE.get(decision, decision)
    at = local_time(answer.get("at"))
    asked, given = _when((request or {}).get("asked")), _when(answer.get("at"))
    took = f", after {(given - asked).total_seconds():.1f} s" if asked and given else ""
    if decision == "expired":
        line = f"  ⌛ expired{offset}: no one answered by {at}"
    else:
        mark = "✔" if decision in ("approve", "accept") else "✘"
        line = f"  {mark} {done} {approver_text(answer.get('by'))} at {at}{took}{offset}"
    if answer.get("reason"):
        line += f"; reason: {answer['reason']}"
    if request is not None and answer.get("digest") not in (None, request.get("digest")):
        line += f" (for digest {answer.get('digest')})"
    print(printable(line))


def _when(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def _tokens(d: dict[str, Any], *, label: str = "tokens ") -> str:
    """``tokens in 375 / out 53`` (``label``: what goes before ``in``)."""
    if d.get("in_token") is None and d.get("out_token") is None:
        return f"{label}-" if label else "-"
    return f"{label}in {d.get('in_token') or 0} / out {d.get('out_token') or 0}"


def _short(text: str, most: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most - 1] + "…"
