"""``toolmesh demo``: the embedded bus and the joke service in one process, called by a client."""

from __future__ import annotations

import argparse
from typing import Any

from toolmesh.errors import RequestError

# The bus, the client and the joke services are imported when the command runs: every
# `toolmesh` command loads this module to build its parser.


def add_parser(commands: Any) -> None:
    p = commands.add_parser("demo", help="call the joke tool service on the embedded bus")
    p.add_argument("--bus", default=None,
                   help="bus URL (default: a private in-process bus)")
    p.add_argument("--user", default="alice")
    p.set_defaults(run=run)


async def run(args: argparse.Namespace) -> int:
    from toolmesh.bus import connect
    from toolmesh.bus.memory import new_memory_url
    from toolmesh.tools.client import ToolServiceClient
    from toolmesh.tools.queues import topic_queues
    from toolmesh.tools.services.joke import JokeService, StreamingJokeService

    bus = await connect(args.bus or new_memory_url())
    request_queue, response_queue = topic_queues("joke")
    stream_request, stream_response = topic_queues("joke-streaming")
    try:
        async with (
            JokeService(bus, topic="joke", announce=False),
            StreamingJokeService(bus, topic="joke-streaming", announce=False),
            ToolServiceClient(bus, request_queue=request_queue,
                              response_queue=response_queue) as jokes,
            ToolServiceClient(bus, request_queue=stream_request,
                              response_queue=stream_response) as streaming,
        ):
            print(f"bus: {bus.url}; joke service on {request_queue}\n")

            call = {"user": args.user, "config": {"style": "pun"},
                    "arguments": {"topic": "programming"}}
            print(f"call {call}")
            print(await jokes.call(**call, timeout=10), end="\n\n")

            call = {"user": args.user, "config": {"style": "dad-joke"},
                    "arguments": {"topic": "animals"}}
            print(f"streamed call {call} (one chunk per line):")
            async for chunk in streaming.stream(**call, timeout=10):
                print(f"  {chunk!r}")
            print()

            call = {"user": args.user, "config": {"style": "limerick"},
                    "arguments": {"topic": "food"}}
            print(f"call {call}")
            try:
                await jokes.call(**call, timeout=10)
            except RequestError as e:
                print(f"error response: type={e.type!r} message={e.message!r}")
    finally:
        await bus.close()
    return 0
