"""``toolmesh serve`` (everything in one process) and ``toolmesh run PART`` (one part alone)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from typing import TYPE_CHECKING

from toolmesh.bus import DEFAULT_CONCURRENCY, connect
from toolmesh.bus.base import Bus
from toolmesh.cli import options, run_service
from toolmesh.errors import ToolmeshError
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
    options.add_gateway(p)
    options.add_llm(p)
    options.add_agent(p)
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
    options.add_log_level(r)
    r.set_defaults(run=run_part)


def gateway_options(args: argparse.Namespace) -> GatewayOptions:
    from toolmesh.gateway import GatewayOptions

    return GatewayOptions(host=args.host, port=args.port, token=args.token,
                          max_body=args.max_body)


def llm_provider(args: argparse.Namespace) -> LLMProvider:
    """The provider ``--llm`` names, or the clearly labelled offline demo model."""
    from toolmesh.llm.demo import demo_llm
    from toolmesh.llm.factory import open_provider

    if args.llm:
        provider = open_provider(args.llm, model=args.model, api_key=args.api_key)
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

        url = options.config_store_url(args)
        store = await open_store(url)
        stores.append(store)
        log.info("config store: %s", mask_url(url))
        return ConfigService(bus, store)
    if part == "gateway":
        from toolmesh.gateway import Gateway

        return Gateway(bus, gateway_options(args))
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

        return McpToolService(bus)
    if part == "agent":
        from toolmesh.agent.react import AgentOptions
        from toolmesh.agent.service import AgentService

        return AgentService(bus, options=AgentOptions(max_iterations=args.max_iterations,
                                                      tool_timeout=args.tool_timeout))
    raise unknown_part(part)


async def run_parts(parts: tuple[str, ...], args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    bus = await connect(args.bus)
    stores: list[ConfigStore] = []
    providers: list[LLMProvider] = []
    try:
        log.info("bus: %s", mask_url(args.bus))
        await serve(bus, [await build(p, bus, args, stores, providers) for p in parts])
    finally:
        for store in stores:
            await store.close()
        for provider in providers:
            await provider.close()
        await bus.close()
    return 0


async def run_serve(args: argparse.Namespace) -> int:
    return await run_parts(PARTS, args)


async def run_part(args: argparse.Namespace) -> int:
    part = args.part
    if part not in PARTS and not run_service.is_tool_service(part):
        raise unknown_part(part)
    if run_service.is_tool_service(part):
        run_service.load_service_class(part)  # a bad name fails before connecting
    return await run_parts((part,), args)
