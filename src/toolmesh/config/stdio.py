"""Which programs ``stdio`` MCP items may run: an operator's decision, never config's alone.

An ``mcp`` item with ``"transport": "stdio"`` makes the mcp-tool service start its
``command`` as a child process. Whoever may write config would otherwise run any program on
that machine, so both the config service (on put) and the mcp-tool service (before it starts
a child) check the command against the allow-list the operator gave the process:
``--mcp-stdio-allow CMD[,CMD...]`` or ``TOOLMESH_MCP_STDIO_ALLOW``; ``*`` allows any command.
The default allows none.

Commands are compared exactly as written in the item (``uvx`` does not allow ``/tmp/uvx``).
Allowing an interpreter (``python``, ``sh``, ``node``) allows whatever code its arguments
name; allow the server programs themselves (``uvx``, ``mcp-server-time``) where you can.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

ENV = "TOOLMESH_MCP_STDIO_ALLOW"
FLAG = "--mcp-stdio-allow"


@dataclass(frozen=True, slots=True)
class StdioAllowList:
    """The commands stdio MCP items may run (``any_command``: every one)."""

    commands: frozenset[str] = frozenset()
    any_command: bool = False

    @classmethod
    def parse(cls, text: str | None) -> StdioAllowList:
        """From ``"python,uvx"`` (commas or spaces), ``"*"``, or ``None``/``""`` (none)."""
        names = [n for n in (text or "").replace(",", " ").split() if n]
        return cls(frozenset(n for n in names if n != "*"), any_command="*" in names)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> StdioAllowList:
        return cls.parse((os.environ if environ is None else environ).get(ENV))

    def allows(self, command: str | None) -> bool:
        return bool(command) and (self.any_command or command in self.commands)

    def refusal(self, what: str, command: str | None) -> str:
        """Why ``what`` (e.g. ``mcp/clock``) may not run ``command``, and how to allow it."""
        allowed = ("none" if not self.commands
                   else ", ".join(repr(c) for c in sorted(self.commands)))
        return (f"{what} is a stdio MCP server, which runs the command {command!r} on this "
                f"machine, and the operator has not allowed that command (allowed: {allowed}); "
                f"to allow it, start the config and mcp-tool services with "
                f"{FLAG} {command or 'CMD'} (or {ENV}={command or 'CMD'})")

    def __str__(self) -> str:
        if self.any_command:
            return "any command"
        return ", ".join(sorted(self.commands)) or "none"


#: the default: no stdio MCP server may be started
DENY_ALL = StdioAllowList()
