"""``toolmesh serve`` (everything in one process) and ``toolmesh run PART`` (one part alone)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from toolmesh.bus import connect
from toolmesh.bus.base import Bus
from toolmesh.cli import options
from toolmesh.config.service import ConfigService
from toolmesh.config.store import open_store
from toolmesh.config.store.base import ConfigStore
from toolmesh.urls import mask_url
from toolmesh.errors import ToolmeshError
from toolmesh.gateway import Gateway, GatewayOptions
from toolmesh.runtime import Part, configure_logging, serve
from toolmesh.tools.services.joke import JokeService

log = logging.getLogger("toolmesh.serve")

PARTS = ("config", "gateway", "joke")


def add_parsers(commands: Any) -> None:
    p = commands.add_parser("serve", help="run everything in one process (the embedded default)",
                            description="Run the bus, config service, gateway and the joke "
                                        "service in one process until Ctrl-C.")
    options.add_bus(p)
    options.add_config_store(p)
    options.add_gateway(p)
    options.add_log_level(p)
    p.set_defaults(run=run_serve)

    r = commands.add_parser("run", help="run one part alone against a shared bus",
                            description="Run one part of toolmesh as its own process.")
    r.add_argument("part", choices=PARTS)
    options.add_bus(r)
    options.add_config_store(r)
    options.add_gateway(r)
    options.add_log_level(r)
    r.set_defaults(run=run_part)


def gateway_options(args: argparse.Namespace) -> GatewayOptions:
    return GatewayOptions(host=args.host, port=args.port, token=args.token,
                          max_body=args.max_body)


async def build(part: str, bus: Bus, args: argparse.Namespace,
                stores: list[ConfigStore]) -> Part:
    """One part, ready to start."""
    if part == "config":
        url = options.config_store_url(args)
        store = await open_store(url)
        stores.append(store)
        log.info("config store: %s", mask_url(url))
        return ConfigService(bus, store)
    if part == "gateway":
        return Gateway(bus, gateway_options(args))
    if part == "joke":
        return JokeService(bus, topic="joke", id="joke-service")
    raise ToolmeshError(f"unknown part {part!r}; parts: {', '.join(PARTS)}", type="usage-error")


async def run_parts(parts: tuple[str, ...], args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    bus = await connect(args.bus)
    stores: list[ConfigStore] = []
    try:
        log.info("bus: %s", mask_url(args.bus))
        await serve(bus, [await build(p, bus, args, stores) for p in parts])
    finally:
        for store in stores:
            await store.close()
        await bus.close()
    return 0


async def run_serve(args: argparse.Namespace) -> int:
    return await run_parts(PARTS, args)


async def run_part(args: argparse.Namespace) -> int:
    return await run_parts((args.part,), args)
