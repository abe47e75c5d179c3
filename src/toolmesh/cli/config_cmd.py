"""``toolmesh config put|get|list|delete|show|history`` through the gateway."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from toolmesh.cli.http import CliError, GatewayClient

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
    ls = sub.add_parser("list", help="list the keys of a type")
    ls.add_argument("type")
    rm = sub.add_parser("delete", help="delete items")
    rm.add_argument("items", metavar="TYPE/KEY", nargs="+")
    show = sub.add_parser("show", help="print the whole workspace as JSON")
    show.add_argument("--type", help="only this type")
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


def show(args: argparse.Namespace) -> dict[str, Any]:
    response = config_request(args, {"operation": "config"})
    config = response.get("config") or {}
    return {"version": response.get("version"), "config": config}


def decoded(value: str) -> Any:
    """A stored value as JSON when it is JSON, else the text."""
    try:
        return json.loads(value)
    except (TypeError, json.JSONDecodeError):
        return value


def run(args: argparse.Namespace) -> int:
    command = args.config_command
    if command == "put":
        type, key = split_item(args.item)
        version = put(args, type, key, read_value(args.file))
        print(f"stored {type}/{key} (version {version})", file=sys.stderr)
    elif command == "get":
        print(get(args, *split_item(args.item)))
    elif command == "list":
        for key in list_keys(args, args.type):
            print(key)
    elif command == "delete":
        version = delete(args, [split_item(i) for i in args.items])
        print(f"deleted {len(args.items)} item(s) (version {version})", file=sys.stderr)
    elif command == "history":
        print_history(args)
    elif command == "show":
        result = show(args)
        config = result["config"]
        if args.type:
            config = {args.type: config.get(args.type, {})}
        print(json.dumps({"version": result["version"],
                          "config": {t: {k: decoded(v) for k, v in sorted(items.items())}
                                     for t, items in sorted(config.items())}}, indent=2))
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
    history.add_argument("--json", action="store_true", help="print JSON")
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


def print_history(args: argparse.Namespace) -> None:
    entries = history_request(args)
    if args.json:
        print(json.dumps(entries, indent=2))
        return
    for e in entries:
        version = f"v{e['version']}" if e.get("version") is not None else "-"
        print(f"{e.get('at')}  {version:>6}  {e.get('operation', ''):<12}  "
              f"{e.get('workspace')}  {e.get('type')}/{e.get('key')}  by {e.get('actor')}")
    if not entries:
        print("no changes recorded", file=sys.stderr)
