"""``toolmesh tool-service invoke ID``: call a configured tool service directly through the
gateway's ``tool-service`` route — to try a service before giving it to an agent.

Without ``--stream`` one REST call prints the whole observation; with ``--stream`` the
WebSocket prints each piece as the service sends it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from toolmesh.cli import config_cmd
from toolmesh.cli.http import CliError, GatewayClient, default_token, default_url, json_flag
from toolmesh.cli.socket import frames, gateway_socket

#: how much longer the CLI waits than the deadline it gives the gateway, so the gateway's
#: "timed out" answer arrives before the CLI gives up on its own
CLIENT_MARGIN = 10.0


def add_parser(commands: Any) -> None:
    p = commands.add_parser("tool-service", help="call a configured tool service directly")
    sub = p.add_subparsers(dest="tool_service_command", required=True, metavar="COMMAND")
    invoke = sub.add_parser(
        "invoke", help="call the tool service of config item tool-service/ID",
        description="Call the tool service that config item tool-service/ID describes, with "
                    "the given config and arguments, through the gateway; print its answer.")
    invoke.add_argument("id", help="the tool service (the key of its tool-service item)")
    invoke.add_argument("-c", "--config", metavar="JSON", default=None,
                        help="the config-param values, one JSON object (default {})")
    invoke.add_argument("-a", "--arguments", metavar="JSON", default=None,
                        help="the arguments, one JSON object (default {})")
    invoke.add_argument("--user", default=None, help="the user the call runs for")
    invoke.add_argument("-f", "--flow", default="default", help="flow (default: %(default)s)")
    invoke.add_argument("-s", "--stream", action="store_true",
                        help="print the answer piece by piece as it streams (WebSocket)")
    invoke.add_argument("--timeout", type=positive_seconds, default=60.0, metavar="S",
                        help="seconds to wait for the service (default: %(default)g)")
    config_cmd.add_gateway_flags(invoke)
    invoke.set_defaults(run=run, sync=True)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def call_request(args: argparse.Namespace) -> dict[str, Any]:
    """The route's request body from the command line."""
    request: dict[str, Any] = {
        "id": args.id, "workspace": args.workspace,
        "config": json_flag(args.config, "--config"),
        "arguments": json_flag(args.arguments, "--arguments"),
        "timeout": args.timeout, "streaming": args.stream}
    if args.user:
        request["user"] = args.user
    return request


def shown(text: str) -> str:
    """The observation for people: JSON objects and arrays indented, anything else as is."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return json.dumps(value, indent=2, ensure_ascii=False) if isinstance(value, (dict, list)) \
        else text


def one_line(message: str) -> str:
    return " ".join(message.split())


def describe(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('type', 'error')}: {error.get('message', '')}"
    return str(error)


def invoke(args: argparse.Namespace, request: dict[str, Any]) -> str:
    """One REST call; the whole observation."""
    client = GatewayClient(args.url, token=args.token, timeout=args.timeout + CLIENT_MARGIN)
    response = client.post(f"api/v1/flow/{args.flow}/service/tool-service", request)
    text = response.get("response")
    if not isinstance(text, str):
        raise CliError("the gateway's tool-service answer has no 'response' text")
    return text


async def stream(args: argparse.Namespace, request: dict[str, Any]) -> None:
    """Print each piece as the WebSocket delivers it."""
    token = args.token if args.token is not None else default_token()
    wait = args.timeout + CLIENT_MARGIN
    printed = False
    try:
        async with gateway_socket(args.url or default_url(), token) as ws:
            await ws.send_json({"id": "call-1", "workspace": args.workspace,
                                "service": "tool-service", "flow": args.flow,
                                "request": request})
            async for frame in frames(ws, timeout=wait):
                response = frame.get("response") or {}
                error = frame.get("error") or response.get("error")
                if error:
                    raise CliError(describe(error))
                piece = response.get("response") or ""
                if piece:
                    print(piece, end="", flush=True)
                    printed = True
                if frame.get("complete"):
                    break
    except TimeoutError:
        raise CliError(f"no answer from the gateway within {wait:g} s") from None
    finally:
        if printed:
            print(flush=True)  # end the streamed line, also when the stream broke off


def run(args: argparse.Namespace) -> int:
    try:
        request = call_request(args)
        if args.stream:
            asyncio.run(stream(args, request))
        else:
            print(shown(invoke(args, request)))
    except CliError as e:
        # service messages may span lines; a failing command prints exactly one
        raise CliError(one_line(e.message)) from None
    return 0
