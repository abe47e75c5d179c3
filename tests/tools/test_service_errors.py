"""What a tool service's failure looks like to whoever called it: an exception the author did
not mean (a KeyError) names its type and the service, and leaves its traceback in the
service's log; an error raised on purpose keeps its own words. The same words reach the LLM
(as the observation), `toolmesh agent -v` and `toolmesh tool-service invoke`."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RUN_MARKER
from tests.processes import run_toolmesh, start_toolmesh
from tests.rabbit import own_vhost
from tests.servers import toolmesh_serve
from tests.tools.word_services import COUNT_WORDS, DESCRIPTOR, CountWords
from toolmesh import connect
from toolmesh.bus.memory import new_memory_url
from toolmesh.errors import RequestError
from toolmesh.rpc.client import RequestClient
from toolmesh.rpc.service import Reply, Service
from toolmesh.tools.client import ToolServiceClient
from toolmesh.tools.queues import topic_queues

KEY_ERROR = "KeyError: 'text' (raised by the tool service wordcount)"


async def call_count_words(arguments: dict[str, Any]) -> RequestError:
    """The error the word counter answers ``arguments`` with, on a private in-process bus."""
    bus = await connect(new_memory_url())
    request_queue, response_queue = topic_queues("count-words")
    try:
        async with CountWords(bus, topic="count-words", id="wordcount"), \
                ToolServiceClient(bus, request_queue=request_queue,
                                  response_queue=response_queue) as client:
            with pytest.raises(RequestError) as e:
                await client.call(user="u", arguments=arguments, timeout=10)
        return e.value
    finally:
        await bus.close()


async def test_an_unexpected_exception_names_its_type_and_the_service(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="toolmesh.service"):
        error = await call_count_words({"content": "the quick brown fox"})
    assert (error.type, error.message) == ("tool-service-error", KEY_ERROR)
    # the author finds the traceback in the service's log
    [record] = [r for r in caplog.records if r.name == "toolmesh.service"]
    assert record.levelno == logging.WARNING and KEY_ERROR in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is KeyError


async def test_an_error_raised_on_purpose_keeps_its_own_words() -> None:
    error = await call_count_words({"text": "   "})
    assert (error.type, error.message) == ("tool-service-error", "there is no text to count")


async def test_any_other_service_names_the_exception_type_too() -> None:
    class Lookup(Service):
        async def handle(self, request: dict[str, Any], reply: Reply) -> None:
            await reply({"value": {}[request["key"]]})

    bus = await connect(new_memory_url())
    try:
        async with Lookup(bus, request_queue="request:tg:lookup",
                          response_queue="response:tg:lookup", subscription="lookup"), \
                RequestClient(bus, request_queue="request:tg:lookup",
                              response_queue="response:tg:lookup") as client:
            with pytest.raises(RequestError) as e:
                await client.request({"key": "colour"}, timeout=10)
    finally:
        await bus.close()
    assert (e.value.type, e.value.message) == ("service-error", "KeyError: 'colour'")


@pytest.fixture
async def vhost_url() -> AsyncIterator[str]:
    """A RabbitMQ vhost of this test's own: `toolmesh serve` uses TrustGraph's fixed queue
    names, which other tests' processes on the shared broker must not answer."""
    async with own_vhost(f"{RUN_MARKER}-errors") as url:
        yield url


@asynccontextmanager
async def running(*args: str) -> AsyncIterator[list[str]]:
    """A ``toolmesh`` process, until the block ends; yields its stderr lines so far (kept
    up to date)."""
    proc, lines = await start_toolmesh(*args)

    async def drain() -> None:
        assert proc.stderr is not None
        while raw := await proc.stderr.readline():
            lines.append(raw.decode(errors="replace"))

    reader = asyncio.create_task(drain())
    try:
        yield lines
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 20)
        await asyncio.wait_for(reader, 5)


@pytest.mark.rabbitmq
async def test_a_tool_service_bug_reads_the_same_everywhere(vhost_url: str,
                                                            tmp_path: Path) -> None:
    # The LLM calls the tool, then answers "seen" only if its prompt holds the observation in
    # exactly these words (and fails the dialog if not: no other answer is scripted).
    script = tmp_path / "llm.json"
    script.write_text(json.dumps({
        "responses": ['Thought: I count them\nAction: count-words\n'
                      'Args: {"content": "the quick brown fox"}'],
        "rules": [{"match": re.escape(f"Observation: Error: {KEY_ERROR}"),
                   "response": "Thought: it is broken\nFinal Answer: The counter failed."}]}))
    for name, value in [("descriptor.json", DESCRIPTOR), ("tool.json", COUNT_WORDS)]:
        (tmp_path / name).write_text(json.dumps(value))
    async with toolmesh_serve(tmp_path, "--bus", vhost_url, "--llm", f"scripted:{script}") \
            as served, \
            running("run", "tests.tools.word_services:CountWords", "--topic", "count-words",
                    "--id", "wordcount", "--bus", vhost_url) as service_log:
        u = ["-u", served.url]
        for item, file in [("tool-service/wordcount", "descriptor.json"),
                           ("tool/count-words", "tool.json")]:
            code, _, err = await run_toolmesh("config", "put", item, str(tmp_path / file), *u)
            assert code == 0, err

        code, out, err = await run_toolmesh("agent", "How many words?", "-v", *u)
        assert (code, out) == (0, "The counter failed.\n"), err
        assert ('🔧 count-words {"content": "the quick brown fox"}\n'
                f"❌ {KEY_ERROR}\n") in err

        code, out, err = await run_toolmesh("tool-service", "invoke", "wordcount",
                                            "-a", '{"content": "the quick brown fox"}', *u)
        assert (code, out, err) == (1, "", f"toolmesh: error: tool-service-error: {KEY_ERROR}\n")
        code, out, err = await run_toolmesh("tool-service", "invoke", "wordcount",
                                            "-a", '{"text": " "}', *u)
        assert (code, out, err) == (
            1, "", "toolmesh: error: tool-service-error: there is no text to count\n")

        # the service's stderr: a warning with the traceback for each of the two KeyErrors;
        # the refusal on purpose is an INFO line without one
        log = "".join(service_log)
        assert log.count("WARNING toolmesh.service: request ") == 2, log
        assert log.count(f"failed: {KEY_ERROR}\nTraceback (most recent call last):\n") == 2, log
        assert 'text = arguments["text"]' in log and "\nKeyError: 'text'\n" in log
        assert log.count("Traceback") == 2, log
        assert "INFO toolmesh.service: request " in log and "there is no text to count" in log
