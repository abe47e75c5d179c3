"""``toolmesh serve`` (everything in one process) and ``toolmesh run PART`` (one part alone)."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from toolmesh.bus import DEFAULT_CONCURRENCY
from toolmesh.cli import login_options, once_options, options, run_service
from toolmesh.config.stdio import StdioAllowList
from toolmesh.errors import ToolmeshError
from toolmesh.urls import mask_url

if TYPE_CHECKING:
    import logging
    import socket

    from toolmesh.bus.base import Bus
    from toolmesh.config.store.base import ConfigStore
    from toolmesh.gateway import GatewayOptions
    from toolmesh.llm.base import LLMProvider
    from toolmesh.mcp.addresses import AddressPolicy
    from toolmesh.runtime import Part

# The parts, the bus's connect and the runtime are imported when they are used, not here:
# every `toolmesh` command loads this module to build its parser; the MCP SDK alone takes most
# of a second to import, asyncio and the RPC layer tens of milliseconds.


def log() -> logging.Logger:
    """This module's logger. logging is imported at the first message, not with the module:
    every `toolmesh` command loads this module to build its parser."""
    import logging

    return logging.getLogger("toolmesh.serve")


PARTS = ("config", "text-completion", "prompt", "mcp-tool", "agent", "joke", "gateway")


def add_parsers(commands: Any) -> None:
    """``toolmesh serve`` and ``toolmesh run``."""
    p = commands.add_parser("serve", help="run everything in one process (the embedded default)",
                            description="Run the bus, config, text-completion, prompt, "
                                        "mcp-tool and agent services, the joke tool service and the "
                                        "gateway in one process until Ctrl-C.")
    options.add_bus(p)
    options.add_config_store(p)
    options.add_gateway(p, startup_grace=0.0)
    options.add_llm(p)
    options.add_agent(p)
    options.add_prompt(p)
    options.add_tool_calling(p)
    options.add_streaming(p)
    options.add_mcp_stdio(p)
    options.add_mcp_addresses(p)
    login_options.add_public_url(p)
    login_options.add_mcp_logins(p)
    options.add_deadlines(p)
    options.add_lifecycle(p)
    once_options.MAX_DELIVERIES.add_to(p)
    once_options.add_dedupe(p)
    options.add_log_level(p)
    options.add_metrics(p)
    options.add_announcements(p, what="configured tools only: the tool services do not "
                                       "announce themselves and the agent ignores those that do")
    p.add_argument("--tool-service", action="append", metavar="MODULE:CLASS",
                   default=_env_services(),
                   help="run this tool service in the process too (on the in-process bus a "
                        "service cannot run apart); imported from the current folder first; "
                        "repeat for more (env TOOLMESH_TOOL_SERVICES)")
    p.set_defaults(run=run_serve)
    add_run_parser(commands)


def _env_services() -> list[str]:
    return os.environ.get("TOOLMESH_TOOL_SERVICES", "").replace(",", " ").split()


def _add_process_options(parser: argparse.ArgumentParser) -> None:
    """The options every part run alone reads."""
    options.add_bus(parser)
    options.DRAIN_TIMEOUT.add_to(parser)
    once_options.MAX_DELIVERIES.add_to(parser)
    options.add_log_level(parser)
    options.add_metrics(parser)


def _agent_announcements(parser: argparse.ArgumentParser) -> None:
    options.add_announcements(parser, what="offer configured tools only: ignore the tool "
                                           "services that announce themselves")


#: ``toolmesh run PART`` for each part but tool services: its one-line help, and the option
#: groups it reads (:func:`build` and :func:`run_parts` read the attributes they set)
RUN_PARTS: dict[str, tuple[str, tuple[Callable[[argparse.ArgumentParser], None], ...]]] = {
    "config": ("the config service and its store (SQLite or PostgreSQL)",
               (options.add_config_store, options.add_mcp_stdio)),
    "gateway": ("the HTTP/WebSocket gateway (TrustGraph's /api/v1)",
                (options.add_gateway, options.add_deadlines, options.add_mcp_addresses,
                 options.add_approval, login_options.add_public_url)),
    "agent": ("the ReAct agent of a flow", (options.add_agent, options.add_tool_calling,
                                            options.add_streaming,
                                            options.add_flow, _agent_announcements)),
    "prompt": ("the prompt service: templates completed by the LLM", (options.add_prompt,)),
    "text-completion": ("the LLM service: an OpenAI-compatible API, or the offline demo model",
                        (options.add_llm, options.add_tool_calling, options.add_streaming)),
    "mcp-tool": ("the MCP tool service of a flow: calls the tools of MCP servers",
                 (options.add_mcp_stdio, options.add_mcp_addresses, options.add_flow,
                  login_options.add_public_url, login_options.add_mcp_logins)),
}

#: the part that stands for any tool service given as MODULE:CLASS (subcommands have fixed
#: names: any name with a colon is routed to this one)
SERVICE_PART = "MODULE:CLASS"


def add_run_parser(commands: Any) -> None:
    """``toolmesh run PART`` (alias ``run-service``), one subcommand per part with the options
    that part reads."""
    r = commands.add_parser(
        "run", aliases=["run-service"], help="run one part alone against a shared bus",
        description="Run one part of toolmesh as its own process. Run as many as you like of "
                    "each against one broker (--bus amqp://...); replicas of a service share "
                    "its work. 'toolmesh run PART --help' shows a part's options.")
    parts = r.add_subparsers(dest="part", metavar="PART", title="parts")
    for name, (help, adders) in RUN_PARTS.items():
        p = parts.add_parser(name, help=help, description=f"Run {help} as its own process.")
        for add in adders:
            add(p)
        _add_process_options(p)
        p.set_defaults(run=run_part)
    services = {name: (run_service.BUILTIN_HELP[name], f"Run {run_service.BUILTIN_HELP[name]}.")
                for name in run_service.BUILTIN}
    services[SERVICE_PART] = (
        "any tool service: a DynamicToolService subclass, e.g. wordtools:WordCount for the "
        "class WordCount in ./wordtools.py",
        "Run a DynamicToolService subclass, imported as MODULE:CLASS with the current folder "
        "first on the import path (toolmesh run wordtools:WordCount, run where wordtools.py "
        "is). Its definition gives its topic and id; a class without one needs --topic.")
    for name, (help, description) in services.items():
        p = parts.add_parser(name, help=help, description=description)
        run_service.add_service_options(p)
        options.add_announcing(p)
        once_options.add_dedupe(p)
        _add_process_options(p)
        p.set_defaults(run=run_part)
    parts.route("*:*", to=SERVICE_PART)


def gateway_options(args: argparse.Namespace) -> GatewayOptions:
    """The gateway's options; :class:`AccessError` at once when they expose it unsafely."""
    from toolmesh.gateway import GatewayOptions
    from toolmesh.gateway.access import AccessPolicy, check_exposure
    from toolmesh.gateway.auth import Auth
    from toolmesh.gateway.bounds import Bounds
    from toolmesh.gateway.deadlines import Deadlines

    token = options.gateway_token(args)
    check_exposure(host=args.host, token=token, insecure=args.insecure)
    AccessPolicy.build(listen_host=args.host, auth=Auth(token),  # refuses a bad origin now
                       allow_origins=args.allow_origin, allow_hosts=args.allow_host)
    bounds = Bounds(**options.bound_values(args, options.GATEWAY_BOUNDS))
    deadlines = Deadlines().with_overrides(args.deadline)
    return GatewayOptions(host=args.host, port=args.port, token=token, bounds=bounds,
                          deadlines=deadlines, shutdown_timeout=args.drain_timeout,
                          startup_grace=args.startup_grace,
                          allow_origins=tuple(args.allow_origin),
                          allow_hosts=tuple(args.allow_host), insecure=args.insecure,
                          announcements=not getattr(args, "no_announcements", False),
                          mcp_addresses=mcp_addresses(args),
                          approval=getattr(args, "approval", "never"),
                          public_url=login_options.public_url(args),
                          workbench=not args.no_workbench)


def stdio_allow(args: argparse.Namespace) -> StdioAllowList:
    allow = StdioAllowList.parse(args.mcp_stdio_allow)
    if allow.any_command:
        log().warning("stdio MCP servers may run ANY command (--mcp-stdio-allow '*'): whoever "
                      "can write config can run programs on this machine")
    elif allow.commands:
        log().info("stdio MCP servers may run: %s", allow)
    return allow


def mcp_addresses(args: argparse.Namespace) -> AddressPolicy:
    """The operator's allow/deny list of MCP server addresses (a bad entry: usage error)."""
    from toolmesh.mcp.addresses import AddressPolicy

    policy = AddressPolicy.parse(allow=args.mcp_allow, deny=args.mcp_deny)
    if not policy.default:
        log().info("MCP server addresses: %s", policy)
    return policy


def llm_provider(args: argparse.Namespace) -> LLMProvider:
    """The provider ``--llm`` names, or the clearly labelled offline demo model."""
    from toolmesh.llm.demo import demo_llm
    from toolmesh.llm.factory import open_provider

    if args.llm:
        provider = open_provider(args.llm, model=args.model, api_key=options.llm_api_key(args),
                                 temperature=args.temperature, server=args.llm_server)
        log().info("LLM: %s", provider.name)
        return provider
    log().warning("OFFLINE DEMO MODE: no --llm given, so answers come from a scripted demo "
                  "model that calls tell-joke when asked for a joke, and any tool when told 'use "
                  "TOOL with {JSON}'. Use a real model with "
                  "--llm http://HOST:PORT/v1 --model NAME (OpenAI, vLLM, Ollama, llama.cpp).")
    return demo_llm()


def unknown_part(part: str) -> ToolmeshError:
    return ToolmeshError(f"unknown part {part!r}; parts: {', '.join(PARTS)}, a built-in tool "
                         f"service ({', '.join(run_service.BUILTIN)}) or MODULE:CLASS",
                         type="usage-error")


async def build(part: str, bus: Bus, args: argparse.Namespace,
                stores: list[Any], closers: list[Any]) -> Part:
    """One part, ready to start."""
    if part == "config":
        from toolmesh.config.service import ConfigService
        from toolmesh.config.store import open_store
        from toolmesh.files import private_dir
        from toolmesh.secrets.crypto import SecretBox

        url = options.config_store_url(args)
        if not args.config_store:
            private_dir(options.data_dir())  # the data folder holds the store: ours alone
        box = SecretBox.from_environment()  # a bad key fails before the store is touched
        store = await open_store(url)
        stores.append(store)
        log().info("config store: %s (secrets %s)", mask_url(url),
                   "encrypted at rest" if box else "stored in clear: set TOOLMESH_SECRET_KEY "
                   "to encrypt them")
        from toolmesh.prompt import (
            shipped_items,  # here: the prompt package imports config
        )

        return ConfigService(bus, store, stdio_allow=stdio_allow(args), secret_box=box,
                             defaults={"prompt": shipped_items})
    if part == "gateway":
        from toolmesh.gateway import Gateway

        return Gateway(bus, args.gateway_options)
    if run_service.is_tool_service(part):
        if not hasattr(args, "concurrency"):  # `serve` has no tool-service options
            from toolmesh.registry.wire import DEFAULT_TTL

            args = argparse.Namespace(**vars(args), topic=None, request_queue=None,
                                      response_queue=None, id=None,
                                      concurrency=DEFAULT_CONCURRENCY, workspace="default",
                                      announce_ttl=DEFAULT_TTL)
        return run_service.build_tool_service(
            bus, part, args, dedupe=await once_options.dedupe_store(args, stores))
    if part == "text-completion":
        from toolmesh.llm.service import TextCompletionService

        provider = llm_provider(args)
        closers.append(provider)
        return TextCompletionService(bus, provider, coalescing=_coalescing(args),
                                     tool_calling=args.tool_calling)
    if part == "prompt":
        from toolmesh.prompt import PromptService, RenderLimits

        return PromptService(bus, render_limits=RenderLimits(**options.prompt_limits(args)))
    if part == "mcp-tool":
        from toolmesh.mcp import McpToolService

        return McpToolService(bus, stdio_allow=stdio_allow(args),
                              addresses=mcp_addresses(args),
                              request_queue=f"request:tg:mcp-tool:{args.flow}",
                              response_queue=f"response:tg:mcp-tool:{args.flow}",
                              notify_queue=f"notify:tg:mcp-tool:{args.flow}",
                              # the answers to its servers' questions (mcp/elicitation.py)
                              approvals_notify_queue=f"notify:tg:approvals:{args.flow}",
                              # sign-ins of servers that want OAuth (mcp/signin.py)
                              logins=await login_options.open_logins(args, stores),
                              public_url=login_options.public_url(args),
                              # run alone, MCP is all it does: ready with the SDK loaded
                              load_sdk_at_start=getattr(args, "part", None) == "mcp-tool")
    if part == "agent":
        from toolmesh.agent.loop import AgentOptions
        from toolmesh.agent.service import AgentService

        from toolmesh.cli.choice_options import choice_options

        agent_options = AgentOptions(**options.bound_values(args, options.AGENT_BOUNDS),
                                     **choice_options(args),
                                     coalescing=_coalescing(args),
                                     tool_calling=args.tool_calling,
                                     temperature=args.temperature_of_steps,
                                     approval=args.approval)
        journal = await _journal(args)
        if journal is not None:
            stores.append(journal)
        return AgentService(bus, options=agent_options, journal=journal,
                            take_up_unfinished=args.bus.startswith("memory:"),
                            dialogs_queues={"request_queue": f"request:tg:dialogs:{args.flow}",
                                            "response_queue": f"response:tg:dialogs:{args.flow}"},
                            approvals_queues={
                                "request_queue": f"request:tg:approvals:{args.flow}",
                                "response_queue": f"response:tg:approvals:{args.flow}"},
                            approvals_notify_queue=f"notify:tg:approvals:{args.flow}",
                            tool_calls_queues={
                                "request_queue": f"request:tg:tool-calls:{args.flow}",
                                "response_queue": f"response:tg:tool-calls:{args.flow}"},
                            request_queue=f"request:tg:agent:{args.flow}",
                            response_queue=f"response:tg:agent:{args.flow}",
                            tools_queues={"request_queue": f"request:tg:agent-tools:{args.flow}",
                                          "response_queue": f"response:tg:agent-tools:{args.flow}"},
                            services_queues={
                                "request_queue": f"request:tg:agent-services:{args.flow}",
                                "response_queue": f"response:tg:agent-services:{args.flow}"},
                            announcements=not args.no_announcements)
    raise unknown_part(part)


async def _journal(args: argparse.Namespace) -> Any:
    """The agent's dialog journal (``None``: ``--dialogs off``)."""
    from toolmesh.dialogs import open_journal

    url = options.dialogs_url(args)
    if url is None:
        log().info("dialogs are not recorded (--dialogs off): an agent that dies loses its "
                   "dialogs in flight")
        return None
    if not args.dialogs and not getattr(args, "config_store", None):
        from toolmesh.files import private_dir

        private_dir(options.data_dir())
    journal = await open_journal(url, keep=args.dialogs_keep, max_age_days=args.dialogs_days,
                                 max_bytes=args.dialogs_max_bytes)
    log().info("dialogs recorded in %s", mask_url(url))
    return journal


def _coalescing(args: argparse.Namespace) -> Any:
    """The :class:`~toolmesh.llm.coalesce.Coalescing` of ``--stream-window`` and
    ``--stream-max-chars``."""
    from toolmesh.llm.coalesce import Coalescing

    try:
        return Coalescing(**{k.removeprefix("stream_"): v for k, v in
                             options.bound_values(args, options.STREAM_BOUNDS).items()})
    except ValueError as e:
        raise ToolmeshError(str(e), type="usage-error") from None


async def run_parts(parts: tuple[str, ...], args: argparse.Namespace) -> int:
    """Run ``parts`` in this process until SIGINT/SIGTERM. ``args`` holds the options of
    every part (a part run alone has only its own: those read by all are read with getattr)."""
    # first of all: a port in use ends the command before anything starts or logs
    listeners = listen(args.host, args.port) if "gateway" in parts else []
    try:
        return await _run_parts(parts, args, listeners)
    finally:
        for sock in listeners:  # the gateway's server closed them if it started
            sock.close()


async def _run_parts(parts: tuple[str, ...], args: argparse.Namespace,
                     listeners: list[socket.socket]) -> int:
    from toolmesh.bus import connect
    from toolmesh.logs import register_secret
    from toolmesh.rpc.service import Service
    from toolmesh.runtime import configure_logging, serve
    from toolmesh.telemetry import tracing
    from toolmesh.telemetry.exposition import MetricsServer

    configure_logging(args.log_level)
    # before anything connects: OTEL_* settings this installation cannot follow end here, as
    # does a metrics port beyond loopback without a token
    tracing.configure(service_name="toolmesh" if len(parts) > 1 else f"toolmesh-{parts[0]}")
    metrics_server = None
    if args.metrics_port is not None:
        token = options.metrics_token(args)
        register_secret(token)
        metrics_server = MetricsServer(host=args.metrics_host, port=args.metrics_port,
                                       token=token)
    for url in (args.bus, getattr(args, "config_store", None), getattr(args, "dialogs", None),
                getattr(args, "dedupe", None), getattr(args, "mcp_logins", None)):
        register_secret(_password(url))
    from toolmesh.schema.flow import FLOW_ID_RULE, valid_flow_id

    flow = getattr(args, "flow", None)
    if flow is not None and not valid_flow_id(flow):
        raise ToolmeshError(f"--flow {flow!r}: {FLOW_ID_RULE}", type="usage-error")
    if "gateway" in parts:
        if listeners and not getattr(args, "public_url", None):
            # the port bound (--port 0 picks one): where this machine's browser comes back
            args.public_url = login_options.local_url(args.host, listeners[0].getsockname()[1])
        # before anything starts: an unsafe exposure or an unreadable token file ends here
        args.gateway_options = dataclasses.replace(gateway_options(args),
                                                   sockets=tuple(listeners))
    bus = await connect(args.bus)
    stores: list[ConfigStore] = []
    providers: list[LLMProvider] = []
    try:
        log().info("bus: %s", mask_url(args.bus))
        if len(parts) > 1:  # toolmesh serve: a word when trustgraph-cli's tg-* commands run here
            from toolmesh.cli import script_shadows

            script_shadows.notice(log())
        built = [await build(p, bus, args, stores, providers) for p in parts]
        for part in built:
            if isinstance(part, Service):
                part.drain_timeout = args.drain_timeout
                part.max_deliveries = args.max_deliveries
        if metrics_server is not None:
            # first: scrapes see the parts start, and the last of their stop
            built.insert(0, metrics_server)
        await serve(bus, built)
    finally:
        tracing.disable()  # the spans still buffered are sent before the process ends
        for store in stores:
            await store.close()
        for provider in providers:
            await provider.close()
        await bus.close()
    return 0


def listen(host: str, port: int) -> list[socket.socket]:
    """The gateway's listening sockets, bound now; a one-line :class:`ToolmeshError` with
    what to do when the address is taken."""
    from toolmesh.gateway.listen import bind_listeners

    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        return bind_listeners(host, port)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            reason = ("the address is in use (another toolmesh serve?); choose another port "
                      "with --port or TOOLMESH_PORT")
        else:
            reason = e.strerror or str(e)
        raise ToolmeshError(f"cannot listen on {shown}: {reason}", type="usage-error") from None


def _password(url: str | None) -> str | None:
    try:
        return urlsplit(url).password if url else None
    except ValueError:
        return None


async def run_serve(args: argparse.Namespace) -> int:
    # a service named twice, or a built-in part named again, runs once
    extra = tuple(s for s in dict.fromkeys(args.tool_service) if s not in PARTS)
    for spec in extra:  # a bad one fails before anything starts
        if run_service.load_service_class(spec).definition is None:
            raise ToolmeshError(
                f"--tool-service {spec}: the class declares no definition, so it has no "
                "queues of its own; give it one (docs/tool-services.md)", type="usage-error")
    return await run_parts((*PARTS[:-1], *extra, PARTS[-1]), args)


async def run_part(args: argparse.Namespace) -> int:
    part = args.part  # one of the `run` subcommands' names (the parser refuses others)
    if run_service.is_tool_service(part):
        run_service.checked_service_class(part, args)  # a bad name fails before connecting
    return await run_parts((part,), args)
