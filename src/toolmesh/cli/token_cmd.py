"""``toolmesh token create|list|revoke``: the gateway's scoped tokens, managed by its admin.

The calls go through the gateway (its ``token`` service) with the admin's token (``-t`` or
``TOOLMESH_TOKEN``; none when the gateway has none). The token a ``create`` makes is printed
once, on stdout, and never again: the store keeps only its digest.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from toolmesh.cli.http import CliError, GatewayClient
from toolmesh.cli.output import Cell, print_json, print_table
from toolmesh.config.tokens import CAPABILITIES, CAPABILITY_HELP


def _names(values: list[str] | None) -> list[str]:
    """Repeated flags, each possibly a comma-separated list."""
    return [n.strip() for v in values or () for n in v.split(",") if n.strip()]


def add_parser(commands: Any) -> None:
    p = commands.add_parser("token", help="issue, list and revoke scoped gateway tokens",
                            description="Tokens bound to workspaces and capabilities, for "
                                        "callers who should not hold the gateway's own token.")
    sub = p.add_subparsers(dest="token_command", required=True, metavar="COMMAND")
    caps = "; ".join(f"{c}: {h}" for c, h in CAPABILITY_HELP.items())
    create = sub.add_parser("create", help="make a token (printed once)",
                            description=f"Capabilities — {caps}.")
    create.add_argument("-w", "--workspace", action="append", required=True,
                        metavar="WORKSPACE",
                        help="a workspace the token may use (repeat, or comma-separate); the "
                             "first is where its requests go when they name none")
    create.add_argument("-c", "--capability", action="append", required=True, metavar="CAP",
                        help=f"what it may do: {', '.join(CAPABILITIES)} (repeat, or "
                             "comma-separate)")
    create.add_argument("--name", default="", help="a label for lists (who or what holds it)")
    ls = sub.add_parser("list", help="list the tokens (never the tokens themselves)")
    ls.add_argument("--json", action="store_true", help="print JSON")
    revoke = sub.add_parser("revoke", help="revoke tokens: refused from then on")
    revoke.add_argument("ids", metavar="ID", nargs="+")
    for sp in (create, ls, revoke):
        sp.add_argument("-u", "--url", default=None,
                        help="gateway URL (env TOOLMESH_URL; default http://localhost:8888/)")
        sp.add_argument("-t", "--token", default=None,
                        help="the gateway's admin token (env TOOLMESH_TOKEN)")
        sp.set_defaults(run=run, sync=True)


def token_request(args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    return GatewayClient(args.url, token=args.token).post("api/v1/token", body)


TOKEN_HEADER = ("ID", "NAME", "WORKSPACES", "CAPABILITIES", "CREATED")


def token_rows(tokens: list[dict[str, Any]]) -> list[list[str | Cell]]:
    """The rows of ``token list`` (under :data:`TOKEN_HEADER`)."""
    return [[str(t.get("id", "")), str(t.get("name", "")), ",".join(t.get("workspaces") or []),
             ",".join(t.get("capabilities") or []), Cell(str(t.get("created", "")), "dim")]
            for t in tokens]


def revoke(args: argparse.Namespace, ids: list[str]) -> None:
    """Revoke each of ``ids`` in turn, saying so on stderr; the first the gateway refuses (an
    unknown id, one outside the caller's scope) ends the command, naming those not tried."""
    for n, id in enumerate(ids):
        try:
            token_request(args, {"operation": "revoke", "id": id})
        except CliError as e:
            rest = ids[n + 1:]
            raise CliError(e.message + (f"; not tried: {', '.join(rest)}" if rest else "")
                           ) from None
        print(f"revoked token {id}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    command = args.token_command
    if command == "create":
        capabilities = _names(args.capability)
        unknown = [c for c in capabilities if c not in CAPABILITIES]
        if unknown:
            raise CliError(f"unknown capability {unknown[0]!r}; capabilities: "
                           f"{', '.join(CAPABILITIES)}")
        response = token_request(args, {"operation": "create",
                                         "workspaces": _names(args.workspace),
                                         "capabilities": capabilities, "name": args.name})
        made = response.get("token") or {}
        print(f"token {made.get('id')} for workspace(s) {', '.join(made.get('workspaces', []))}"
              f" with {', '.join(made.get('capabilities', []))}; it is shown this once: keep "
              "it now (clients send it as Authorization: Bearer <token>, trustgraph-cli as "
              "-t or TRUSTGRAPH_TOKEN)", file=sys.stderr)
        print(response.get("plaintext"))
    elif command == "list":
        tokens = token_request(args, {"operation": "list"}).get("tokens") or []
        if args.json:
            print_json(tokens)
        elif tokens:
            print_table(TOKEN_HEADER, token_rows(tokens))
        else:
            print("no tokens", file=sys.stderr)
    elif command == "revoke":
        revoke(args, args.ids)
    return 0
