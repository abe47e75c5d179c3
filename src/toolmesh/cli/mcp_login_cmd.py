"""``toolmesh mcp login|logout|logins``: sign in to an MCP server that wants OAuth, sign out,
and list the sign-ins kept for you (docs/mcp-oauth.md).

``login`` listens on a loopback port of this machine for the browser's way back (RFC 8252: a
native app's loopback redirect), prints the sign-in link (and opens a browser when there is
one), waits for the person to sign in, then hands the code to the gateway with this
command's own token — the identity that started the login is the one that finishes it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

from toolmesh.cli import config_cmd
from toolmesh.cli.http import CliError, GatewayClient
from toolmesh.cli.output import print_json, print_table

#: what the browser sees once it came back (it holds nothing from the request)
DONE_PAGE = (b"<!doctype html><meta charset=utf-8><title>toolmesh</title>"
             b"<p>toolmesh got the answer of the sign-in. You can close this tab and go back "
             b"to the terminal.</p>")
FIELDS = ("state", "code", "iss", "error")


def add_parsers(sub: Any) -> None:
    """The three subcommands, under ``toolmesh mcp``."""
    login = sub.add_parser(
        "login", help="sign in to the MCP server of an item that wants OAuth",
        description="Sign in to the MCP server of mcp/ITEM (an item with \"auth\": {\"type\": "
                    "\"oauth\"}): prints a link to the server's sign-in page (and opens a "
                    "browser when there is one), waits for you to sign in, and keeps the "
                    "grant for your toolmesh identity — or, for an item signed in per "
                    "workspace, for the workspace (an admin's token).")
    login.add_argument("item", help="the mcp config item")
    login.add_argument("--scope", default=None,
                       help="ask for these scopes too (space-separated; the server's own "
                            "are asked for anyway)")
    login.add_argument("--port", type=int, default=0,
                       help="the loopback port to wait for the browser on (default: any free "
                            "one)")
    login.add_argument("--no-browser", action="store_true",
                       help="only print the link (to open it on another machine's browser, "
                            "forward the port: ssh -L PORT:127.0.0.1:PORT)")
    logout = sub.add_parser("logout", help="forget your sign-in to an item's MCP server")
    logout.add_argument("item", help="the mcp config item")
    logins = sub.add_parser("logins", help="list the sign-ins kept for you and the workspace "
                                           "(never a token)")
    logins.add_argument("--json", action="store_true", help="print them as JSON")
    for sp in (login, logout, logins):
        config_cmd.add_gateway_flags(sp)
        sp.add_argument("-f", "--flow", default="default", help="flow (default: %(default)s)")
        sp.set_defaults(run=run, sync=True)


def run(args: argparse.Namespace) -> int:
    client = GatewayClient(args.url, token=args.token)
    path = f"api/v1/flow/{args.flow}/service/mcp-tool"
    if args.mcp_command == "logins":
        rows = _object(client.post(path, {"operation": "logins",
                                          "workspace": args.workspace}))
        if args.json:
            print_json(rows)
        elif not rows:
            print("no sign-ins are kept for you or the workspace (sign in with `toolmesh mcp "
                  "login ITEM`)")
        else:
            print_table(["ITEMS", "PER", "ISSUER", "SCOPE", "EXPIRES"],
                        [[", ".join(r.get("items") or []) or r.get("resource", ""),
                          r.get("per", ""), r.get("issuer", ""), r.get("scope") or "",
                          _when(r.get("expires"))] for r in rows])
        return 0
    if args.mcp_command == "logout":
        done = _object(client.post(path, {"operation": "logout", "name": args.item,
                                          "workspace": args.workspace}))
        print(f"signed out of {args.item}" if done.get("removed")
              else f"there was no sign-in to {args.item} to forget")
        return 0
    return _login(args, client, path)


def _login(args: argparse.Namespace, client: GatewayClient, path: str) -> int:
    waiter = _Callback(args.port)
    try:
        request: dict[str, Any] = {"operation": "login", "name": args.item,
                                   "workspace": args.workspace,
                                   "redirect-uri": waiter.redirect_uri}
        if args.scope:
            request["scope"] = args.scope
        started = _object(client.post(path, request))
        url = str(started["url"])
        print(f"Sign in to {started.get('host')} for {args.item}: open\n\n  {url}\n",
              flush=True)
        if not args.no_browser:
            import webbrowser  # here: it loads much that no other command needs

            try:
                webbrowser.open(url)
            except webbrowser.Error:
                pass
        print(f"Waiting for the sign-in (until {_when(started.get('expires'))})...",
              file=sys.stderr, flush=True)
        left = float(started.get("expires") or time.time() + 600) - time.time()
        answer = waiter.wait(max(left, 1.0))
    finally:
        waiter.close()
    if answer is None:
        raise CliError("no sign-in came back in time; run the command again")
    done = _object(client.post(path, {"operation": "login-finish",
                                      "workspace": args.workspace, **answer}))
    whose = "the workspace" if done.get("per") == "workspace" else "you"
    scope = f" (scope: {done['scope']})" if done.get("scope") else ""
    print(f"signed in: {whose} can now use {done.get('item', args.item)}{scope}")
    return 0


class _Callback:
    """A one-request HTTP server on loopback that takes the browser's way back."""

    def __init__(self, port: int) -> None:
        import http.server  # here: it loads the email package; only `login` needs it

        self._answer: dict[str, str] | None = None
        self._got = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                query = parse_qs(urlsplit(self.path).query)
                answer = {k: v[0] for k, v in query.items() if k in FIELDS and v}
                if "state" not in answer:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(DONE_PAGE)))
                self.end_headers()
                self.wfile.write(DONE_PAGE)
                if outer._answer is None:
                    outer._answer = answer
                    outer._got.set()

            def log_message(self, format: str, *args: Any) -> None:
                return  # the code is in the query: never logged

        try:
            self._server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        except OSError as e:
            raise CliError(f"cannot listen on 127.0.0.1:{port} for the sign-in: "
                           f"{e.strerror or e}") from None
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/callback"

    def wait(self, seconds: float) -> dict[str, str] | None:
        return self._answer if self._got.wait(seconds) else None

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _object(response: dict[str, Any]) -> Any:
    value = response.get("object")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise CliError("the gateway's mcp-tool answer is not JSON") from None
    if value is None:
        raise CliError("the gateway's mcp-tool answer has no 'object'")
    return value


def _when(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return ""
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S")
