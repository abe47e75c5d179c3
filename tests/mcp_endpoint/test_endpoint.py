"""toolmesh as an MCP server, to a client it did not write: the ``mcp`` SDK's own client over
streamable HTTP against a real ``toolmesh serve`` (the joke service announces tell-joke)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import mcp_types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.dialogs.test_embedded_restart import _offered
from tests.servers import toolmesh_serve


@asynccontextmanager
async def mcp_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            streamable_http_client(url, http_client=http) as (read, write, *_), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_an_mcp_client_lists_and_calls_the_workspaces_tools(tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path) as served:
        await _offered(served.url, "tell-joke")
        async with mcp_session(served.url + "mcp") as session:
            listed = await session.list_tools()
            joke = await session.call_tool("tell-joke", {"topic": "cats"})
            wrong = await session.call_tool("tell-joke", {"topic": 7})
            unknown = await session.call_tool("no-such-tool", {})
    [tool] = [t for t in listed.tools if t.name == "tell-joke"]
    assert tool.input_schema["properties"]["topic"]["type"] == "string"
    assert tool.input_schema["required"] == ["topic"]
    assert not joke.is_error and joke.content[0].text.startswith("Hey trustgraph! ")
    assert wrong.is_error and "invalid arguments" in wrong.content[0].text
    assert unknown.is_error and "there is no tool 'no-such-tool'" in unknown.content[0].text
