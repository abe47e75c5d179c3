"""``tool-service`` tools: any service on the bus, through its descriptor (docs/tool-services.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from toolmesh.agent.tools.base import Call, Tool, ToolBuildError, ToolError, ToolInfo
from toolmesh.agent.tools.context import BuildContext
from toolmesh.tools.client import ToolServiceClient


class ToolServiceTool(Tool):
    """Calls a tool service with the tool's config-param values, the caller's user and the
    workspace of the tool item.

    ``live_instances()``: how many announced instances of its service serve its queue
    (``None``: the service never announced it); when none is left the call fails at once
    instead of waiting out its timeout.
    """

    def __init__(self, info: ToolInfo, client: Callable[[], Awaitable[ToolServiceClient]],
                 config: dict[str, Any], *,
                 workspace: str | None = None, service_id: str | None = None,
                 live_instances: Callable[[], int | None] | None = None) -> None:
        super().__init__(info)
        #: the client, from the pool at each call (it may have closed an unused one)
        self.client = client
        self.config = config
        self.workspace = workspace
        self.service_id = service_id
        self.live_instances = live_instances

    async def invoke(self, arguments: dict[str, Any], call: Call) -> str:
        if self.live_instances is not None and self.live_instances() == 0:
            raise ToolError(f"no live instance of tool service {self.service_id}")
        client = await self.client()
        if call.parts is None:
            return await client.call(user=call.user, config=self.config, arguments=arguments,
                                     timeout=call.timeout, workspace=self.workspace,
                                     key=call.key)
        pieces = []
        async for text, _ in client.responses(user=call.user, config=self.config,
                                              arguments=arguments, timeout=call.timeout,
                                              workspace=self.workspace, key=call.key):
            if text:
                pieces.append(text)
                await call.parts(text)
        return "".join(pieces)


async def build(key: str, config: Mapping[str, Any], context: BuildContext) -> Tool:
    service_id = config["service"]
    descriptor = context.config.get("tool-service", {}).get(service_id)
    if descriptor is None:
        raise ToolBuildError(f"tool/{key} uses tool service {service_id!r}, but there is no "
                             f"config item tool-service/{service_id} and no running instance "
                             "announces it")
    if descriptor.get("enabled", True) is False:
        raise ToolBuildError(f"tool/{key} uses tool service {service_id!r}, which its config "
                             f"item disables (tool-service/{service_id} has \"enabled\": false)")
    values: dict[str, Any] = {}
    for param in descriptor.get("config-params") or []:
        name = param["name"]
        if name in config:
            values[name] = config[name]
        elif param.get("required", False):
            raise ToolBuildError(f"tool/{key} does not set {name!r}, which tool service "
                                 f"{service_id!r} requires (config-params)")
    queues = (descriptor["request-queue"], descriptor["response-queue"])
    await context.clients.tool_service(*queues)  # subscribed now, not at the first call

    def client() -> Awaitable[ToolServiceClient]:
        return context.clients.tool_service(*queues)

    registry = context.services.get("registry")
    queue = descriptor["request-queue"]
    return ToolServiceTool(ToolInfo.from_config(key, config), client, values,
                           workspace=context.workspace, service_id=service_id,
                           live_instances=(lambda: registry.live_instances(service_id, queue))
                           if registry is not None else None)
