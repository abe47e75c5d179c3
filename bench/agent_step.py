"""Agent overhead per ReAct step on the memory bus, and 1,000 concurrent dialogs.

The whole stack runs in this process on the embedded bus: config, text-completion with an
instant scripted LLM, prompt, agent, and the joke tool service. Each dialog is two LLM
replies (call tell-joke, then the final answer), i.e. two ReAct steps. Printed beside the
floor measured in the same run: a tool-service round trip to the joke service.

    python bench/agent_step.py [--dialogs N] [--concurrent N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.agent.stack import TELL_JOKE, JOKE_SERVICE  # noqa: E402
from toolmesh import RequestClient, ToolServiceClient, connect  # noqa: E402
from toolmesh.agent.service import AgentService  # noqa: E402
from toolmesh.bus.memory import new_memory_url  # noqa: E402
from toolmesh.config.client import ConfigClient  # noqa: E402
from toolmesh.config.service import ConfigService  # noqa: E402
from toolmesh.config.store import open_store  # noqa: E402
from toolmesh.llm import Rule, ScriptedLLM, TextCompletionService  # noqa: E402
from toolmesh.prompt import PromptService  # noqa: E402
from toolmesh.schema.agent import is_final  # noqa: E402
from toolmesh.tools.queues import topic_queues  # noqa: E402
from toolmesh.tools.services.joke import JokeService  # noqa: E402

LLM = ScriptedLLM(rules=[
    Rule(r"Observation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}"),
    Rule(r"Question: joke (?P<topic>\w+)",
         'Thought: a joke\nAction: tell-joke\nArgs: {"topic": "{topic}"}')])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dialogs", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=1000)
    args = parser.parse_args()
    bus = await connect(new_memory_url())
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(str(Path(tmp) / "c.db"))
        request_queue, response_queue = topic_queues("joke")
        agent = AgentService(bus, concurrency=2048)
        async with ConfigService(bus, store), TextCompletionService(bus, LLM, concurrency=2048), \
                PromptService(bus, concurrency=2048), JokeService(bus, topic="joke", concurrency=2048), \
                agent, ConfigClient(bus) as config, \
                RequestClient(bus, request_queue="request:tg:agent:default",
                              response_queue="response:tg:agent:default", is_final=is_final) as client, \
                ToolServiceClient(bus, request_queue=request_queue, response_queue=response_queue) as tools:
            version = await config.put({
                ("tool-service", "joke-service"): json.dumps({**JOKE_SERVICE, "request-queue": request_queue,
                                                              "response-queue": response_queue}),
                ("tool", "tell-joke"): json.dumps(TELL_JOKE)})
            await agent.wait_for_config(version)

            async def dialog(i: int, streaming: bool = False) -> None:
                messages = [m async for m in client.stream(
                    {"question": f"joke {('food', 'animals')[i % 2]}", "streaming": streaming},
                    timeout=600)]
                assert messages[-1]["message_type"] == "answer", messages[-1]

            for i in range(30):
                await dialog(i)
            start = time.perf_counter()
            for i in range(args.dialogs):
                await dialog(i)
            per_step = (time.perf_counter() - start) / args.dialogs / 2
            start = time.perf_counter()
            for i in range(args.dialogs):
                await dialog(i, streaming=True)
            per_step_streaming = (time.perf_counter() - start) / args.dialogs / 2

            call = {"user": "u", "config": {"style": "pun"}, "arguments": {"topic": "food"}}
            for _ in range(100):
                await tools.call(**call)
            start = time.perf_counter()
            for _ in range(args.dialogs * 2):
                await tools.call(**call)
            floor = (time.perf_counter() - start) / (args.dialogs * 2)

            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            start = time.perf_counter()
            await asyncio.gather(*[dialog(i, streaming=True) for i in range(args.concurrent)])
            wall = time.perf_counter() - start
            rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        await store.close()
    await bus.close()
    print(f"floor: tool-service round trip            {floor * 1e3:7.3f} ms")
    print(f"agent step (non-streaming)                 {per_step * 1e3:7.3f} ms  "
          f"({per_step / floor:.1f}x floor)")
    print(f"agent step (streaming, word chunks)        {per_step_streaming * 1e3:7.3f} ms  "
          f"({per_step_streaming / floor:.1f}x floor)")
    print(f"{args.concurrent} concurrent streaming dialogs: {wall:.2f} s wall, all answered; "
          f"peak RSS {rss_after / 1024:.0f} MiB (before: {rss_before / 1024:.0f} MiB)")


if __name__ == "__main__":
    asyncio.run(main())
