"""Several calls in one reply (native tool calling) run at once, at most ``parallel_calls``,
and their results are told in the order of the calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from toolmesh.agent.loop import AgentLoop, AgentOptions
from toolmesh.agent.tools import Tool, ToolInfo
from toolmesh.agent.tools.base import Call
from toolmesh.agent.toolset import ToolSet
from toolmesh.llm import Completion, CompletionStream
from toolmesh.llm.chat import ChatRequest, ToolCall
from toolmesh.schema.agent import AgentRequest


class Slow(Tool):
    """Takes ``seconds[arguments["n"]]``, and counts how many of its calls run at once."""

    running = 0
    most = 0

    async def invoke(self, arguments: dict[str, Any], call: Call) -> str:
        Slow.running += 1
        Slow.most = max(Slow.most, Slow.running)
        await asyncio.sleep(0.05 * (5 - arguments["n"]))  # the later calls finish first
        Slow.running -= 1
        return f"result {arguments['n']}"


class Native:
    """A prompt client whose model asks for five calls at once, then answers."""

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    async def capabilities(self, **_: Any) -> dict[str, Any]:
        return {"tool_calling": "native", "source": "provider"}

    def chat(self, chat: ChatRequest, **_: Any) -> CompletionStream:
        self.requests.append(chat)
        calls = tuple(ToolCall(id=f"c{n}", name="slow", arguments=json.dumps({"n": n}))
                      for n in range(5))
        reply = Completion(text="done") if len(self.requests) > 1 else Completion(
            text="", tool_calls=calls)

        async def source() -> Any:
            if reply.text:
                yield reply.text
            yield reply
        return CompletionStream(source())


async def test_calls_run_at_once_within_the_bound_and_are_told_in_order() -> None:
    tool = Slow(ToolInfo(key="slow", name="slow", description="slow"))
    prompts = Native()
    loop = AgentLoop(prompts=prompts,  # type: ignore[arg-type]
                     tools=lambda: ToolSet(tools={"slow": tool}),
                     options=AgentOptions(parallel_calls=3))
    out: list[Mapping[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:
        out.append(message)

    await loop.run(AgentRequest(question="go"), emit)
    assert Slow.most == 3  # three at once, never more
    observations = [m["content"] for m in out if m["message_type"] == "observation"]
    assert observations == [f"result {n}" for n in range(5)]  # in the order of the calls
    calls = [m["tool"] for m in out if m["message_type"] == "tool-call"]
    assert calls == ["slow"] * 5 and out[-1]["answer"] == "done"
    # every call is answered, in order, in the next request
    assert [m.tool_call_id for m in prompts.requests[1].messages if m.role == "tool"] == [
        f"c{n}" for n in range(5)]
