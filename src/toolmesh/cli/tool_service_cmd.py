"""``toolmesh tool-service register|invoke``.

``register MODULE:CLASS`` writes the config items a tool service's class declares (its
``definition``: the ``tool-service`` descriptor and a ``tool`` per tool) in one put, so the
agent offers its tools. ``invoke ID`` calls a configured tool service directly through the
gateway's ``tool-service`` route — to try a service before giving it to an agent: without
``--stream`` one REST call prints the whole observation; with ``--stream`` the WebSocket
prints each piece as the service sends it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from toolmesh.cli import config_cmd
from toolmesh.cli.http import CliError, GatewayClient, default_token, default_url, json_flag
from toolmesh.cli.socket import frames, gateway_socket

#: how much longer the CLI waits than the deadline it gives the gateway, so the gateway's
#: "timed out" answer arrives before the CLI gives up on its own
CLIENT_MARGIN = 10.0


def add_parser(commands: Any) -> None:
    p = commands.add_parser("tool-service",
                            help="register a tool service's tools; call a tool service directly")
    sub = p.add_subparsers(dest="tool_service_command", required=True, metavar="COMMAND")
    add_register_parser(sub)
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
    invoke.add_argument("--approved", metavar="DIGEST", default=None,
                        help="approve this exact call yourself (your token needs 'approve'), "
                             "for a call whose approval policy asks a person; the refusal "
                             "without it names the digest (docs/approvals.md)")
    invoke.add_argument("--idempotency-key", metavar="KEY", default=None,
                        help="your name for this call, the same on each retry of it: a "
                             "tool service written with the SDK runs it once (default: a new "
                             "one per call; docs/dialogs.md)")
    invoke.add_argument("-f", "--flow", default="default", help="flow (default: %(default)s)")
    invoke.add_argument("-s", "--stream", action="store_true",
                        help="print the answer piece by piece as it streams (WebSocket)")
    invoke.add_argument("--timeout", type=positive_seconds, default=60.0, metavar="S",
                        help="seconds to wait for the service (default: %(default)g)")
    config_cmd.add_gateway_flags(invoke)
    invoke.set_defaults(run=run, sync=True)


def add_register_parser(sub: Any) -> None:
    register = sub.add_parser(
        "register", help="write the config items a tool service's class declares",
        description="Import MODULE:CLASS (from the current folder first, like python -m) and "
                    "write the tool-service item and the tool items its `definition` "
                    "declares, in one put; the agent offers the tools at once. Give the same "
                    "--id/--topic as to `toolmesh run` when you override them there.")
    register.add_argument("service", metavar="MODULE:CLASS",
                          help="the tool service class, or a built-in (joke)")
    register.add_argument("--id", default=None,
                          help="the service id (the tool-service item's key; default: the "
                               "definition's)")
    register.add_argument("--topic", default=None,
                          help="queues non-persistent://tg/request/TOPIC and .../response/TOPIC "
                               "(default: the definition's)")
    register.add_argument("--request-queue", default=None, help="explicit request queue")
    register.add_argument("--response-queue", default=None, help="explicit response queue")
    register.add_argument("-n", "--dry-run", action="store_true",
                          help="print the items as JSON instead of writing them")
    config_cmd.add_gateway_flags(register)
    register.set_defaults(run=run_register, sync=True)


def registered_items(args: argparse.Namespace) -> dict[tuple[str, str], dict[str, Any]]:
    """The items ``args.service``'s definition declares, with the command line's overrides."""
    from toolmesh.cli.run_service import load_service_class
    from toolmesh.tools.definition import DefinitionError

    cls = load_service_class(args.service)
    if cls.definition is None:
        raise CliError(
            f"{args.service} declares no definition: give the class a `definition = "
            "ToolServiceDefinition(...)` (docs/tool-services.md), or write its tool-service "
            "and tool items with `toolmesh config put`")
    if (args.request_queue is None) != (args.response_queue is None):
        raise CliError("give both --request-queue and --response-queue, or neither")
    if args.topic is not None and args.request_queue is not None:
        raise CliError("give --topic or --request-queue/--response-queue, not both")
    try:
        return cls.definition.items(id=args.id, topic=args.topic,
                                    request_queue=args.request_queue,
                                    response_queue=args.response_queue)
    except (DefinitionError, ValueError) as e:
        raise CliError(f"the definition of {args.service} is invalid: "
                       f"{getattr(e, 'message', e)}") from None


def run_register(args: argparse.Namespace) -> int:
    items = registered_items(args)
    if args.dry_run:
        print(json.dumps({f"{t}/{k}": v for (t, k), v in items.items()}, indent=2,
                         ensure_ascii=False))
        return 0
    values = [{"type": t, "key": k, "value": json.dumps(v)} for (t, k), v in items.items()]
    response = config_cmd.config_request(args, {"operation": "put", "values": values})
    names = ", ".join(f"{t}/{k}" for t, k in items)
    print(f"registered {names} in workspace {args.workspace!r} "
          f"(version {response.get('version')})", file=sys.stderr)
    return 0


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
    if args.approved:
        request["approved"] = args.approved
    if args.idempotency_key is not None:
        request["idempotency-key"] = args.idempotency_key
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
            # the loop (and asyncio) only here: the call without --stream is one synchronous
            # request
            from toolmesh.cli import loop

            loop.run(stream(args, request))
        else:
            print(shown(invoke(args, request)))
    except CliError as e:
        # service messages may span lines; a failing command prints exactly one
        raise CliError(one_line(e.message)) from None
    return 0
