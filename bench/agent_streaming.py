"""A long streamed answer: the CPU it costs, and what it does to the dialogs beside it.

1. The reply parser alone, fed a 100 KB and a 1 MB final answer in word chunks (as the scripted
   LLM streams by default, ~6 characters each). Floor: the least any streaming parser does,
   keeping the chunks (a list append per chunk). Linear work shows as a 1 MB / 100 KB ratio
   near 10 (the parser before this one re-read the text on every chunk: quadratic).
2. Through the agent service on the memory bus (config, text-completion with a scripted LLM
   streaming 256-character chunks, prompt, agent; stream coalescing as ``--coalescing`` says,
   default on): the process's CPU for a dialog that streams a 100 KB and a 1 MB answer.
3. The latency of a trivial streaming dialog, alone (the floor) and while a 1 MB answer streams
   in another dialog — with an LLM that writes at a steady rate, as a model does, and with one
   whose whole answer is ready at once (the worst case for the queues in between).

    python bench/agent_streaming.py [--coalescing on|off] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import Figure, add_arguments, emit  # noqa: E402

from toolmesh import RequestClient, connect  # noqa: E402
from toolmesh.agent.loop import AgentOptions  # noqa: E402
from toolmesh.agent.service import AgentService  # noqa: E402
from toolmesh.agent.streaming import StreamingParser  # noqa: E402
from toolmesh.bus.memory import new_memory_url  # noqa: E402
from toolmesh.config.service import ConfigService  # noqa: E402
from toolmesh.config.store import open_store  # noqa: E402
from toolmesh.llm import Rule, ScriptedLLM, TextCompletionService  # noqa: E402
from toolmesh.llm.coalesce import OFF, Coalescing  # noqa: E402
from toolmesh.prompt import PromptService  # noqa: E402
from toolmesh.schema.agent import is_final  # noqa: E402

BENCH = "agent_streaming"
#: characters per second the steady LLM writes: about what the whole stack streams at with
#: room to spare, so what a dialog beside it waits for is the agent, not a backlog
STEADY_RATE = 500_000
CHUNK = 256
LINE = "The quick brown fox jumps over the lazy dog, and then it does so again."
SIZES = (100_000, 1_000_000)


def answer_of_size(size: int) -> str:
    lines = [f"{i}. {LINE} {LINE}" for i in range(size // (2 * len(LINE) + 8) + 1)]
    return "\n".join(lines)[:size].rstrip()


def reply_of_size(size: int) -> str:
    return "Thought: here it comes\nFinal Answer: " + answer_of_size(size)


def words(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text)


def parser_cpu(make: Callable[[], Any], chunks: list[str]) -> float:
    start = time.process_time()
    parser = make()
    for chunk in chunks:
        parser.feed(chunk)
    parser.finish()
    return time.process_time() - start


def floor_cpu(chunks: list[str]) -> float:
    start = time.process_time()
    kept: list[str] = []
    for chunk in chunks:
        kept.append(chunk)
    "".join(kept)
    return time.process_time() - start


@asynccontextmanager
async def agent_stack(llm: ScriptedLLM, coalescing: Coalescing,
                      tmp: Path) -> AsyncIterator[RequestClient]:
    """Config, text-completion, prompt and agent on a bus of their own; a client of the agent."""
    bus = await connect(new_memory_url())
    store = await open_store(str(tmp / f"config-{id(llm)}.db"))
    async with AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        stack.push_async_callback(store.close)
        for part in (ConfigService(bus, store),
                     TextCompletionService(bus, llm, coalescing=coalescing),
                     PromptService(bus),
                     AgentService(bus, options=AgentOptions(coalescing=coalescing),
                                  announcements=False)):
            await stack.enter_async_context(part)
        yield await stack.enter_async_context(RequestClient(
            bus, request_queue="request:tg:agent:default",
            response_queue="response:tg:agent:default", is_final=is_final))


async def end_to_end(steady: bool, coalescing: Coalescing, quick: bool) -> dict[str, Any]:
    replies = {n: reply_of_size(n) for n in SIZES}
    rules = [*(Rule(rf"Question: write {n}\b", reply) for n, reply in replies.items()),
             Rule(r"Question: say ok", "Thought: easy\nFinal Answer: ok")]
    llm = ScriptedLLM(rules=rules, chunk_size=CHUNK,
                      pace=CHUNK / STEADY_RATE if steady else 0.0)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with agent_stack(llm, coalescing, Path(tmp)) as client:

            async def dialog(question: str) -> list[dict[str, Any]]:
                return [m async for m in client.stream({"question": question, "streaming": True},
                                                       timeout=600)]

            async def trivial() -> float:
                start = time.perf_counter()
                assert (await dialog("say ok"))[-1]["answer"] == "ok"
                return time.perf_counter() - start

            for _ in range(20):
                await trivial()
            figures["floor"] = statistics.median([await trivial() for _ in range(
                20 if quick else 50)])
            for n in replies:
                start = time.process_time()
                messages = await dialog(f"write {n}")
                figures[n] = time.process_time() - start
                assert messages[-1]["answer"] == answer_of_size(n)
                figures[f"messages {n}"] = len(messages)
            streaming = asyncio.Event()
            done = False

            async def long() -> None:
                nonlocal done
                async for m in client.stream({"question": "write 1000000", "streaming": True},
                                             timeout=600):
                    if m["message_type"] == "answer":
                        streaming.set()
                done = True

            task = asyncio.create_task(long())
            await streaming.wait()
            beside = []
            while not done:
                beside.append(await trivial())
            await task
            figures["beside"] = beside
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coalescing", choices=("on", "off"), default="on",
                        help="stream coalescing in text-completion and the agent (default: on)")
    add_arguments(parser)
    args = parser.parse_args()
    coalescing = Coalescing() if args.coalescing == "on" else OFF
    figures: list[Figure] = []

    cpu = {}
    for size in SIZES:
        chunks = words(reply_of_size(size))
        floor = min(floor_cpu(chunks) for _ in range(3))
        cpu[size] = min(parser_cpu(StreamingParser, chunks) for _ in range(3))
        figures.append(Figure(bench=BENCH, path=f"reply parser alone, {size // 1000} KB answer "
                                                f"in {len(chunks)} word chunks",
                              value=cpu[size] * 1e3, unit="ms CPU", floor=floor * 1e3,
                              floor_what="keeping the chunks (a list append each)"))
    figures.append(Figure(bench=BENCH, path="reply parser alone, CPU of 1 MB / CPU of 100 KB",
                          value=cpu[1_000_000] / cpu[100_000], unit="×",
                          target="≈ 10 (linear; quadratic: 100)"))

    for name, steady in ((f"LLM writes {STEADY_RATE // 1000} KB/s", True),
                         ("whole answer ready at once", False)):
        f = await end_to_end(steady, coalescing, args.quick)
        where = f"agent service, memory bus, {CHUNK}-char chunks, {name}, " \
                f"coalescing {args.coalescing}"
        for size in SIZES:
            figures.append(Figure(
                bench=BENCH, path=f"{where}: CPU for a streamed {size // 1000} KB answer",
                value=f[size] * 1e3, unit="ms CPU",
                note=f"{f[f'messages {size}']} client messages"))
        figures.append(Figure(bench=BENCH, path=f"{where}: CPU of 1 MB / CPU of 100 KB",
                              value=f[1_000_000] / f[100_000], unit="×", target="≈ 10 (linear)"))
        beside = f["beside"]
        figures.append(Figure(
            bench=BENCH, path=f"{where}: a trivial streaming dialog beside a streaming 1 MB "
                              "answer, p50",
            value=statistics.median(beside) * 1e3, unit="ms", floor=f["floor"] * 1e3,
            floor_what="the same dialog alone, p50",
            note=f"max {max(beside) * 1e3:.1f} ms, {len(beside)} dialogs while it streamed"))
    emit(figures, args)


if __name__ == "__main__":
    asyncio.run(main())
