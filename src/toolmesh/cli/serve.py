"""``toolmesh serve`` (everything in one process) and ``toolmesh run PART`` (one part alone)."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from toolmesh.bus import DEFAULT_CONCURRENCY, connect
from toolmesh.bus.base import Bus
from toolmesh.cli import options, run_service
from toolmesh.config.stdio import StdioAllowList
from toolmesh.errors import ToolmeshError
from toolmesh.logs import register_secret
from toolmesh.rpc.service import Service
from toolmesh.runtime import Part, configure_logging, serve
from toolmesh.urls import mask_url

if TYPE_CHECKING:
    from toolmesh.config.store.base import ConfigStore
    from toolmesh.gateway import GatewayOptions
    from toolmesh.llm.base import LLMProvider

# The parts are imported when they are built, not here: every `toolmesh` command loads this
# module, and the MCP SDK alone takes most of a second to import.

log = logging.getLogger("toolmesh.serve")

PARTS = ("config", "text-completion", "prompt", "mcp-tool", "agent", "joke", "gateway")


def add_parsers(commands: Any) -> None:
    p = commands.add_parser("serve", help="run everything in one process (the embedded default)",
                            description="Run the bus, config, text-completion, prompt, "
                                        "mcp-tool and agent services, the joke tool service and the "
                                        "gateway in one process until Ctrl-C.")
    options.add_bus(p)
    options.add_config_store(p)
    options.add_gateway(p, startup_grace=0.0)
    options.add_llm(p)
    options.add_agent(p)
    options.add_mcp_stdio(p)
    options.add_deadlines(p)
    options.add_lifecycle(p)
    options.add_log_level(p)
    p.set_defaults(run=run_serve)

    r = commands.add_parser(
        "run", help="run one part alone against a shared bus",
        description="Run one part of toolmesh as its own process: one of "
                    f"{', '.join(PARTS)}, a built-in tool service "
                    f"({', '.join(run_service.BUILTIN)}) or any tool service as MODULE:CLASS. "
                    "Run as many as you like of each against one broker; replicas of a "
                    "service share its work.")
    r.add_argument("part", metavar="PART",
                   help=f"{'|'.join(PARTS)}|{'|'.join(run_service.BUILTIN)}|MODULE:CLASS")
    run_service.add_service_options(r)
    options.add_bus(r)
    options.add_config_store(r)
    options.add_gateway(r)
    options.add_llm(r)
    options.add_agent(r)
    options.add_mcp_stdio(r)
    options.add_deadlines(r)
    options.add_lifecycle(r)
    options.add_log_level(r)
    r.set_defaults(run=run_part)


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
                          allow_hosts=tuple(args.allow_host), insecure=args.insecure)


def stdio_allow(args: argparse.Namespace) -> StdioAllowList:
    allow = StdioAllowList.parse(args.mcp_stdio_allow)
    if allow.any_command:
        log.warning("stdio MCP servers may run ANY command (--mcp-stdio-allow '*'): whoever "
                    "can write config can run programs on this machine")
    elif allow.commands:
        log.info("stdio MCP servers may run: %s", allow)
    return allow


def llm_provider(args: argparse.Namespace) -> LLMProvider:
    """The provider ``--llm`` names, or the clearly labelled offline demo model."""
    from toolmesh.llm.demo import demo_llm
    from toolmesh.llm.factory import open_provider

    if args.llm:
        provider = open_provider(args.llm, model=args.model, api_key=options.llm_api_key(args))
        log.info("LLM: %s", provider.name)
        return provider
    log.warning("OFFLINE DEMO MODE: no --llm given, so answers come from a scripted demo "
                "model that can only call the tell-joke tool. Use a real model with "
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
        log.info("config store: %s (secrets %s)", mask_url(url),
                 "encrypted at rest" if box else "stored in clear: set TOOLMESH_SECRET_KEY "
                 "to encrypt them")
        from toolmesh.prompt import shipped_items  # here: the prompt package imports config

        return ConfigService(bus, store, stdio_allow=stdio_allow(args), secret_box=box,
                             defaults={"prompt": shipped_items})
    if part == "gateway":
        from toolmesh.gateway import Gateway

        return Gateway(bus, args.gateway_options)
    if run_service.is_tool_service(part):
        if not hasattr(args, "concurrency"):  # `serve` has no tool-service options
            args = argparse.Namespace(**vars(args), topic=None, request_queue=None,
                                      response_queue=None, id=None,
                                      concurrency=DEFAULT_CONCURRENCY)
        return run_service.build_tool_service(bus, part, args)
    if part == "text-completion":
        from toolmesh.llm.service import TextCompletionService

        provider = llm_provider(args)
        closers.append(provider)
        return TextCompletionService(bus, provider)
    if part == "prompt":
        from toolmesh.prompt import PromptService

        return PromptService(bus)
    if part == "mcp-tool":
        from toolmesh.mcp import McpToolService

        return McpToolService(bus, stdio_allow=stdio_allow(args),
                              request_queue=f"request:tg:mcp-tool:{args.flow}",
                              response_queue=f"response:tg:mcp-tool:{args.flow}",
                              notify_queue=f"notify:tg:mcp-tool:{args.flow}")
    if part == "agent":
        from toolmesh.agent.react import AgentOptions
        from toolmesh.agent.service import AgentService

        agent_options = AgentOptions(**options.bound_values(args, options.AGENT_BOUNDS))
        return AgentService(bus, options=agent_options,
                            request_queue=f"request:tg:agent:{args.flow}",
                            response_queue=f"response:tg:agent:{args.flow}",
                            tools_queues={"request_queue": f"request:tg:agent-tools:{args.flow}",
                                          "response_queue": f"response:tg:agent-tools:{args.flow}"})
    raise unknown_part(part)


async def run_parts(parts: tuple[str, ...], args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    for url in (args.bus, getattr(args, "config_store", None)):
        register_secret(_password(url))
    from toolmesh.schema.flow import FLOW_ID_RULE, valid_flow_id

    if not valid_flow_id(args.flow):
        raise ToolmeshError(f"--flow {args.flow!r}: {FLOW_ID_RULE}", type="usage-error")
    if "gateway" in parts:
        # before anything starts: an unsafe exposure or an unreadable token file ends here
        args.gateway_options = gateway_options(args)
    bus = await connect(args.bus)
    stores: list[ConfigStore] = []
    providers: list[LLMProvider] = []
    try:
        log.info("bus: %s", mask_url(args.bus))
        built = [await build(p, bus, args, stores, providers) for p in parts]
        for part in built:
            if isinstance(part, Service):
                part.drain_timeout = args.drain_timeout
        await serve(bus, built)
    finally:
        for store in stores:
            await store.close()
        for provider in providers:
            await provider.close()
        await bus.close()
    return 0


def _password(url: str | None) -> str | None:
    try:
        return urlsplit(url).password if url else None
    except ValueError:
        return None


async def run_serve(args: argparse.Namespace) -> int:
    return await run_parts(PARTS, args)


async def run_part(args: argparse.Namespace) -> int:
    part = args.part
    if part not in PARTS and not run_service.is_tool_service(part):
        raise unknown_part(part)
    if run_service.is_tool_service(part):
        run_service.load_service_class(part)  # a bad name fails before connecting
    return await run_parts((part,), args)
