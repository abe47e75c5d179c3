"""``toolmesh run-service``: run any DynamicToolService subclass as a process."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
from typing import Any

from toolmesh.bus import DEFAULT_CONCURRENCY, Bus, connect
from toolmesh.cli import options
from toolmesh.errors import ToolmeshError
from toolmesh.runtime import configure_logging, serve
from toolmesh.tools.service import DynamicToolService
from toolmesh.urls import mask_url

log = logging.getLogger("toolmesh.run-service")

#: built-in services: name -> (MODULE:CLASS, default topic, default id)
BUILTIN = {
    "joke": ("toolmesh.tools.services.joke:JokeService", "joke", "joke-service"),
    "joke-streaming": ("toolmesh.tools.services.joke:StreamingJokeService", "joke", "joke-service"),
}


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "run-service", help="run a tool service (MODULE:CLASS or a built-in) until SIGINT/SIGTERM",
        description="Run a DynamicToolService subclass on the bus (the same as 'toolmesh run "
                    "SERVICE'). Built-ins: " + ", ".join(BUILTIN))
    p.add_argument("service", help="MODULE:CLASS, or a built-in name (joke)")
    add_service_options(p)
    options.add_bus(p)
    options.add_log_level(p)
    p.set_defaults(run=run)


def add_service_options(parser: argparse.ArgumentParser) -> None:
    """The options of a tool service process (flags with environment defaults)."""
    env = os.environ.get
    parser.add_argument("--topic", default=env("TOOLMESH_SERVICE_TOPIC"),
                        help="short topic: queues non-persistent://tg/request/TOPIC and "
                             ".../response/TOPIC (env TOOLMESH_SERVICE_TOPIC; built-ins have one)")
    parser.add_argument("--request-queue", default=env("TOOLMESH_SERVICE_REQUEST_QUEUE"),
                        help="explicit request queue instead of --topic")
    parser.add_argument("--response-queue", default=env("TOOLMESH_SERVICE_RESPONSE_QUEUE"),
                        help="explicit response queue instead of --topic")
    parser.add_argument("--id", default=env("TOOLMESH_SERVICE_ID"),
                        help="service id; replicas with the same id share the work "
                             "(env TOOLMESH_SERVICE_ID; default: the class's)")
    parser.add_argument("--concurrency", type=int,
                        default=int(env("TOOLMESH_SERVICE_CONCURRENCY", str(DEFAULT_CONCURRENCY))),
                        help="requests one process handles at once "
                             "(env TOOLMESH_SERVICE_CONCURRENCY; default: %(default)s)")


def is_tool_service(spec: str) -> bool:
    """Whether ``spec`` names a tool service (a built-in or MODULE:CLASS)."""
    return spec in BUILTIN or ":" in spec


def load_service_class(spec: str) -> type[DynamicToolService]:
    """Import ``MODULE:CLASS`` (or a built-in name) and check it is a tool service."""
    path = BUILTIN[spec][0] if spec in BUILTIN else spec
    module_name, sep, class_name = path.partition(":")
    if not sep or not module_name or not class_name:
        raise ToolmeshError(f"service {spec!r} is neither MODULE:CLASS nor a built-in "
                            f"({', '.join(BUILTIN)})", type="usage-error")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ToolmeshError(f"cannot import module {module_name!r}: {e}", type="usage-error") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, DynamicToolService)):
        raise ToolmeshError(f"{path!r} is not a DynamicToolService subclass", type="usage-error")
    return cls


def build_tool_service(bus: Bus, spec: str, args: argparse.Namespace) -> DynamicToolService:
    """The tool service ``spec`` names, on ``bus``, configured by ``args``."""
    cls = load_service_class(spec)
    topic, service_id = args.topic, args.id
    if spec in BUILTIN:
        # The same id as `toolmesh serve` uses, so every joke process shares one subscription.
        service_id = service_id or BUILTIN[spec][2]
        if topic is None and args.request_queue is None and args.response_queue is None:
            topic = BUILTIN[spec][1]
    if topic is None and (args.request_queue is None or args.response_queue is None):
        raise ToolmeshError("give --topic, or both --request-queue and --response-queue",
                            type="usage-error")
    if args.concurrency < 1:
        raise ToolmeshError(f"--concurrency must be at least 1, not {args.concurrency}",
                            type="usage-error")
    try:
        service = cls(bus, topic=topic, request_queue=args.request_queue,
                      response_queue=args.response_queue, id=service_id,
                      concurrency=args.concurrency)
    except (TypeError, ValueError) as e:
        raise ToolmeshError(f"cannot construct {cls.__name__}: {e}", type="usage-error") from None
    log.info("%s (id %s): %s -> %s, %d at once", cls.__name__, service.id,
             service.request_queue.pulsar, service.response_queue.pulsar, args.concurrency)
    return service


async def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    load_service_class(args.service)  # a bad name fails before connecting
    bus = await connect(args.bus)
    try:
        service = build_tool_service(bus, args.service, args)
    except ToolmeshError:
        await bus.close()
        raise
    log.info("bus: %s", mask_url(args.bus))
    await serve(bus, [service])
    return 0
