"""The whole agent stack on one bus with private queues: config, text-completion (a
ScriptedLLM), prompt, agent and the joke service — each a real service on the bus."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import Backend
from toolmesh import RequestClient
from toolmesh.agent.loop import AgentOptions
from toolmesh.agent.service import AgentService
from toolmesh.config.client import ConfigClient
from toolmesh.config.service import ConfigService
from toolmesh.config.store import open_store
from toolmesh.dialogs import DialogJournal
from toolmesh.llm import ScriptedLLM, TextCompletionService
from toolmesh.llm.coalesce import Coalescing
from toolmesh.mcp import McpToolService
from toolmesh.prompt import PromptService
from toolmesh.schema.agent import is_final
from toolmesh.tools.services.joke import JokeService

JOKE_SERVICE = {"id": "joke-service", "config-params": [{"name": "style", "required": False}]}
TELL_JOKE = {"type": "tool-service", "name": "tell-joke", "description": "Tell a joke on a given topic",
             "service": "joke-service", "style": "pun",
             "arguments": [{"name": "topic", "type": "string",
                            "description": "The topic for the joke (e.g., programming, animals, food)"}]}


@dataclass
class Stack:
    backend: Backend
    llm: ScriptedLLM
    config: ConfigClient
    agent: AgentService
    client: RequestClient
    joke_queues: tuple[str, str]
    mcp: McpToolService
    prompt: PromptService
    #: the agent's agent-tools (tool status) queues
    tools_queues: tuple[str, str] = ("", "")
    #: where this stack's tool services announce themselves (queue, probe_queue)
    announcement_queues: dict[str, str] = field(default_factory=dict)
    #: the agent's agent-services (tool service listing) queues
    services_queues: tuple[str, str] = ("", "")
    #: the name its queues are made from (``queues_of`` of another stack takes them over)
    topic: str = ""
    #: the agent's dialogs (journal reading) queues
    dialogs_queues: tuple[str, str] = ("", "")
    approvals_queues: tuple[str, str] = ("", "")
    #: the agent's tool-calls queues (what the MCP endpoint calls tools through)
    tool_calls_queues: tuple[str, str] = ("", "")

    async def put(self, items: Mapping[tuple[str, str], Any], *,
                  workspace: str = "default") -> int:
        """Store config items (dicts are JSON-encoded) in ``workspace`` and wait until the
        agent has them."""
        version = await self.config.put({k: v if isinstance(v, str) else json.dumps(v)
                                         for k, v in items.items()}, workspace=workspace)
        async with asyncio.timeout(10):
            await self.agent.wait_for_config(version, workspace=workspace)
            # these services watch only their own type, so only its changes reach them
            if any(type == "mcp" for type, _ in items):
                await self.mcp.wait_for_config(version, workspace=workspace)
            if any(type == "prompt" for type, _ in items):
                await self.prompt.wait_for_config(version, workspace=workspace)
        return version

    async def delete(self, *keys: tuple[str, str]) -> None:
        version = await self.config.delete(list(keys))
        async with asyncio.timeout(10):
            await self.agent.wait_for_config(version)
            if any(type == "mcp" for type, _ in keys):
                await self.mcp.wait_for_config(version)

    async def load_jokes(self) -> None:
        request_queue, response_queue = self.joke_queues
        await self.put({("tool-service", "joke-service"): {
            **JOKE_SERVICE, "request-queue": request_queue, "response-queue": response_queue},
            ("tool", "tell-joke"): TELL_JOKE})

    async def ask(self, question: str, **request: Any) -> list[dict[str, Any]]:
        """Every message of one dialog."""
        body = {"question": question, **request}
        return [m async for m in self.client.stream(body, timeout=30)]


def answer_of(messages: list[dict[str, Any]]) -> str:
    assert messages[-1]["end_of_dialog"] is True
    assert messages[-1]["message_type"] == "answer", messages[-1]
    return messages[-1]["answer"]


def observations(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["message_type"] == "observation"]


@asynccontextmanager
async def agent_stack(backend: Backend, tmp_path: Path, llm: ScriptedLLM, *,
                      options: AgentOptions = AgentOptions(tool_timeout=5.0),
                      joke: bool = True, announce: bool = False,
                      announcements: bool = True,
                      coalescing: Coalescing | None = None,
                      journal: DialogJournal | None = None,
                      queues_of: str | None = None,
                      take_up: bool = False,
                      abandon_unread: bool = False) -> AsyncIterator[Stack]:
    """The services an agent needs, on ``backend``. ``joke``: run the joke service (its
    config items come with :meth:`Stack.load_jokes`); ``announce``: it announces itself;
    ``announcements``: the agent listens to announcements; ``coalescing``: how the
    text-completion service and the agent gather a stream's pieces (default: theirs);
    ``journal``: where the agent records its dialogs; ``queues_of``: the topic of an earlier
    stack whose queues and config this one takes over (an agent restarted); ``take_up``: the
    agent takes up, as it starts, the dialogs its journal holds as running — all of them (a
    test's client lives on), or with ``abandon_unread`` only those a person takes part in,
    as a restarted ``toolmesh serve`` does (its clients died with it)."""
    if coalescing is not None:
        options = dataclasses.replace(options, coalescing=coalescing)
    t = queues_of or backend.topic("stack")
    q = {name: (f"request:tg:{t}-{name}", f"response:tg:{t}-{name}")
         for name in ("config", "tc", "prompt", "agent", "joke", "mcp", "tools", "services")}
    config_queues = {"request_queue": q["config"][0], "response_queue": q["config"][1],
                     "push_queue": f"notify:tg:{t}-config"}
    # the stack's own: tests share brokers, and every stack must hear only its own services
    announcement_queues = {"queue": f"notify:tg:{t}-descriptors",
                           "probe_queue": f"notify:tg:{t}-descriptor-requests"}
    bus = await backend.connect()
    store = await open_store(str(tmp_path / f"{t}.db"))
    dialogs = {"request_queue": f"request:tg:{t}-dialogs", "response_queue": f"response:tg:{t}-dialogs"}
    approvals = {"request_queue": f"request:tg:{t}-approvals",
                 "response_queue": f"response:tg:{t}-approvals"}
    async with AsyncExitStack() as stack:
        stack.push_async_callback(store.close)
        await stack.enter_async_context(ConfigService(bus, store, **config_queues))
        await stack.enter_async_context(TextCompletionService(
            bus, llm, request_queue=q["tc"][0], response_queue=q["tc"][1],
            coalescing=options.coalescing))
        prompt = await stack.enter_async_context(PromptService(
            bus, request_queue=q["prompt"][0], response_queue=q["prompt"][1],
            text_completion_request_queue=q["tc"][0], text_completion_response_queue=q["tc"][1],
            config_queues=config_queues))
        if joke:
            await stack.enter_async_context(JokeService(
                bus, request_queue=q["joke"][0], response_queue=q["joke"][1], announce=announce,
                announcement_queue=announcement_queues["queue"],
                probe_queue=announcement_queues["probe_queue"]))
        mcp_queues = {"request_queue": q["mcp"][0], "response_queue": q["mcp"][1],
                      "notify_queue": f"notify:tg:{t}-mcp"}
        mcp = McpToolService(bus, config_queues=config_queues, **mcp_queues,
                             approvals_notify_queue=f"notify:tg:{t}-approvals",
                             # servers allowed to sample are answered by the stack's LLM
                             text_completion_queues={"request_queue": q["tc"][0],
                                                     "response_queue": q["tc"][1]})
        await stack.enter_async_context(mcp)
        agent = AgentService(bus, request_queue=q["agent"][0], response_queue=q["agent"][1],
                             mcp_queues=mcp_queues,
                             tools_queues={"request_queue": q["tools"][0],
                                           "response_queue": q["tools"][1]},
                             services_queues={"request_queue": q["services"][0],
                                              "response_queue": q["services"][1]},
                             prompt_queues={"request_queue": q["prompt"][0],
                                            "response_queue": q["prompt"][1]},
                             config_queues=config_queues, options=options,
                             announcement_queues=announcement_queues,
                             announcements=announcements, journal=journal,
                             dialogs_queues=dialogs, take_up_unfinished=take_up,
                             abandon_unread=abandon_unread,
                             approvals_queues=approvals,
                             approvals_notify_queue=f"notify:tg:{t}-approvals",
                             tool_calls_queues={"request_queue": f"request:tg:{t}-tool-calls",
                                                "response_queue": f"response:tg:{t}-tool-calls"})
        await stack.enter_async_context(agent)
        config = await stack.enter_async_context(ConfigClient(bus, timeout=10, request_queue=q["config"][0],
                                                              response_queue=q["config"][1]))
        client = await stack.enter_async_context(RequestClient(
            await backend.connect(), request_queue=q["agent"][0], response_queue=q["agent"][1],
            is_final=is_final, error_of=lambda response: None))
        yield Stack(backend, llm, config, agent, client, q["joke"], mcp, prompt, q["tools"],
                    announcement_queues, q["services"], topic=t,
                    dialogs_queues=(dialogs["request_queue"], dialogs["response_queue"]),
                    approvals_queues=(approvals["request_queue"], approvals["response_queue"]),
                    tool_calls_queues=(f"request:tg:{t}-tool-calls",
                                       f"response:tg:{t}-tool-calls"))
