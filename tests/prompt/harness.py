"""The prompt service's test harness: a fake text-completion service speaking its wire, and
a stack of prompt service, config service (SQLite) and clients on one test's own queues."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import Backend
from toolmesh import RequestClient, Service, ServiceError
from toolmesh.config.client import ConfigClient
from toolmesh.config.service import ConfigService
from toolmesh.config.store import open_store
from toolmesh.prompt import PromptClient, PromptService, RenderLimits
from toolmesh.rpc.service import Reply

TIMEOUT = 10  # generous deadline for answers that must come


class FakeTextCompletion(Service):
    """A text-completion service speaking its wire format: answers the prompt from ``answers``
    (a ServiceError there becomes an error response) or echoes it, word by word when streaming."""

    def __init__(self, bus: Any, *, queues: dict[str, str],
                 answers: dict[str, str | ServiceError] | None = None) -> None:
        super().__init__(bus, subscription="fake-llm", **queues)
        self.answers = answers or {}
        self.requests: list[dict[str, Any]] = []

    def error_response(self, error: dict[str, str]) -> dict[str, Any]:
        return {"error": error, "response": None, "in_token": None, "out_token": None,
                "model": None, "end_of_stream": True}

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        self.requests.append(request)
        answer = self.answers.get(request["prompt"], request["prompt"])
        if isinstance(answer, ServiceError):
            raise answer
        usage = {"in_token": len(request["prompt"]), "out_token": len(answer), "model": "echo-1"}
        if request["streaming"]:
            for word in re.findall(r"\S+\s*", answer):
                await reply({"error": None, "response": word, "end_of_stream": False})
            await reply({"error": None, "response": "", "end_of_stream": True, **usage})
        else:
            await reply({"error": None, "response": answer, "end_of_stream": True, **usage})


def queues(topic: str, name: str) -> dict[str, str]:
    return {"request_queue": f"request:tg:{topic}-{name}",
            "response_queue": f"response:tg:{topic}-{name}"}


@dataclass
class Stack:
    """A prompt service with its text-completion, config service and clients."""

    service: PromptService
    llm: FakeTextCompletion
    client: PromptClient
    raw: RequestClient  # hands back error responses as they are, to check the wire
    config: ConfigClient

    async def put(self, values: dict[str, Any]) -> None:
        """Put ``{key: template JSON or raw text}`` as prompt items; wait until applied."""
        version = await self.config.put({
            ("prompt", k): v if isinstance(v, str) else json.dumps(v) for k, v in values.items()})
        async with asyncio.timeout(TIMEOUT):
            await self.service.wait_for_config(version)

    async def delete(self, *keys: str) -> None:
        version = await self.config.delete([("prompt", k) for k in keys])
        async with asyncio.timeout(TIMEOUT):
            await self.service.wait_for_config(version)

    async def ask(self, id: str, **variables: Any) -> str:
        return await self.client.render_and_complete(id, variables, timeout=TIMEOUT)


@asynccontextmanager
async def prompt_stack(backend: Backend, tmp_path: Path, *, hears_pushes: bool = True,
                       render_limits: RenderLimits | None = None) -> AsyncIterator[Stack]:
    """A :class:`Stack` on queues of its own (config queues included, so tests never see each
    other's config). ``hears_pushes=False``: the prompt service listens for config pushes on
    a queue nothing sends to, so it reads config only when it asks for it. ``render_limits``:
    the prompt service's (default: its own)."""
    topic = backend.topic("prompt")
    config_queues = {**queues(topic, "config"), "push_queue": f"notify:tg:{topic}-config"}
    watched = config_queues if hears_pushes else {
        **config_queues, "push_queue": f"notify:tg:{topic}-unheard"}
    llm_queues, prompt_queues = queues(topic, "llm"), queues(topic, "prompt")
    store = await open_store(str(tmp_path / "config.db"))
    service = PromptService(
        await backend.connect(), **prompt_queues, config_queues=watched,
        text_completion_request_queue=llm_queues["request_queue"],
        text_completion_response_queue=llm_queues["response_queue"],
        render_limits=render_limits)
    llm = FakeTextCompletion(await backend.connect(), queues=llm_queues)
    async with ConfigService(await backend.connect(), store, **config_queues), llm, service, \
            PromptClient(await backend.connect(), **prompt_queues) as client, \
            RequestClient(await backend.connect(), **prompt_queues,
                          error_of=lambda response: None) as raw, \
            ConfigClient(await backend.connect(), timeout=TIMEOUT, **queues(topic, "config")) as config:
        async with asyncio.timeout(TIMEOUT):
            await service.wait_for_config(0)
        yield Stack(service, llm, client, raw, config)
    await store.close()
