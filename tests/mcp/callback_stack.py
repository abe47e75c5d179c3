"""The mcp-tool service with a real config service and a real text-completion service (a
ScriptedLLM) on the memory bus, for the servers of :mod:`tests.mcp.callback_servers`."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolmesh import RequestClient
from toolmesh.bus import connect
from toolmesh.bus.memory import new_memory_url
from toolmesh.config.client import ConfigClient
from toolmesh.config.service import ConfigService
from toolmesh.config.stdio import StdioAllowList
from toolmesh.config.store import open_store
from toolmesh.llm import ScriptedLLM, TextCompletionService
from toolmesh.mcp import McpToolClient, McpToolService


@dataclass
class CallbackStack:
    service: McpToolService
    client: McpToolClient
    wire: RequestClient  # raw requests; every response of a stream, errors returned
    config: ConfigClient

    async def put(self, items: dict[str, dict[str, Any]]) -> None:
        version = await self.config.put({("mcp", k): json.dumps(v) for k, v in items.items()})
        async with asyncio.timeout(10):
            await self.service.wait_for_config(version)

    async def responses(self, body: dict[str, Any], timeout: float = 30) -> list[dict[str, Any]]:
        return [r async for r in self.wire.stream(body, timeout=timeout)]


@asynccontextmanager
async def callback_stack(tmp_path: Path, llm: ScriptedLLM | None = None
                         ) -> AsyncIterator[CallbackStack]:
    q = {name: {"request_queue": f"request:tg:cb-{name}", "response_queue": f"response:tg:cb-{name}"}
         for name in ("config", "mcp", "tc")}
    config_queues = {**q["config"], "push_queue": "notify:tg:cb-config"}
    bus = await connect(new_memory_url())
    store = await open_store(str(tmp_path / "config.db"))
    allow = StdioAllowList.parse(sys.executable)  # the test servers run as this interpreter
    async with AsyncExitStack() as s:
        s.push_async_callback(bus.close)
        s.push_async_callback(store.close)
        await s.enter_async_context(ConfigService(bus, store, **config_queues, stdio_allow=allow))
        await s.enter_async_context(TextCompletionService(bus, llm or ScriptedLLM(), **q["tc"]))
        service = await s.enter_async_context(McpToolService(
            bus, **q["mcp"], config_queues=config_queues, call_timeout=20, stdio_allow=allow,
            text_completion_queues=q["tc"], sampling_timeout=10))
        client = await s.enter_async_context(McpToolClient(bus, **q["mcp"]))
        wire = await s.enter_async_context(
            RequestClient(bus, **q["mcp"], error_of=lambda response: None))
        config = await s.enter_async_context(ConfigClient(bus, timeout=10, **q["config"]))
        yield CallbackStack(service, client, wire, config)
