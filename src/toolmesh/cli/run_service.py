"""``toolmesh run-service``: run any DynamicToolService subclass as a process."""

from __future__ import annotations

import argparse
import importlib
import logging
from typing import Any

from toolmesh.bus import connect
from toolmesh.errors import ToolmeshError
from toolmesh.runtime import configure_logging, serve
from toolmesh.tools.service import DynamicToolService

log = logging.getLogger("toolmesh.run-service")

#: built-in services: name -> (MODULE:CLASS, default topic)
BUILTIN = {
    "joke": ("toolmesh.tools.services.joke:JokeService", "joke"),
    "joke-streaming": ("toolmesh.tools.services.joke:StreamingJokeService", "joke"),
}


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "run-service", help="run a tool service (MODULE:CLASS or a built-in) until SIGINT/SIGTERM",
        description="Run a DynamicToolService subclass on the bus. Built-ins: "
                    + ", ".join(BUILTIN))
    p.add_argument("service", help="MODULE:CLASS, or a built-in name (joke)")
    p.add_argument("--topic", help="short topic: queues non-persistent://tg/request/TOPIC "
                                   "and .../response/TOPIC")
    p.add_argument("--request-queue", help="explicit request queue (instead of --topic)")
    p.add_argument("--response-queue", help="explicit response queue (instead of --topic)")
    p.add_argument("--id", help="service id; replicas with the same id share the work")
    p.add_argument("--bus", default="memory://", help="bus URL (default: %(default)s)")
    p.add_argument("--concurrency", type=int, default=64,
                   help="requests handled at once (default: %(default)s)")
    p.add_argument("--log-level", default="INFO")
    p.set_defaults(run=run)


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


async def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    cls = load_service_class(args.service)
    topic = args.topic
    if topic is None and args.request_queue is None and args.response_queue is None:
        topic = BUILTIN[args.service][1] if args.service in BUILTIN else None
    if topic is None and (args.request_queue is None or args.response_queue is None):
        raise ToolmeshError("give --topic, or both --request-queue and --response-queue",
                            type="usage-error")
    bus = await connect(args.bus)
    try:
        service = cls(bus, topic=topic, request_queue=args.request_queue,
                      response_queue=args.response_queue, id=args.id,
                      concurrency=args.concurrency)
    except (TypeError, ValueError) as e:
        await bus.close()
        raise ToolmeshError(f"cannot construct {cls.__name__}: {e}", type="usage-error") from None
    log.info("%s on %s: %s -> %s", cls.__name__, args.bus.split("@")[-1],
             service.request_queue.pulsar, service.response_queue.pulsar)
    await serve(bus, [service])
    return 0
