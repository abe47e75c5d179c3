"""The ``toolmesh`` command."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import NoReturn

from toolmesh.cli import (
    agent_cmd,
    config_cmd,
    demo,
    mcp_cmd,
    run_service,
    serve,
    token_cmd,
    tool_service_cmd,
    tools_cmd,
)
from toolmesh.errors import ToolmeshError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolmesh",
        description="A ReAct agent whose tools are plugged in by configuration.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo.add_parser(commands)
    run_service.add_parser(commands)
    serve.add_parsers(commands)
    config_cmd.add_parser(commands)
    agent_cmd.add_parser(commands)
    mcp_cmd.add_parser(commands)
    tool_service_cmd.add_parser(commands)
    tools_cmd.add_parser(commands)
    token_cmd.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "sync", False):
            return args.run(args) or 0
        return asyncio.run(args.run(args)) or 0
    except ToolmeshError as e:
        print(f"toolmesh: error: {e.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def run() -> NoReturn:
    """The console script: :func:`main`, then exit with its status."""
    code = main()
    pulsar = sys.modules.get("toolmesh.bus.pulsar")
    if pulsar is not None and pulsar.opened_clients:
        pulsar.exit_process(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
