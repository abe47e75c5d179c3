"""The session pool with servers whose tools change and whose answers are too large: a
server's ``notifications/tools/list_changed`` and its refusal of arguments are passed on, and
an answer over the SDK's 1 MiB message limit is a clear error that leaves the session usable
(streamable HTTP) or is reconnected from (SSE)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.mcp.test_sessions import TRANSPORTS, Target, make_target, stats
from toolmesh.mcp import McpError, SessionPool

MIB = 1024 * 1024


class Notices:
    """Collects the pool's "tools changed" calls; tests wait on them under a deadline."""

    def __init__(self) -> None:
        self.ids: list[list[str]] = []
        self.changed = asyncio.Event()

    def __call__(self, workspace: str, ids: list[str]) -> None:
        assert workspace == "default"  # the items of these tests are in the default one
        self.ids.append(ids)
        self.changed.set()

    async def wait(self) -> list[str]:
        async with asyncio.timeout(10):
            await self.changed.wait()
        return self.ids[-1]


@pytest.fixture
async def notices() -> Notices:
    return Notices()


@pytest.fixture
async def pool(notices: Notices) -> AsyncIterator[SessionPool]:
    pool = SessionPool(connect_timeout=20, on_tools_changed=notices)
    yield pool
    await pool.close()


@pytest.fixture(params=TRANSPORTS)
async def target(request: pytest.FixtureRequest) -> AsyncIterator[Target]:
    t = await make_target(request.param)
    yield t
    if t.process is not None:
        await t.process.stop()


async def test_list_changed_is_passed_on_and_the_tools_are_listed_again(
        pool: SessionPool, notices: Notices, target: Target) -> None:
    before = await pool.list_tools(target.tool("register"), timeout=20)
    assert "extra" not in {t.name for t in before}
    await pool.call_tool(target.tool("register"), {"tool": "extra"}, timeout=20)
    # every mcp item served by the session is named: each may show that server's tools
    assert await notices.wait() == ["register"]
    after = await pool.list_tools(target.tool("extra"), timeout=20)
    assert "extra" in {t.name for t in after}
    assert (await pool.call_tool(target.tool("extra"), {"word": "hi"}, timeout=20)).text \
        == "extra: hi"


async def test_refused_arguments_are_flagged_and_passed_on(
        pool: SessionPool, notices: Notices, target: Target) -> None:
    result = await pool.call_tool(target.tool("forecast"), {"city": "Oslo"}, timeout=20)
    assert result.is_error and result.refused_arguments
    assert await notices.wait() == ["forecast"]
    # a tool's own failure is not taken for stale arguments
    fail = await pool.call_tool(target.tool("fail"), {}, timeout=20)
    assert fail.is_error and not fail.refused_arguments


async def test_an_answer_over_the_message_limit_on_streamable_http_keeps_the_session(
        pool: SessionPool) -> None:
    target = await make_target("streamable-http")
    assert target.process is not None
    try:
        with pytest.raises(McpError, match=r"answer of MCP server 'large' to tool 'large' is "
                                           r"larger than the MCP SDK's limit of 1 MiB") as e:
            await pool.call_tool(target.tool("large"), {"size": 2 * MIB}, timeout=20)
        assert "session" not in e.value.message
        # a call running beside the oversized one is not harmed, and no new session was made
        slow = asyncio.create_task(pool.call_tool(target.tool("slow"), {"seconds": 1}, timeout=20))
        with pytest.raises(McpError, match="larger than"):
            await pool.call_tool(target.tool("large"), {"size": 2 * MIB}, timeout=20)
        assert (await slow).text == "slept 1 s"
        assert (await stats(pool, target))["initializations"] == 1
        # under the limit still arrives whole (the SDK sends the text twice: as content and
        # as structuredContent, so 400 000 characters make a message of about 800 KB)
        fits = await pool.call_tool(target.tool("large"), {"size": 400_000}, timeout=20)
        assert fits.text is not None and len(fits.text) == 400_000
    finally:
        await target.process.stop()


async def test_an_answer_over_the_message_limit_on_sse_is_clear_and_the_next_call_works(
        pool: SessionPool) -> None:
    # Over SSE every message comes on one stream, which the SDK cannot read past an oversized
    # event: the session is lost (said so), and the next call reconnects.
    target = await make_target("sse")
    assert target.process is not None
    try:
        with pytest.raises(McpError, match=r"larger than the MCP SDK's limit of 1 MiB per "
                                           r"message.*over SSE this also ends the session"):
            await pool.call_tool(target.tool("large"), {"size": 2 * MIB}, timeout=20)
        assert (await pool.call_tool(target.tool("echo"), {"text": "on"}, timeout=20)).text == "on"
        assert (await stats(pool, target))["initializations"] == 2
    finally:
        await target.process.stop()
