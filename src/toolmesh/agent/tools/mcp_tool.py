"""``mcp-tool`` tools: a tool on an MCP server, through the mcp-tool service (SPEC §3).

Declared ``arguments`` are what the LLM is shown (the seed's requirement). A tool that
declares none gets them from the server's ``tools/list`` ``inputSchema`` (names, types,
descriptions, required). Either way the arguments are checked against the declared list and,
once the server has told us, against its ``inputSchema`` with jsonschema before the call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import jsonschema

from toolmesh.agent.arguments import Argument
from toolmesh.agent.tools.base import Call, Tool, ToolBuildError, ToolInfo
from toolmesh.agent.tools.context import BuildContext
from toolmesh.errors import RequestError

log = logging.getLogger("toolmesh.agent.mcp")

DESCRIBE_TIMEOUT = 10.0
#: after a failed discovery, how long to wait before asking the server again
RETRY_AFTER = 15.0


def arguments_from_schema(schema: Mapping[str, Any]) -> tuple[Argument, ...]:
    """The arguments a JSON Schema ``inputSchema`` describes."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    arguments = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, dict) else {}
        type_ = prop.get("type", "any")
        if isinstance(type_, list):  # ["string", "null"]: the first real type
            type_ = next((t for t in type_ if t != "null"), "any")
        description = prop.get("description") or prop.get("title") or ""
        arguments.append(Argument(name=name, type=str(type_), description=str(description),
                                  required=name in required))
    return tuple(arguments)


class McpTool(Tool):
    """Calls one MCP tool; learns its ``inputSchema`` from the server when it can."""

    def __init__(self, info: ToolInfo, client: Any, mcp_id: str, *, declared: bool) -> None:
        super().__init__(info)
        self.client = client
        self.mcp_id = mcp_id
        self.declared = declared
        self.schema: dict[str, Any] | None = None
        self._validator: jsonschema.protocols.Validator | None = None
        self._next_try = 0.0

    @property
    def arguments(self) -> tuple[Argument, ...]:
        if self.declared or self.schema is None:
            return self.info.arguments
        return arguments_from_schema(self.schema)

    async def prepare(self) -> None:
        """Fetch the server's schema unless we have it (or asked too recently)."""
        if self.schema is not None or time.monotonic() < self._next_try:
            return
        try:
            described = await self.client.describe(self.mcp_id, timeout=DESCRIBE_TIMEOUT)
        except RequestError as e:
            self._next_try = time.monotonic() + RETRY_AFTER
            log.warning("cannot read the arguments of MCP tool %r yet: %s", self.mcp_id, e.message)
            return
        schema = described.get("inputSchema") or {"type": "object"}
        try:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            self._validator = cls(schema)
        except jsonschema.SchemaError as e:
            log.warning("MCP tool %r has an invalid inputSchema (%s); only the declared "
                        "arguments are checked", self.mcp_id, e.message)
        self.schema = schema

    def check(self, arguments: dict[str, Any]) -> list[str]:
        if self._validator is None:
            return []
        return [f"{'/'.join(map(str, e.absolute_path)) or 'Args'}: {e.message}"
                for e in sorted(self._validator.iter_errors(arguments), key=str)]

    async def invoke(self, arguments: dict[str, Any], call: Call) -> str:
        # The LLM's parameters go to the server unchanged (SPEC §3, requirement 7).
        return str(await self.client.invoke(self.mcp_id, arguments, timeout=call.timeout))


async def build(key: str, config: Mapping[str, Any], context: BuildContext) -> Tool:
    mcp_id = str(config["mcp-tool"])
    if mcp_id not in context.config.get("mcp", {}):
        raise ToolBuildError(f"tool/{key} uses MCP tool {mcp_id!r}, but there is no config "
                             f"item mcp/{mcp_id}")
    client = context.services.get("mcp")
    if client is None:
        raise ToolBuildError(f"tool/{key} needs the mcp-tool service, which this agent has "
                             "no client for")
    tool = McpTool(ToolInfo.from_config(key, config), client, mcp_id,
                   declared=bool(config.get("arguments")))
    await tool.prepare()
    return tool
