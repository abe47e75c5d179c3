"""``toolmesh config put|get|list|delete|show|history`` through the gateway."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from toolmesh.cli.http import CliError, GatewayClient
from toolmesh.cli.output import (
    Cell,
    print_json,
    print_table,
    printable,
    sorted_keys,
    status_cell,
)
from toolmesh.schema.json_text import loads

DEFAULT_WORKSPACE = "default"


def add_gateway_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-u", "--url", default=None,
                   help="gateway URL (env TOOLMESH_URL; default http://localhost:8888/)")
    p.add_argument("-t", "--token", default=None, help="bearer token (env TOOLMESH_TOKEN)")
    p.add_argument("-w", "--workspace", default=DEFAULT_WORKSPACE,
                   help="workspace (default: %(default)s)")


def add_parser(commands: Any) -> None:
    p = commands.add_parser("config", help="read and change config items through the gateway")
    sub = p.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    put = sub.add_parser("put", help="store an item: TYPE/KEY [FILE] (stdin when no file)")
    put.add_argument("item", metavar="TYPE/KEY")
    put.add_argument("file", nargs="?", help="file holding the value (default: stdin)")
    get = sub.add_parser("get", help="print an item's value")
    get.add_argument("item", metavar="TYPE/KEY")
    get.add_argument("--json", action="store_true",
                     help="print the value as JSON (a value that is not JSON: as a JSON string)")
    ls = sub.add_parser("list", help="list the keys of a type")
    ls.add_argument("type")
    ls.add_argument("--json", action="store_true", help="print a JSON array of the keys")
    rm = sub.add_parser("delete", help="delete items (all of them or, if one is missing, none)")
    rm.add_argument("items", metavar="TYPE/KEY", nargs="+")
    show = sub.add_parser("show", help="print the whole workspace as JSON")
    show.add_argument("--type", help="only this type")
    show.add_argument("--json", action="store_true",
                      help="print JSON (what show always prints; accepted like elsewhere)")
    history = add_history_parser(sub)
    for sp in (put, get, ls, rm, show, history):
        add_gateway_flags(sp)
        sp.set_defaults(run=run, sync=True)


def split_item(item: str) -> tuple[str, str]:
    """``TYPE/KEY`` → ``(type, key)``; the key may contain further slashes."""
    type, sep, key = item.partition("/")
    if not sep or not type or not key:
        raise CliError(f"{item!r} is not TYPE/KEY (for example tool/tell-joke)")
    return type, key


def read_value(file: str | None) -> str:
    if file is None or file == "-":
        if sys.stdin.isatty():
            print("reading the value from stdin (end with Ctrl-D)...", file=sys.stderr)
        return sys.stdin.read()
    try:
        return Path(file).read_text()
    except OSError as e:
        raise CliError(f"cannot read {file}: {e.strerror}") from None


def config_request(args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    client = GatewayClient(args.url, token=args.token)
    return client.post("api/v1/config", {"workspace": args.workspace, **body})


def put(args: argparse.Namespace, type: str, key: str, value: str) -> int:
    response = config_request(args, {"operation": "put",
                                     "values": [{"type": type, "key": key, "value": value}]})
    return int(response.get("version") or 0)


def get(args: argparse.Namespace, type: str, key: str) -> str:
    response = config_request(args, {"operation": "get", "keys": [{"type": type, "key": key}]})
    value = (response.get("values") or [{}])[0].get("value")
    if value is None:
        raise CliError(f"no config item {type}/{key} in workspace {args.workspace!r}")
    return str(value)


def list_keys(args: argparse.Namespace, type: str) -> list[str]:
    return list(config_request(args, {"operation": "list", "type": type}).get("directory") or [])


def delete(args: argparse.Namespace, keys: list[tuple[str, str]]) -> int:
    response = config_request(args, {"operation": "delete",
                                     "keys": [{"type": t, "key": k} for t, k in keys]})
    return int(response.get("version") or 0)


def missing(args: argparse.Namespace, keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Those of ``keys`` the workspace does not hold, in order."""
    response = config_request(args, {"operation": "get",
                                     "keys": [{"type": t, "key": k} for t, k in keys]})
    found = {(v.get("type"), v.get("key")) for v in response.get("values") or []
             if isinstance(v, dict) and v.get("value") is not None}
    return [k for k in keys if k not in found]


def delete_all(args: argparse.Namespace, keys: list[tuple[str, str]]) -> tuple[int, bool]:
    """Delete every one of ``keys``, or — when one of them is not there — none (a mistyped
    key is more likely than a wish to delete what is gone); the version after, and whether
    the items were seen to exist (a token that may write config but not read it cannot
    check: its delete is sent unchecked, as before).

    The service answers a delete of missing items without error (TrustGraph's
    ``tg-delete-config-item`` relies on that), so the check is made here first.
    """
    try:
        absent = missing(args, keys)
    except CliError as e:
        if "needs the 'config:read' capability" not in e.message:
            raise
        return delete(args, keys), False
    if absent:
        names = ", ".join(printable(f"{t}/{k}") for t, k in absent)
        raise CliError(f"no config item{'s' if len(absent) > 1 else ''} {names} in workspace "
                       f"{args.workspace!r}" + ("; nothing was deleted" if len(keys) > 1 else ""))
    return delete(args, keys), True


def show(args: argparse.Namespace) -> dict[str, Any]:
    response = config_request(args, {"operation": "config"})
    config = response.get("config") or {}
    return {"version": response.get("version"), "config": config}


def decoded(value: str) -> Any:
    """A stored value as JSON when it is JSON, else the text (also for JSON that cannot be
    shown safely: nested too deep, or holding lone surrogates no terminal can print)."""
    try:
        return loads(value, what="the value")
    except (TypeError, ValueError):
        return value


def run(args: argparse.Namespace) -> int:
    command = args.config_command
    if command == "put":
        type, key = split_item(args.item)
        version = put(args, type, key, read_value(args.file))
        print(f"stored {type}/{key} (version {version})", file=sys.stderr)
    elif command == "get":
        value = get(args, *split_item(args.item))
        if args.json:
            print_json(decoded(value))
        else:
            print(value)  # the stored text exactly as it is, JSON or not
    elif command == "list":
        keys = list_keys(args, args.type)
        if args.json:
            print_json(keys)
        elif keys:
            print("\n".join(printable(k) for k in keys))
        else:
            print(f"no items of type {args.type!r} in workspace {args.workspace!r}",
                  file=sys.stderr)
    elif command == "delete":
        keys = list(dict.fromkeys(split_item(i) for i in args.items))  # each item once
        version, checked = delete_all(args, keys)
        print(f"deleted {len(keys)} item(s) (version {version})" if checked else
              f"asked to delete {len(keys)} item(s) (version {version}); the token may not "
              "read config, so whether they existed was not checked", file=sys.stderr)
    elif command == "history":
        print_history(args)
    elif command == "show":
        # JSON on a terminal too: the values are nested objects no table shows whole, and
        # `config show > backup.json` must not depend on where stdout goes
        result = show(args)
        config = result["config"]
        if args.type:
            config = {args.type: config.get(args.type, {})}
        # the version first, as TrustGraph's tg-show-config prints it; the rest sorted
        print_json({"version": result["version"],
                    "config": sorted_keys({t: {k: decoded(v) for k, v in items.items()}
                                           for t, items in config.items()})},
                   sort_keys=False)
    return 0


# -- history: who changed what, when (the config service's audit) ---------------------------

def add_history_parser(sub: Any) -> argparse.ArgumentParser:
    history = sub.add_parser("history", help="who changed which items, when (newest first)")
    history.add_argument("item", nargs="?", metavar="TYPE[/KEY]",
                         help="only this type, or this item")
    history.add_argument("-n", "--limit", type=int, default=20,
                         help="how many changes to show, 1 to 1000 (default: %(default)s)")
    history.add_argument("--all-workspaces", action="store_true",
                         help="every workspace, and token changes (the admin token only)")
    history.add_argument("--json", action="store_true", help="print a JSON array of the changes")
    return history


def history_request(args: argparse.Namespace) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"operation": "history", "limit": args.limit}
    if args.item:
        type, _, key = args.item.partition("/")
        if not type:
            raise CliError(f"{args.item!r} is not TYPE or TYPE/KEY (for example tool/tell-joke)")
        body["type"] = type
        if key:
            body["key"] = key
    if args.all_workspaces:
        body["all-workspaces"] = True
    return list(config_request(args, body).get("history") or [])


HISTORY_HEADER = ("AT", "VERSION", "OPERATION", "WORKSPACE", "ITEM", "ACTOR")


def history_rows(entries: list[dict[str, Any]]) -> list[list[str | Cell]]:
    """The rows of ``config history`` (under :data:`HISTORY_HEADER`)."""
    return [[Cell(str(e.get("at") or ""), "dim"),
             "-" if e.get("version") is None else str(e["version"]),
             status_cell(str(e.get("operation") or "")), str(e.get("workspace") or ""),
             f"{e.get('type')}/{e.get('key')}", Cell(str(e.get("actor") or ""), "dim")]
            for e in entries]


def print_history(args: argparse.Namespace) -> None:
    entries = history_request(args)
    if args.json:
        print_json(entries)
    elif entries:
        print_table(HISTORY_HEADER, history_rows(entries), right={1})
    else:
        print("no changes recorded", file=sys.stderr)
