"""The first dialog of a `toolmesh serve` started together with an announcing tool service
is offered the announced tool: the agent's first dialogs wait (briefly, once) for the answers
to its start-up probe instead of running with the configured tools alone.

The dialog is asked the moment the gateway listens, as a user (or a script) starting
everything at once would; the scripted model answers ``offered`` only when the agent's prompt
lists the announced tool.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import RUN_MARKER
from tests.examples.loading import EXAMPLES
from tests.processes import start_toolmesh
from tests.rabbit import own_vhost


def script(path: Path) -> str:
    path.write_text(json.dumps({
        "rules": [{"match": "count-words", "response": "Thought: seen\nFinal Answer: offered"}],
        "default": "Thought: not seen\nFinal Answer: missing"}))
    return f"scripted:{path}"


async def first_answer(data: Path, *extra: str) -> str:
    """Start a server (with ``extra`` options); ask at once; its answer."""
    proc, lines = await start_toolmesh(
        "serve", "--port", "0", "--config-store", str(data / "config.db"),
        "--llm", script(data / "llm.json"), *extra,
        ready="gateway listening", cwd=EXAMPLES / "wordcount",
        extra_env={"TOOLMESH_DATA_DIR": str(data)})
    try:
        url = re.search(r"gateway listening on (\S+)", lines[-1]).group(1)  # type: ignore[union-attr]
        async with aiohttp.ClientSession() as http, http.post(
                url + "api/v1/flow/default/service/agent",
                json={"question": "How many words are in 'a b c'?"}) as response:
            body = await response.json()
        assert response.status == 200, body
        return body["answer"]
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.communicate(), 20)


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_first_dialog_is_offered_the_announced_tool(tmp_path: Path) -> None:
    for run in range(3):
        data = tmp_path / f"run{run}"
        data.mkdir()
        answer = await first_answer(data, "--tool-service", "wordtools:WordCount")
        assert answer == "offered", f"run {run}"


@pytest.mark.rabbitmq
async def test_on_rabbitmq_the_first_dialog_is_offered_a_service_of_another_process(
        tmp_path: Path) -> None:
    """The service runs already, as its own process; the server starts on the same broker
    and is asked at once: the service's answer to the agent's probe crosses the broker."""
    async with own_vhost(f"{RUN_MARKER}-first-dialog") as bus:
        service, _ = await start_toolmesh("run", "wordtools:WordCount", "--bus", bus,
                                          cwd=EXAMPLES / "wordcount")
        try:
            for run in range(3):
                data = tmp_path / f"run{run}"
                data.mkdir()
                assert await first_answer(data, "--bus", bus) == "offered", f"run {run}"
        finally:
            service.terminate()
            await asyncio.wait_for(service.communicate(), 20)
