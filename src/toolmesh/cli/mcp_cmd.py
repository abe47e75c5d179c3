"""``toolmesh mcp set|show|delete|invoke``: MCP server entries (config type ``mcp``) and
direct calls of an MCP tool through the gateway's ``mcp-tool`` service; ``toolmesh mcp serve
--stdio``: the gateway's ``/mcp`` on stdin and stdout, for MCP clients that start a command.

The helpers here (building an ``mcp`` item, masking it for display, parsing parameters,
calling the service) are shared with the ``tg-*-mcp-tool`` scripts in :mod:`tg_tools`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from toolmesh.cli import config_cmd, mcp_login_cmd
from toolmesh.cli.http import (
    MARGIN,
    CliError,
    GatewayClient,
    default_token,
    default_url,
    json_flag,
)
from toolmesh.cli.options import add_log_level
from toolmesh.cli.output import Cell, print_json, print_table
from toolmesh.cli.socket import frames, gateway_socket
from toolmesh.cli.tool_service_cmd import positive_seconds
from toolmesh.config.validation import MCP_TRANSPORTS
from toolmesh.urls import mask_url

MCP_TYPE = "mcp"
MASK = "***"


def add_parser(commands: Any) -> None:
    p = commands.add_parser("mcp", help="configure MCP servers' tools, call them directly, "
                                        "and serve the workspace's tools over stdio")
    sub = p.add_subparsers(dest="mcp_command", required=True, metavar="COMMAND")

    set_ = sub.add_parser(
        "set", help="store an MCP tool: ID --url URL, or ID --transport stdio --command CMD",
        description="Store config item mcp/ID. Here --url is the MCP server's URL; the "
                    "gateway is -u/--gateway-url (or TOOLMESH_URL).")
    set_.add_argument("id")
    set_.add_argument("--url", "--tool-url", dest="server_url", metavar="URL",
                      help="the MCP server's URL (streamable-http and sse)")
    add_server_flags(set_)
    # -u keeps meaning "the gateway" as on every other command; only the long name differs,
    # because --url names the MCP server here.
    set_.add_argument("-u", "--gateway-url", dest="url", default=None, metavar="GATEWAY",
                      help="gateway URL (env TOOLMESH_URL; default http://localhost:8888/)")
    set_.add_argument("-t", "--token", default=None, help="bearer token (env TOOLMESH_TOKEN)")
    set_.add_argument("-w", "--workspace", default=config_cmd.DEFAULT_WORKSPACE,
                      help="workspace (default: %(default)s)")

    show = sub.add_parser("show", help="list MCP tools (tokens and env values masked)")
    show.add_argument("id", nargs="?", help="only this one")
    show.add_argument("--json", action="store_true",
                      help="print the items as JSON, by id (secrets still masked)")
    rm = sub.add_parser("delete", help="delete an MCP tool")
    rm.add_argument("id")
    invoke = sub.add_parser("invoke", help="call an MCP tool through the gateway")
    invoke.add_argument("name", help="the MCP tool (the key of its mcp config item)")
    add_parameter_flags(invoke)
    invoke.add_argument("-f", "--flow", default="default", help="flow (default: %(default)s)")
    invoke.add_argument("--approved", metavar="DIGEST", default=None,
                        help="approve this exact call yourself (your token needs 'approve'), "
                             "for a tool whose approval policy asks a person; the refusal "
                             "without it names the digest (docs/approvals.md)")
    invoke.add_argument("--idempotency-key", metavar="KEY", default=None,
                        help="your name for this call, the same on each retry of it, passed "
                             "to the MCP server in the call's _meta (default: a new one per "
                             "call; docs/dialogs.md)")
    invoke.add_argument("--timeout", type=positive_seconds, metavar="S",
                        help="seconds the call may take; each progress report of the MCP "
                             "server grants this much more (default: the mcp-tool service's)")
    invoke.add_argument("--max-timeout", type=positive_seconds, metavar="S",
                        help="the most the call may take while the server reports progress "
                             "(default and ceiling: the gateway's mcp-tool deadline)")
    for sp in (show, rm, invoke):
        config_cmd.add_gateway_flags(sp)
    for sp in (set_, show, rm, invoke):
        sp.set_defaults(run=run, sync=True)
    add_serve_parser(sub)
    mcp_login_cmd.add_parsers(sub)


def add_serve_parser(sub: Any) -> None:
    serve = sub.add_parser(
        "serve", help="serve the workspace's tools to an MCP client on stdin/stdout",
        description="An MCP server on stdin and stdout for clients that start a command "
                    "(desktop assistants, IDEs): it lists and calls the tools the gateway "
                    "serves at /mcp (or /mcp/WORKSPACE with -w). Clients that take a URL "
                    "can use the gateway's /mcp directly. Logs go to stderr.")
    serve.add_argument("--stdio", action="store_true", required=True,
                       help="speak MCP on stdin and stdout (the only way here; over HTTP, "
                            "the gateway serves /mcp itself)")
    serve.add_argument("-u", "--url", default=None,
                       help="gateway URL (env TOOLMESH_URL; default http://localhost:8888/)")
    token = serve.add_mutually_exclusive_group()
    token.add_argument("-t", "--token", default=None,
                       help="bearer token (visible in the process list: prefer env "
                            "TOOLMESH_TOKEN or --token-file)")
    token.add_argument("--token-file", metavar="PATH",
                       help="read the bearer token from this file")
    serve.add_argument("-w", "--workspace", default=None,
                       help="workspace (default: the token's first; 'default' without one)")
    add_log_level(serve)
    serve.set_defaults(run=run_serve, sync=False)


async def run_serve(args: argparse.Namespace) -> int:
    """``toolmesh mcp serve --stdio``: until the client closes stdin."""
    from toolmesh.logs import configure_logging, register_secret

    configure_logging(args.log_level)
    if args.token:
        print("toolmesh: warning: -t/--token is visible to other users of this machine in the "
              "process list; prefer TOOLMESH_TOKEN (the MCP client's \"env\") or --token-file "
              "PATH", file=sys.stderr)
    token = args.token or (read_secret_file(args.token_file, "--token-file")
                           if args.token_file else default_token())
    register_secret(token)
    # here: the MCP SDK's server and client take a moment to import; other commands do without
    from toolmesh.mcp_endpoint.stdio_bridge import Target, serve_stdio

    await serve_stdio(Target.of(args.url or default_url(), workspace=args.workspace,
                                token=token))
    return 0


def add_server_flags(p: argparse.ArgumentParser) -> None:
    """The flags describing the server side of an MCP tool, besides its URL."""
    p.add_argument("-r", "--remote-name", help="the tool's name on the MCP server (default: ID)")
    token = p.add_mutually_exclusive_group()
    token.add_argument("--auth-token", help="bearer token sent to the MCP server (visible in "
                                            "the process list: prefer --auth-token-file)")
    token.add_argument("--auth-token-file", metavar="PATH",
                       help="read the bearer token sent to the MCP server from this file")
    p.add_argument("--transport", choices=MCP_TRANSPORTS,
                   help="default streamable-http; stdio runs --command as a child process")
    p.add_argument("--command", help="stdio: the program that is the MCP server")
    p.add_argument("--arg", action="append", dest="args", metavar="A",
                   help="stdio: one argument of --command (repeat; --arg=-x for a dash)")
    p.add_argument("--env", action="append", metavar="K=V",
                   help="stdio: an environment variable for --command (repeat)")
    p.add_argument("--sampling", action="store_true",
                   help="let the server ask this deployment's LLM for completions "
                        "(MCP sampling; off by default)")
    p.add_argument("--oauth", choices=("user", "workspace"), default=None,
                   help="the server signs its users in with OAuth: each person signs in "
                        "(user), or an admin once for the workspace (docs/mcp-oauth.md)")
    p.add_argument("--client-id", default=None,
                   help="--oauth: a client registered with the provider by hand")
    p.add_argument("--client-secret-file", metavar="PATH", default=None,
                   help="--oauth: read that client's secret from this file")
    p.add_argument("--scopes", default=None,
                   help="--oauth: scopes to ask for besides the server's (space-separated)")


def add_parameter_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-P", "--parameters", metavar="JSON",
                   help="the parameters as one JSON object")
    p.add_argument("--param", action="append", metavar="K=V",
                   help="one parameter: k=text, or k:=JSON for a number, list, ... (repeat; "
                        "added to -P)")


def read_secret_file(path: str, flag: str = "--auth-token-file") -> str:
    """The token in the file at ``path`` (given with ``flag``), surrounding whitespace
    removed."""
    try:
        text = Path(path).expanduser().read_text().strip()
    except OSError as e:
        raise CliError(f"cannot read {flag} {path!r}: {e.strerror or e}") from None
    if not text:
        raise CliError(f"{flag} {path!r} is empty")
    return text


def parse_pair(text: str, flag: str) -> tuple[str, Any]:
    """``k=v`` → ``(k, "v")``; ``k:=json`` → ``(k, parsed json)``."""
    key, sep, value = text.partition("=")
    if not sep or not key or key == ":":
        raise CliError(f"{flag} {text!r} is not NAME=VALUE")
    if key.endswith(":"):
        try:
            return key[:-1], json.loads(value)
        except json.JSONDecodeError as e:
            raise CliError(f"{flag} {text!r}: the value after := is not JSON ({e})") from None
    return key, value


def mcp_item(id: str, args: argparse.Namespace) -> dict[str, Any]:
    """The ``mcp/ID`` value from the command line (``args.server_url`` is the server URL).

    Obvious mistakes are refused here with the flag names; the gateway still validates the
    result (it is the authority on what an ``mcp`` item must hold).
    """
    stdio = args.transport == "stdio"
    if stdio:
        if args.server_url:
            raise CliError("--transport stdio takes --command, not a URL")
        if not args.command:
            raise CliError("--transport stdio needs --command (the MCP server program)")
    else:
        if args.command or args.args or args.env:
            raise CliError("--command, --arg and --env are for --transport stdio")
        if not args.server_url:
            raise CliError("give the MCP server's URL (or --transport stdio --command CMD)")
    item: dict[str, Any] = {}
    if args.server_url:
        item["url"] = args.server_url
    item["remote-name"] = args.remote_name or id
    if args.auth_token_file:
        item["auth-token"] = read_secret_file(args.auth_token_file)
    elif args.auth_token:
        item["auth-token"] = args.auth_token
    if args.transport:
        item["transport"] = args.transport
    if stdio:
        # no URL, said as TrustGraph's tg-show-mcp-tools can read it (it reads "url" from
        # every item and stops at the first without one)
        item["url"] = ""
        item["command"] = args.command
        if args.args:
            item["args"] = list(args.args)
        if args.env:
            env = [parse_pair(e, "--env") for e in args.env]
            item["env"] = {k: str(v) for k, v in env}
    if getattr(args, "sampling", False):
        item["sampling"] = True
    oauth = getattr(args, "oauth", None)
    extras = [getattr(args, n, None) for n in ("client_id", "client_secret_file", "scopes")]
    if oauth is None and any(extras):
        raise CliError("--client-id, --client-secret-file and --scopes go with --oauth")
    if oauth is not None:
        if "auth-token" in item:
            raise CliError("--oauth and --auth-token cannot both be set: keep one")
        auth: dict[str, Any] = {"type": "oauth", "per": oauth}
        if args.client_id:
            auth["client-id"] = args.client_id
        if args.client_secret_file:
            auth["client-secret"] = read_secret_file(args.client_secret_file,
                                                     "--client-secret-file")
        if args.scopes:
            auth["scopes"] = args.scopes
        item["auth"] = auth
    return item


def masked(item: dict[str, Any]) -> list[tuple[str, str]]:
    """An ``mcp`` item as (field, text) rows safe to print: no token, no env value, no
    password in the URL — those are the fields that hold secrets."""
    transport = item.get("transport") or "streamable-http"
    rows = [("transport", transport)]
    if item.get("url"):
        rows.append(("url", mask_url(str(item["url"]))))
    if transport == "stdio":
        rows.append(("command", str(item.get("command", ""))))
        if item.get("args"):
            rows.append(("args", shlex.join(str(a) for a in item["args"])))
        if isinstance(item.get("env"), dict) and item["env"]:
            rows.append(("env", " ".join(f"{k}={MASK}" for k in item["env"])))
    rows.append(("remote-name", str(item.get("remote-name") or "")))
    auth = item.get("auth") if isinstance(item.get("auth"), dict) else None
    rows.append(("auth-token", MASK if item.get("auth-token") else
                 f"oauth, per {auth.get('per', 'user')}" if auth else "none"))
    if item.get("sampling"):
        rows.append(("sampling", "allowed"))
    return rows


def masked_item(item: dict[str, Any]) -> dict[str, Any]:
    """An ``mcp`` item as stored, each secret ``***``: the token, every env value, the
    password and secret parameters of every URL (the gateway masks them already; this is
    so that no path of this command can print one even if it did not)."""
    # here, not at the top: the secrets package brings the config store's modules along,
    # which no other command of this module needs
    from toolmesh.secrets.fields import mask_value

    return json.loads(mask_value(MCP_TYPE, json.dumps(item)))


SHOW_HEADER = ("ID", "TRANSPORT", "REMOTE-NAME", "AUTH-TOKEN", "SAMPLING", "SERVER")


def show_rows(items: list[tuple[str, dict[str, Any]]]) -> list[list[str | Cell]]:
    """The rows of ``mcp show`` (under :data:`SHOW_HEADER`), from :func:`masked`."""
    rows: list[list[str | Cell]] = []
    for key, item in items:
        fields = dict(masked(item))
        if fields["transport"] == "stdio":
            server = " ".join(f for f in (fields.get("env"), fields.get("command"),
                                          fields.get("args")) if f)
        else:
            server = fields.get("url", "")
        token = fields["auth-token"]
        rows.append([key, Cell(fields["transport"], "dim"), fields["remote-name"] or "-",
                     Cell(token, "dim" if token == "none" else ""),
                     Cell("allowed", "yellow") if "sampling" in fields else Cell("-", "dim"),
                     server])
    return rows


def mcp_items(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """All ``mcp`` items of the workspace, parsed, in the gateway's order."""
    response = config_cmd.config_request(args, {"operation": "getvalues", "type": MCP_TYPE})
    items = []
    for v in response.get("values") or []:
        data = config_cmd.decoded(v.get("value"))
        # toolmesh validates mcp items on put, so a non-object is only possible with a
        # config store written by something else; show it as empty rather than fail.
        items.append((str(v.get("key")), data if isinstance(data, dict) else {}))
    return items


def exists(args: argparse.Namespace, type: str, key: str) -> bool:
    response = config_cmd.config_request(args, {"operation": "get",
                                                "keys": [{"type": type, "key": key}]})
    values = response.get("values") or []
    return bool(values and values[0].get("value"))


def parameters(args: argparse.Namespace) -> dict[str, Any]:
    """``-P`` (a JSON object) with any ``--param`` pairs added."""
    params = json_flag(args.parameters, "-P")
    for pair in getattr(args, "param", None) or []:
        key, value = parse_pair(pair, "--param")
        params[key] = value
    return params


def invoke(args: argparse.Namespace, flow: str, name: str, params: dict[str, Any]) -> Any:
    """Call the gateway's ``mcp-tool`` service; return its ``text`` (a string) or ``object``."""
    client = GatewayClient(args.url, token=args.token)
    request = {"workspace": args.workspace, "name": name, "parameters": params}
    if getattr(args, "approved", None):
        request["approved"] = args.approved
    if getattr(args, "idempotency_key", None) is not None:
        request["idempotency-key"] = args.idempotency_key
    response = client.post(f"api/v1/flow/{flow}/service/mcp-tool", request)
    if "text" in response:
        return response["text"]
    if "object" in response:
        return response["object"]
    raise CliError("the gateway's mcp-tool answer has neither 'text' nor 'object'")


async def invoke_watching(args: argparse.Namespace, name: str, params: dict[str, Any]) -> Any:
    """Call the ``mcp-tool`` service over the gateway's WebSocket, printing the server's
    progress reports to stderr as they come; return the ``text`` or ``object`` as
    :func:`invoke` does."""
    from toolmesh.gateway.deadlines import Deadlines
    from toolmesh.mcp.progress import Progress

    request: dict[str, Any] = {"name": name, "parameters": params, "progress": True}
    if getattr(args, "approved", None):
        request["approved"] = args.approved
    if getattr(args, "idempotency_key", None) is not None:
        request["idempotency-key"] = args.idempotency_key
    if args.timeout is not None:
        request["timeout"] = args.timeout
    if args.max_timeout is not None:
        request["max-timeout"] = args.max_timeout
    frame: dict[str, Any] = {"id": "mcp-1", "workspace": args.workspace, "service": "mcp-tool",
                             "flow": args.flow, "request": request}
    # the gateway's deadline for the route (it caps the figure): the most the call may take,
    # not --timeout, which progress extends
    asked = max(args.timeout or 0.0, args.max_timeout) if args.max_timeout else 0.0
    if asked:
        frame["timeout"] = asked
    # the gateway (or the service behind it) answers within its deadline, and says why
    wait = (asked or Deadlines().of("mcp-tool")) + MARGIN
    token = args.token if args.token is not None else default_token()
    try:
        async with gateway_socket(args.url or default_url(), token) as ws:
            await ws.send_json(frame)
            async for received in frames(ws, timeout=wait):
                response = received.get("response") or {}
                error = received.get("error") or response.get("error")
                if error:
                    raise CliError(f"{error.get('type', 'error')}: {error.get('message', '')}")
                update = Progress.from_wire(response.get("progress"))
                if update is not None and not received.get("complete"):
                    print(f"progress: {update.describe()}", file=sys.stderr, flush=True)
                    continue
                if "text" in response:
                    return response["text"]
                if "object" in response:
                    return response["object"]
                raise CliError("the gateway's mcp-tool answer has neither 'text' nor 'object'")
    except TimeoutError:
        raise CliError(f"no answer from the gateway within {wait:g} s: is it `toolmesh serve` "
                       "(or `toolmesh run gateway`) that listens there?") from None
    raise CliError("the gateway closed the connection before the answer came")


def result_text(result: Any, indent: int = 2) -> str:
    return result if isinstance(result, str) else json.dumps(result, indent=indent)


def run(args: argparse.Namespace) -> int:
    command = args.mcp_command
    if command == "set":
        if args.auth_token:
            print("toolmesh: warning: --auth-token is visible to other users of this machine in "
                  "the process list; prefer --auth-token-file PATH", file=sys.stderr)
        version = config_cmd.put(args, MCP_TYPE, args.id, json.dumps(mcp_item(args.id, args)))
        print(f"stored mcp/{args.id} (version {version})", file=sys.stderr)
    elif command == "show":
        items = mcp_items(args)
        if args.id:
            items = [(k, v) for k, v in items if k == args.id]
            if not items:
                raise CliError(f"no MCP tool {args.id!r} in workspace {args.workspace!r}")
        if args.json:
            print_json({key: masked_item(item) for key, item in items})
        elif items:
            print_table(SHOW_HEADER, show_rows(items))
        else:
            print(f"no MCP tools in workspace {args.workspace!r} (add one with "
                  "`toolmesh mcp set`)", file=sys.stderr)
    elif command == "delete":
        if not exists(args, MCP_TYPE, args.id):
            raise CliError(f"no MCP tool {args.id!r} in workspace {args.workspace!r}")
        version = config_cmd.delete(args, [(MCP_TYPE, args.id)])
        print(f"deleted mcp/{args.id} (version {version})", file=sys.stderr)
    elif command == "invoke":
        # over the WebSocket, so the server's progress shows while the call runs
        from toolmesh.cli import loop

        print(result_text(loop.run(invoke_watching(args, args.name, parameters(args)))))
    return 0
