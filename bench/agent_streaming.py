"""A long streamed answer: the CPU it costs, and what it does to the dialogs beside it.

1. The reply parser alone, fed a 100 KB and a 1 MB final answer in word chunks (as the scripted
   LLM streams by default, ~6 characters each). Floor: the least any streaming parser does,
   keeping the chunks (a list append per chunk). Linear work shows as a 1 MB / 100 KB ratio
   near 10; the parser before this one (``--before``) re-read the text on every chunk.
2. Through the agent service on the memory bus (config, text-completion with a scripted LLM
   streaming 256-character chunks, prompt, agent): the process's CPU for a dialog that streams
   a 100 KB and a 1 MB answer.
3. The latency of a trivial streaming dialog, alone (the floor) and while a 1 MB answer streams
   in another dialog — with an LLM that writes at a steady rate, as a model does, and with one
   whose whole answer is ready at once (the worst case for the queues in between).

    python bench/agent_streaming.py [--before]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.agent import reference_parser  # noqa: E402
from tests.agent.stack import agent_stack  # noqa: E402
from tests.agent.steady_llm import SteadyLLM  # noqa: E402
from tests.conftest import Backend  # noqa: E402
from toolmesh.agent.streaming import StreamingParser  # noqa: E402
from toolmesh.bus.memory import new_memory_url  # noqa: E402
from toolmesh.llm import Rule, ScriptedLLM  # noqa: E402

#: characters per second the steady LLM writes: about what the whole stack streams at with
#: room to spare, so what a dialog beside it waits for is the agent, not a backlog
STEADY_RATE = 500_000
LINE = "The quick brown fox jumps over the lazy dog, and then it does so again."


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


async def end_to_end(steady: bool) -> dict[str, Any]:
    replies = {n: reply_of_size(n) for n in (100_000, 1_000_000)}
    rules = [*(Rule(rf"Question: write {n}\b", reply) for n, reply in replies.items()),
             Rule(r"Question: say ok", "Thought: easy\nFinal Answer: ok")]
    llm = (SteadyLLM(rules, chars_per_second=STEADY_RATE, chunk_size=256) if steady
           else ScriptedLLM(rules=rules, chunk_size=256))
    backend = Backend("memory", new_memory_url())
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with agent_stack(backend, Path(tmp), llm, joke=False) as s:

            async def dialog(question: str) -> list[dict[str, Any]]:
                return [m async for m in s.client.stream({"question": question, "streaming": True},
                                                         timeout=600)]

            async def trivial() -> float:
                start = time.perf_counter()
                assert (await dialog("say ok"))[-1]["answer"] == "ok"
                return time.perf_counter() - start

            for _ in range(20):
                await trivial()
            figures["floor"] = statistics.median([await trivial() for _ in range(50)])
            for n in replies:
                start = time.process_time()
                messages = await dialog(f"write {n}")
                figures[n] = time.process_time() - start
                assert messages[-1]["answer"] == answer_of_size(n)
            streaming = asyncio.Event()
            done = False

            async def long() -> None:
                nonlocal done
                async for m in s.client.stream({"question": "write 1000000", "streaming": True},
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
    for bus in backend.buses:
        await bus.close()
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", action="store_true",
                        help="also time the parser before this one (100 KB: about a minute)")
    args = parser.parse_args()

    print("the reply parser alone, word chunks:")
    cpu = {}
    for size in (100_000, 1_000_000):
        chunks = words(reply_of_size(size))
        floor = min(floor_cpu(chunks) for _ in range(3))
        cpu[size] = min(parser_cpu(StreamingParser, chunks) for _ in range(3))
        print(f"  {size // 1000:>5} KB ({len(chunks):>7} chunks): {cpu[size]:.3f} s CPU  "
              f"(floor {floor:.3f} s, {cpu[size] / floor:.0f}x floor)")
    print(f"  1 MB / 100 KB: {cpu[1_000_000] / cpu[100_000]:.1f}x (linear: 10x, quadratic: 100x)")
    if args.before:
        for size in (40_000, 100_000):
            chunks = words(reply_of_size(size))
            before = parser_cpu(reference_parser.StreamingParser, chunks)
            print(f"  the parser before, {size // 1000:>3} KB: {before:.2f} s CPU")

    for name, steady in ((f"the LLM writes {STEADY_RATE // 1000} KB/s", True),
                         ("the LLM has the whole answer ready at once", False)):
        f = await end_to_end(steady)
        print(f"through the agent service (memory bus, 256-character chunks; {name}):")
        print(f"  CPU for a streamed 100 KB answer: {f[100_000]:.3f} s, 1 MB: {f[1_000_000]:.3f} s "
              f"({f[1_000_000] / f[100_000]:.1f}x)")
        beside = f["beside"]
        print(f"  a trivial streaming dialog alone (floor): p50 {f['floor'] * 1e3:.2f} ms")
        p50 = statistics.median(beside)
        print(f"  the same beside a streaming 1 MB answer: p50 {p50 * 1e3:.2f} ms "
              f"({p50 / f['floor']:.1f}x floor), max {max(beside) * 1e3:.1f} ms, "
              f"{len(beside)} dialogs while it streamed")


if __name__ == "__main__":
    asyncio.run(main())
