"""The ``toolmesh`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from toolmesh.cli import (
    agent_cmd,
    approvals_cmd,
    completion,
    config_cmd,
    demo,
    dialogs_cmd,
    doctor,
    loop,
    mcp_cmd,
    serve,
    services_cmd,
    token_cmd,
    tool_service_cmd,
    tools_cmd,
)
from toolmesh.cli.parser import Parser
from toolmesh.cli.pipes import closed_pipe_safe
from toolmesh.errors import ToolmeshError


def version() -> str:
    """The installed distribution's version, else the package's own."""
    import importlib.metadata  # here: ~20 ms to import, for --version alone

    try:
        return importlib.metadata.version("toolmesh")
    except importlib.metadata.PackageNotFoundError:
        from toolmesh import __version__

        return __version__


class VersionAction(argparse._VersionAction):
    """``--version``, printing ``toolmesh VERSION``: the version is looked up when the flag is
    given, not each time the parser is built."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        self.version = f"%(prog)s {version()}"
        super().__call__(parser, namespace, values, option_string)


def build_parser() -> Parser:
    """The whole ``toolmesh`` command tree (also what shell completion is generated from)."""
    parser = Parser(
        prog="toolmesh",
        description="A ReAct agent whose tools are plugged in by configuration.",
        epilog="Run 'toolmesh COMMAND --help' for a command's options; 'toolmesh completion "
               "--help' sets up tab completion.")
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo.add_parser(commands)
    serve.add_parsers(commands)
    config_cmd.add_parser(commands)
    agent_cmd.add_parser(commands)
    mcp_cmd.add_parser(commands)
    tool_service_cmd.add_parser(commands)
    tools_cmd.add_parser(commands)
    services_cmd.add_parser(commands)
    dialogs_cmd.add_parser(commands)
    approvals_cmd.add_parser(commands)
    token_cmd.add_parser(commands)
    doctor.add_parser(commands)
    completion.add_parser(commands, root=parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = build_parser().parse_command(argv)
    try:
        if getattr(args, "sync", False):
            return args.run(args) or 0
        return loop.run(args.run(args)) or 0
    except ToolmeshError as e:
        print(f"toolmesh: error: {e.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def run() -> NoReturn:
    """The console script: :func:`main`, then exit with its status (141, quietly, when
    stdout was closed: ``toolmesh config show | head -1``)."""
    code = closed_pipe_safe(main)
    pulsar = sys.modules.get("toolmesh.bus.pulsar")
    if pulsar is not None and pulsar.opened_clients:
        pulsar.exit_process(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
