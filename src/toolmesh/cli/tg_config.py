"""The seed's config commands with TrustGraph's flags: ``tg-put-config-item`` and friends.

They behave like trustgraph-cli's, with two differences users rely on: ``tg-put-config-item``
also takes the seed's form ``tg-put-config-item TYPE/KEY < file.json``, and every command
exits non-zero with a one-line error when it fails (trustgraph-cli exits 0).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence

from toolmesh.cli import config_cmd
from toolmesh.cli.http import CliError, default_url
from toolmesh.cli.pipes import closed_pipe_safe


def parser(prog: str, description: str,
           url_flags: tuple[str, ...] = ("-u", "--api-url")) -> argparse.ArgumentParser:
    """A parser with trustgraph-cli's common flags (the gateway URL, token, workspace)."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument(*url_flags, dest="url", default=default_url(),
                   help="gateway URL (env TRUSTGRAPH_URL / TOOLMESH_URL; default %(default)s)")
    p.add_argument("-t", "--token", default=os.environ.get("TRUSTGRAPH_TOKEN") or None,
                   help="bearer token (env TRUSTGRAPH_TOKEN)")
    p.add_argument("-w", "--workspace",
                   default=os.environ.get("TRUSTGRAPH_WORKSPACE") or config_cmd.DEFAULT_WORKSPACE,
                   help="workspace (env TRUSTGRAPH_WORKSPACE; default %(default)s)")
    return p


def guarded(command: Callable[[Sequence[str] | None], int]) -> Callable[[Sequence[str] | None], int]:
    """Turn a command's errors into one line on stderr and exit status 1 (and a closed
    stdout, ``tg-show-config | head -1``, into a quiet exit with status 141)."""
    def main(argv: Sequence[str] | None = None) -> int:
        def run() -> int:
            try:
                return command(argv)
            except CliError as e:
                print(f"{os.path.basename(sys.argv[0]) or 'tg'}: error: {e.message}",
                      file=sys.stderr)
                return 1
        return closed_pipe_safe(run)
    return main


def type_and_key(p: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str, str]:
    if args.item:
        if args.type or args.key:
            p.error("give TYPE/KEY or --type/--key, not both")
        return config_cmd.split_item(args.item)
    if not args.type or not args.key:
        p.error("give TYPE/KEY or both --type and --key")
    return args.type, args.key


@guarded
def put_config_item(argv: Sequence[str] | None = None) -> int:
    p = parser("tg-put-config-item", "Store a config item: tg-put-config-item TYPE/KEY < file, "
               "or --type T --key K (--value V | --stdin).")
    p.add_argument("item", nargs="?", metavar="TYPE/KEY", help="the seed's form; value from stdin")
    p.add_argument("--type")
    p.add_argument("--key")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--value")
    source.add_argument("--stdin", action="store_true", help="read the value from stdin")
    args = p.parse_args(argv)
    type, key = type_and_key(p, args)
    value = args.value if args.value is not None else config_cmd.read_value(None)
    config_cmd.put(args, type, key, value)
    print(f"Configuration item set: {type}/{key}")
    return 0


@guarded
def get_config_item(argv: Sequence[str] | None = None) -> int:
    p = parser("tg-get-config-item", "Print a config item's value.")
    p.add_argument("item", nargs="?", metavar="TYPE/KEY")
    p.add_argument("--type")
    p.add_argument("--key")
    p.add_argument("--format", choices=["text", "json"], default="text")
    args = p.parse_args(argv)
    value = config_cmd.get(args, *type_and_key(p, args))
    print(value if args.format == "text" else json.dumps(value))
    return 0


@guarded
def list_config_items(argv: Sequence[str] | None = None) -> int:
    p = parser("tg-list-config-items", "List the keys of a config type.")
    p.add_argument("--type", required=True)
    p.add_argument("--format", choices=["text", "json"], default="text")
    args = p.parse_args(argv)
    keys = config_cmd.list_keys(args, args.type)
    print("\n".join(keys) if args.format == "text" else json.dumps(keys))
    return 0


@guarded
def delete_config_item(argv: Sequence[str] | None = None) -> int:
    p = parser("tg-delete-config-item", "Delete a config item.")
    p.add_argument("item", nargs="?", metavar="TYPE/KEY")
    p.add_argument("--type")
    p.add_argument("--key")
    args = p.parse_args(argv)
    type, key = type_and_key(p, args)
    config_cmd.delete(args, [(type, key)])
    print(f"Configuration item deleted: {type}/{key}")
    return 0


@guarded
def show_config(argv: Sequence[str] | None = None) -> int:
    p = parser("tg-show-config", "Print the whole workspace's config.")
    args = p.parse_args(argv)
    result = config_cmd.show(args)
    print(f"Version: {result['version']}")
    print(json.dumps(result["config"], indent=4))
    return 0
