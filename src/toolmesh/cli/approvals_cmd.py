"""``toolmesh approvals list|approve|deny|answer``: the calls that wait for a person (a tool
whose policy asks, an MCP server's question) and their answers, through the gateway's
``approvals`` service, in the caller's workspace (docs/approvals.md). The token needs the
``approve`` capability.

A call is named by its key alone (``DIALOG/STEP/CALL``: it holds the dialog's id), or by the
dialog and the key. ``toolmesh approvals approve --watch`` asks about each request as it comes
(:mod:`toolmesh.cli.asking`) until stdin ends or Ctrl-C. Every answer says ``"via": "cli"``:
the audit records the face (``by``).

The helpers below (what a request says, a form field's value from text, the command that
answers a request, who answered) serve ``toolmesh agent`` too, which asks the person at the
terminal.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from typing import Any

from toolmesh.cli.config_cmd import add_gateway_flags
from toolmesh.cli.http import CliError, GatewayClient
from toolmesh.cli.output import local_time, print_json, print_table, printable

#: what a person may answer an MCP server's question with
ACTIONS = ("accept", "decline", "cancel")
#: the most characters of a call's arguments the list shows
ARGUMENTS_WIDTH = 60
#: the past tense of each answer, for the line that confirms it
DONE = {"approve": "approved", "deny": "denied", "accept": "accepted",
        "decline": "declined", "cancel": "cancelled", "expired": "expired"}
#: the face each answer came through (the audit's ``by.face``), in words
FACES = {"workbench": "in the Workbench", "cli": "with the CLI",
         "websocket": "over the WebSocket", "rest": "over REST",
         "mcp": "through an MCP client", "bus": "from inside the deployment"}
#: the face this command's answers are recorded with
VIA = "cli"


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "approvals", help="the calls that wait for a person: list, approve, deny, answer them",
        description="A tool whose policy asks (item field \"approval\": \"always\", or "
                    "`toolmesh serve --approval always`) makes its dialog wait before each "
                    "call until a person approves or denies it; an MCP server's question "
                    "during a call waits for an answer the same way. The token needs the "
                    "'approve' capability.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = actions.add_parser("list", help="what waits for an answer, oldest first")
    approve = actions.add_parser(
        "approve", help="let a waiting call run (--watch: ask about each as it comes)",
        description="Approves the exact call waiting: without --digest the command looks "
                    "the call up first and prints what it approves. With --watch it asks "
                    "about every request of the workspace as it comes, y/n (and an MCP "
                    "server's questions field by field), until stdin ends or Ctrl-C.")
    deny = actions.add_parser("deny", help="refuse a waiting call: it is not run, and the "
                                           "model is told (with your reason)")
    answer = actions.add_parser(
        "answer", help="answer an MCP server's question",
        description="accept (with the form's values as --field NAME=VALUE), decline or "
                    "cancel. Values are read as the form's schema says: numbers, "
                    "true/false, one of an enum's choices.")
    for sub in (approve, deny, answer):
        sub.add_argument("ids", metavar="[DIALOG] CALL", nargs="*" if sub is approve else "+",
                         help="the call's key, DIALOG/STEP/CALL (from `toolmesh approvals "
                              "list`); the dialog's id before it may be given too")
    approve.add_argument("--watch", action="store_true",
                         help="ask about each request as it comes (stdin: the answers; ends "
                              "at its end or with Ctrl-C)")
    approve.add_argument("--digest", help="the digest of the call approved (from the "
                                          "approval request or `toolmesh approvals list "
                                          "--json`); default: the digest of the call waiting")
    deny.add_argument("--reason", help="why, for the model (it sees it)")
    answer.add_argument("action_taken", metavar="accept|decline|cancel", choices=ACTIONS)
    answer.add_argument("--field", action="append", default=[], metavar="NAME=VALUE",
                        help="a value of the form (repeat for each field)")
    for sub in (ls, approve, deny, answer):
        sub.add_argument("-f", "--flow", default="default", help="flow (default: %(default)s)")
        sub.add_argument("--json", action="store_true", help="print the gateway's answer as JSON")
        add_gateway_flags(sub)
        sub.set_defaults(run=run, sync=True)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "watch", False):
        if args.ids or args.digest or args.json:
            raise CliError("--watch answers every request as it comes: give it no call, "
                           "--digest or --json")
        from toolmesh.cli.loop import run as run_async
        from toolmesh.cli.watch import watch

        return run_async(watch(args)) or 0
    client = GatewayClient(args.url, token=args.token)
    path = f"api/v1/flow/{args.flow}/service/approvals"

    def post(body: dict[str, Any]) -> dict[str, Any]:
        return client.post(path, {"workspace": args.workspace, **body})

    if args.action == "list":
        listed = post({"operation": "list"})
        if args.json:
            print_json(listed)
            return 0
        return _list(listed, args.workspace)
    dialog, call = _ids(args.ids)
    which = {"call": call, **({"dialog": dialog} if dialog else {}), "via": VIA}
    asked: dict[str, Any] | None = None
    if args.action == "approve":
        body: dict[str, Any] = {"operation": "approve", **which}
        if args.digest:
            body["digest"] = args.digest
        else:
            asked = _waiting(post({"operation": "list"}), dialog, call, args.workspace)
            if asked.get("kind") == "elicitation":
                raise CliError(f"bad-request: call {call!r} is a question of an MCP "
                               f"server: answer it with `toolmesh approvals answer`")
            body["digest"] = asked.get("digest")
            print(f"approving {describe(asked)}", file=sys.stderr, flush=True)
    elif args.action == "deny":
        body = {"operation": "deny", **which}
        if args.reason is not None:
            body["reason"] = args.reason
    else:
        body = {"operation": "answer", **which, "action": args.action_taken}
        if args.action_taken == "accept":
            if args.field:
                asked = _find(post({"operation": "list"}), dialog, call)
            body["content"] = form_content(args.field, (asked or {}).get("schema"))
        elif args.field:
            raise CliError(f"--field goes with accept, not {args.action_taken}")
    answered = post(body).get("answer") or {}
    if args.json:
        print_json(answered)
        return 0
    decision = str(answered.get("decision", body.get("action", body["operation"])))
    line = (f"{DONE.get(decision, decision)} call {call} of dialog "
            f"{answered.get('dialog') or dialog}")
    if asked is not None and asked.get("kind") != "elicitation":
        line += f": {describe(asked)}"
    if answered.get("reason"):
        line += f" (reason: {answered['reason']})"
    print(printable(line))
    return 0


def _list(answer: dict[str, Any], workspace: str) -> int:
    waiting = answer.get("approvals")
    if not isinstance(waiting, list):
        raise CliError(f"the agent answered without a list: {json.dumps(answer)[:200]}")
    if not waiting:
        print(f"nothing waits for an answer in workspace "
              f"{answer.get('workspace', workspace)!r}", file=sys.stderr)
        return 0
    rows = [[str(r.get("call")), str(r.get("tool")), _short(what(r), ARGUMENTS_WIDTH),
             local_time(r.get("expires"))] for r in waiting]
    print_table(["CALL", "TOOL", "ARGUMENTS", "EXPIRES"], rows)
    return 0


def _ids(ids: list[str]) -> tuple[str | None, str]:
    """The dialog (``None``: the call's key names it) and the call the ids name."""
    if len(ids) == 1:
        return None, ids[0]
    if len(ids) == 2:
        return ids[0], ids[1]
    raise CliError("name the call by its key (DIALOG/STEP/CALL, as `toolmesh approvals list` "
                   "shows it), or by its dialog and its key")


def _find(listed: dict[str, Any], dialog: str | None, call: str) -> dict[str, Any] | None:
    for request in listed.get("approvals") or []:
        if request.get("call") == call and dialog in (None, request.get("dialog")):
            return request  # type: ignore[no-any-return]
    return None


def _waiting(listed: dict[str, Any], dialog: str | None, call: str,
             workspace: str) -> dict[str, Any]:
    found = _find(listed, dialog, call)
    if found is None:
        of = f" of dialog {dialog!r}" if dialog else ""
        raise CliError(f"not-found: no call {call!r}{of} waits for an answer in workspace "
                       f"{workspace!r} (`toolmesh approvals list` shows those that do)")
    return found


# -- shared with `toolmesh agent` ---------------------------------------------------------------

def what(request: dict[str, Any]) -> str:
    """What a request is about: the call's arguments as JSON, or the server's question."""
    if request.get("kind") == "elicitation":
        return f"asks: {request.get('message') or ''}"
    return json.dumps(request.get("arguments"), ensure_ascii=False)


def describe(request: dict[str, Any]) -> str:
    """The request in one line for a person: ``send {"to": "bob"}`` (the exact call)."""
    return printable(f"{request.get('tool')} {what(request)}")


def answer_command(request: dict[str, Any], *, url: str | None = None,
                   workspace: str = "default") -> str:
    """The command that answers ``request`` from another terminal."""
    which = shlex.quote(str(request.get("call")))
    if request.get("kind") == "elicitation":
        words = ["toolmesh approvals answer", which, "accept|decline|cancel"]
        if request.get("mode") != "url":
            words.append("[--field NAME=VALUE ...]")
    else:
        words = ["toolmesh approvals approve", which]
    where = (["-u", url] if url else []) + (["-w", workspace] if workspace != "default" else [])
    return " ".join([*words, *map(shlex.quote, where)])


def approver_text(by: Any) -> str:
    """Who gave an answer, and through which face: ``by ci (t_1a2b) with the CLI``
    (``by someone`` for an answer recorded without its approver)."""
    if not isinstance(by, dict):
        return "by someone (not recorded)"
    name, id = by.get("name"), by.get("id")
    who = f"{name} ({id})" if name else str(id)
    face = FACES.get(str(by.get("face")), f"through {by.get('face')}")
    return printable(f"by {who} {face}")


def form_content(fields: list[str], schema: Any) -> dict[str, Any]:
    """The form's values from ``NAME=VALUE`` texts, each read as ``schema`` types it."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    content: dict[str, Any] = {}
    for item in fields:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise CliError(f"--field {item!r}: write NAME=VALUE")
        prop = properties.get(name) if isinstance(properties, dict) else None
        try:
            content[name] = field_value(prop if isinstance(prop, dict) else {}, text)
        except ValueError as e:
            raise CliError(f"--field {name}: {e}") from None
    return content


def choices(prop: dict[str, Any]) -> list[tuple[Any, str | None]]:
    """The values an enum field allows, each with its title if it has one: ``enum`` (titled
    by ``enumNames``), or ``oneOf`` / ``anyOf`` of ``const`` (titled by ``title``); for a
    multiple choice (``"type": "array"``), those of its ``items``. None: not an enum."""
    if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
        return choices(prop["items"])
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames")
        titles = names if isinstance(names, list) and len(names) == len(prop["enum"]) \
            else [None] * len(prop["enum"])
        return [(v, None if t is None else str(t)) for v, t in zip(prop["enum"], titles)]
    options = prop.get("oneOf") or prop.get("anyOf")
    if isinstance(options, list) and all(isinstance(o, dict) and "const" in o for o in options):
        return [(o["const"], str(o["title"]) if o.get("title") else None) for o in options]
    return []


YES = ("y", "yes", "true", "1")
NO = ("n", "no", "false", "0")


def field_value(prop: dict[str, Any], text: str) -> Any:
    """The value of a form field of schema ``prop`` typed as ``text`` (a choice by its value
    or its title; several, comma-separated, for a multiple choice); ``ValueError`` saying
    what is expected when it does not fit."""
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items") if isinstance(prop.get("items"), dict) else {}
        return [field_value(items, part.strip()) for part in text.split(",") if part.strip()]
    allowed = choices(prop)
    if allowed:
        for value, title in allowed:
            if text == str(value) or (title is not None and text.lower() == title.lower()):
                return value
        raise ValueError("choose one of " + ", ".join(str(v) for v, _ in allowed))
    if kind == "boolean":
        if text.strip().lower() in YES:
            return True
        if text.strip().lower() in NO:
            return False
        raise ValueError("y or n is expected")
    if kind in ("integer", "number"):
        return _number(prop, text.strip())
    low, high = prop.get("minLength"), prop.get("maxLength")
    if isinstance(low, int) and len(text) < low:
        raise ValueError(f"at least {low} characters are expected")
    if isinstance(high, int) and len(text) > high:
        raise ValueError(f"at most {high} characters are expected")
    return text


def _number(prop: dict[str, Any], text: str) -> int | float:
    number: int | float
    try:
        number = int(text)
    except ValueError:
        if prop.get("type") == "integer":
            raise ValueError("a whole number is expected") from None
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise ValueError("a number is expected") from None
    low, high = prop.get("minimum"), prop.get("maximum")
    if isinstance(low, (int, float)) and number < low:
        raise ValueError(f"{low:g} or more is expected")
    if isinstance(high, (int, float)) and number > high:
        raise ValueError(f"{high:g} or less is expected")
    return number


def _short(text: str, most: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most - 1] + "…"
