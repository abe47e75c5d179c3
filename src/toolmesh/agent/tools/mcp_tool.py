"""``mcp-tool`` tools: a tool on an MCP server, through the mcp-tool service.

Declared ``arguments`` are what the LLM is shown (the seed's requirement), completed by the
server's ``tools/list`` ``inputSchema`` once known (its required-ness and constraints); a tool
that declares none is shown the ``inputSchema``'s arguments. Before the call the arguments are
checked against the declarations and the ``inputSchema`` together (jsonschema), and every
problem is reported at once; an undeclared argument the ``inputSchema`` accepts goes through.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolmesh.agent.arguments import (
    Argument,
    arguments_from_schema,
    check_arguments,
    merge_discovered,
)
from toolmesh.agent.tools.base import Call, Tool, ToolBuildError, ToolInfo
from toolmesh.agent.tools.context import BuildContext
from toolmesh.agent.tools.mcp_schemas import McpSchemas
from toolmesh.approvals.policy import Policy, PolicyError, parse_policy, required
from toolmesh.config.service import DEFAULT_WORKSPACE
from toolmesh.errors import RequestError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

log = logging.getLogger("toolmesh.agent.mcp")

#: a call refused for its arguments by the server itself (mcp-tool service): our copy of the
#: schema may be stale
INVALID_ARGUMENTS = "invalid-arguments"


class McpTool(Tool):
    """Calls one MCP tool; learns its ``inputSchema`` from the server when it can."""

    def __init__(self, info: ToolInfo, client: Any, mcp_id: str, *, declared: bool,
                 schemas: McpSchemas, item: Mapping[str, Any],
                 workspace: str = DEFAULT_WORKSPACE) -> None:
        super().__init__(info)
        self.client = client
        self.mcp_id = mcp_id
        self.workspace = workspace  # of the tool item, so of the mcp item it names
        self.declared = declared
        self.schemas = schemas
        self.item = item  # the mcp config item: when it changes, the schema is read anew
        self.schema: dict[str, Any] | None = None
        self._validator: Validator | None = None

    @property
    def arguments(self) -> tuple[Argument, ...]:
        if self.schema is None:
            return self.info.arguments
        discovered = arguments_from_schema(self.schema)
        return merge_discovered(self.info.arguments, discovered) if self.declared else discovered

    async def prepare(self) -> None:
        """Bring the schema up to date (mcp_schemas.py: TTL, change notices, a short budget);
        a server that does not answer makes the tool unavailable, so it is not offered."""
        schema = await self.schemas.get(self.mcp_id, item=self.item, workspace=self.workspace)
        self.unavailable = self.schemas.unavailable(self.mcp_id, workspace=self.workspace)
        if schema is self.schema:
            return
        self._validator = None
        if schema is not None:
            # here, not at the top: jsonschema takes ~0.1 s to import, and an agent whose
            # tools use no MCP server has no schema to read (schema/tool_arguments.py)
            import jsonschema

            try:
                cls = jsonschema.validators.validator_for(schema)
                cls.check_schema(schema)
                self._validator = cls(schema)
            except jsonschema.SchemaError as e:
                log.warning("MCP tool %r has an invalid inputSchema (%s); only the declared "
                            "arguments are checked", self.mcp_id, e.message)
        self.schema = schema

    def needs_approval(self, default: Policy) -> bool:
        """The tool item's policy, else its server's (the ``mcp`` item), else the tool's
        annotations as its server lists them, else ``default``."""
        try:
            server = parse_policy(self.item.get("approval"), where=f"mcp/{self.mcp_id}")
        except PolicyError:
            server = "always"  # refused when put; an item from before asks, to be safe
        return required(tool=self.info.approval, server=server, default=default,
                        annotations=self.schemas.annotations(self.mcp_id,
                                                             workspace=self.workspace))

    def check(self, arguments: Any) -> list[str]:
        # declared and schema problems together: the LLM fixes them all in one round
        return check_arguments(arguments, self.info.arguments, schema=self._validator)

    async def invoke(self, arguments: dict[str, Any], call: Call) -> str:
        # The LLM's parameters go to the server unchanged: the server judges them.
        try:
            return str(await self.client.invoke(self.mcp_id, arguments, timeout=call.timeout,
                                                max_timeout=call.max_timeout,
                                                on_progress=call.progress,
                                                on_question=call.ask,
                                                workspace=self.workspace, key=call.key,
                                                actor=call.actor))
        except RequestError as e:
            if e.type == INVALID_ARGUMENTS:
                # the server's schema and ours disagree: ours is stale, read it before the
                # next step (the service's notice may come after that step has begun)
                self.schemas.invalidate(self.workspace, [self.mcp_id])
            raise


async def build(key: str, config: Mapping[str, Any], context: BuildContext) -> Tool:
    mcp_id = str(config["mcp-tool"])
    if mcp_id not in context.config.get("mcp", {}):
        raise ToolBuildError(f"tool/{key} uses MCP tool {mcp_id!r}, but there is no config "
                             f"item mcp/{mcp_id}")
    client = context.services.get("mcp")
    if client is None:
        raise ToolBuildError(f"tool/{key} needs the mcp-tool service, which this agent has "
                             "no client for")
    # One cache per agent, kept in its services so it outlives tool rebuilds (a config change
    # must not re-read every schema, nor wait for any: the first step that offers it does).
    schemas = context.services.get("mcp-schemas")
    if schemas is None:
        schemas = context.services["mcp-schemas"] = McpSchemas(client)
    await schemas.watch()
    schemas.prefetch(mcp_id, item=context.config["mcp"][mcp_id], workspace=context.workspace)
    return McpTool(ToolInfo.from_config(key, config), client, mcp_id,
                   declared=bool(config.get("arguments")), schemas=schemas,
                   item=context.config["mcp"][mcp_id], workspace=context.workspace)
