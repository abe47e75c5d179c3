"""MCP progress through the mcp-tool service: a real server process that reports progress;
its reports move the call's deadline (up to the maximum) and stream back to the caller."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.mcp.callback_servers import running_http_server, stdio_item
from tests.mcp.callback_stack import CallbackStack, callback_stack
from toolmesh import RequestError
from toolmesh.mcp.progress import Progress


@pytest.fixture(params=["stdio", "streamable-http"])
async def stack(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CallbackStack]:
    async with callback_stack(tmp_path) as s:
        if request.param == "stdio":
            items = {name: stdio_item(**{"remote-name": name})
                     for name in ("count", "stall", "cancelled")}
            await s.put(items)
            await _connect(s)
            yield s
        else:
            async with running_http_server() as server:
                await s.put({name: {"url": server.url, "remote-name": name}
                             for name in ("count", "stall", "cancelled")})
                yield s


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_progress_streams_to_the_caller_and_moves_the_deadline(stack: CallbackStack) -> None:
    updates: list[Progress] = []

    async def seen(update: Progress) -> None:
        updates.append(update)

    # 4 steps 0.3 s apart take 1.2 s: more than the 0.6 s timeout, which each report renews
    text = await stack.client.invoke("count", {"steps": 4, "interval": 0.3}, timeout=0.6,
                                     max_timeout=20, on_progress=seen)
    assert text == "counted to 4"
    assert updates == [Progress(progress=n, total=4, message=f"step {n}") for n in (1, 2, 3, 4)]

    # the same call without progress reports given: it times out (the deadline is a real one)
    with pytest.raises(RequestError) as raised:
        await stack.client.invoke("count", {"steps": 1, "interval": 1.5}, timeout=0.6)
    assert raised.value.type == "mcp-error"
    assert "did not finish tool 'count': timed out after 0.6 s" in raised.value.message


async def test_trustgraphs_callers_get_one_response_of_the_usual_shape(stack: CallbackStack) -> None:
    # no "progress": true, as TrustGraph's clients send: the deadline still moves, but only the
    # final response comes (a TrustGraph client takes the first response as the answer)
    responses = await stack.responses({"name": "count", "timeout": 0.6,
                                       "parameters": {"steps": 3, "interval": 0.3}})
    assert responses == [{"error": None, "text": "counted to 3",
                          "object": '{"result": "counted to 3"}'}]
    # asked for, the reports come first, each marked as not the end of the stream
    responses = await stack.responses({"name": "count", "timeout": 5, "progress": True,
                                       "parameters": {"steps": 2, "interval": 0.05}})
    assert responses == [
        {"error": None, "text": None, "object": None, "end_of_stream": False,
         "progress": {"progress": 1, "total": 2, "message": "step 1"}},
        {"error": None, "text": None, "object": None, "end_of_stream": False,
         "progress": {"progress": 2, "total": 2, "message": "step 2"}},
        {"error": None, "text": "counted to 2", "object": '{"result": "counted to 2"}'}]


async def test_a_server_that_goes_quiet_is_cancelled_timeout_after_its_last_report(
        stack: CallbackStack) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RequestError) as raised:
        await stack.client.invoke("stall", {"steps": 3, "interval": 0.2}, timeout=0.8,
                                  max_timeout=30, on_progress=_ignore)
    took = loop.time() - started
    assert "0.8 s after its last progress report" in raised.value.message, raised.value.message
    assert 0.6 + 0.8 <= took < 5  # three reports, then the timeout: far less than the maximum
    assert await _cancelled(stack) == [3]  # and the server was told to cancel


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_progress_never_extends_a_call_past_its_maximum(stack: CallbackStack) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RequestError) as raised:
        # reports every 0.2 s forever: only the maximum ends it
        await stack.client.invoke("stall", {"steps": 0, "interval": 0.2}, timeout=0.5,
                                  max_timeout=1.5, on_progress=_ignore)
    took = loop.time() - started
    assert raised.value.type == "mcp-error"
    assert "timed out after 1.5" in raised.value.message, raised.value.message
    assert 1.5 <= took < 4
    assert len(await _cancelled(stack)) == 1


async def test_bad_progress_options_are_refused(stack: CallbackStack) -> None:
    for body, problem in [({"max-timeout": 0}, "'max-timeout' must be a positive number"),
                          ({"max-timeout": "9"}, "'max-timeout' must be a positive number"),
                          ({"progress": "yes"}, "'progress' must be true or false")]:
        [response] = await stack.responses({"name": "count", **body,
                                            "parameters": {"steps": 1, "interval": 0}})
        assert response["error"]["type"] == "bad-request"
        assert problem in response["error"]["message"]


async def _connect(stack: CallbackStack) -> None:
    # the timeouts below are short, and the time to connect counts against them: connect first
    assert json.loads(await stack.client.invoke("cancelled", {}, timeout=30)) == {"result": []}


async def _ignore(update: Progress) -> None:
    return None


async def _cancelled(stack: CallbackStack) -> list[int]:
    """The steps of the calls the server saw cancelled (waiting for the first to be)."""
    text = await stack.client.invoke("cancelled", {"wait": 10}, timeout=15)
    return json.loads(text)["result"]
