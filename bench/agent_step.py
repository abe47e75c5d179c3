"""Agent overhead per ReAct step on the memory bus, streaming and not, and 1,000 dialogs at once.

The whole stack runs in this process on the embedded bus: config, text-completion with an
instant scripted LLM, prompt, agent, and the joke tool service, configured from the shipped
``examples/joke/*.json``. A dialog is two LLM replies (call tell-joke, then the final answer),
i.e. two ReAct steps. Two such stacks run side by side, one with stream coalescing off (a bus
message per word at every hop: text-completion → prompt → agent → client) and one with the
default (:mod:`toolmesh.llm.coalesce`: what comes within a few milliseconds shares a message).

Figures:

* the floor: a tool-service round trip to the joke service;
* an agent step, not streaming (beside that floor);
* an agent step streaming word-sized chunks, coalescing off and on (beside the non-streaming
  step: the bar is ≤ 3× it);
* first-token time, coalescing off and on: from the request to the first thought or answer
  text reaching the client — with the instant LLM, and with one that writes a word every
  ``--pace`` seconds, as a fast model does (where holding pieces back could show);
* client messages per streamed dialog, off and on (beside the non-streaming dialog's);
* ``--concurrent`` streaming dialogs at once (coalescing off and on): wall time, peak RSS.

Step figures are the best of ``--rounds`` rounds that alternate the modes, so a burst of load on
the shared machine falls on all of them.

    python bench/agent_step.py [--dialogs N] [--concurrent N] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import Figure, add_arguments, emit  # noqa: E402

from toolmesh import RequestClient, ToolServiceClient, connect  # noqa: E402
from toolmesh.agent.loop import AgentOptions  # noqa: E402
from toolmesh.agent.service import AgentService  # noqa: E402
from toolmesh.bus.memory import new_memory_url  # noqa: E402
from toolmesh.config.client import ConfigClient  # noqa: E402
from toolmesh.config.service import ConfigService  # noqa: E402
from toolmesh.config.store import open_store  # noqa: E402
from toolmesh.llm import Rule, ScriptedLLM, TextCompletionService  # noqa: E402
from toolmesh.llm.coalesce import OFF, Coalescing  # noqa: E402
from toolmesh.prompt import PromptService  # noqa: E402
from toolmesh.schema.agent import is_final  # noqa: E402
from toolmesh.tools.services.joke import JokeService  # noqa: E402

BENCH = "agent_step"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "joke"
AGENT_QUEUES = {"request_queue": "request:tg:agent:default",
                "response_queue": "response:tg:agent:default"}
RULES = [
    Rule(r"Observation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}"),
    Rule(r"Question: joke (?P<topic>\w+)",
         'Thought: a joke\nAction: tell-joke\nArgs: {"topic": "{topic}"}'),
    # one step, for first-token times: a thought and an answer of a few sentences
    Rule(r"Question: hello", "Thought: the user greets me, so I will greet them back and say "
                             "what I can do.\nFinal Answer: Hello! I can tell you a joke on any "
                             "topic you like: programming, animals, food, or anything else."),
]
CONCURRENCY = 2048


@dataclass
class Stack:
    llm: ScriptedLLM
    client: RequestClient
    tools: ToolServiceClient


@dataclass
class Dialog:
    seconds: float
    #: from the request to the first thought or answer text at the client
    first_token: float | None
    messages: int


@asynccontextmanager
async def agent_stack(coalescing: Coalescing, tmp: Path) -> AsyncIterator[Stack]:
    """The services an agent needs, on a bus of their own; the joke tools configured."""
    bus = await connect(new_memory_url())
    store = await open_store(str(tmp / f"config-{id(coalescing)}.db"))
    llm = ScriptedLLM(rules=RULES)
    service = json.loads((EXAMPLES / "joke-service.json").read_text())
    tool = json.loads((EXAMPLES / "tell-joke.json").read_text())
    async with AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        stack.push_async_callback(store.close)
        for part in (ConfigService(bus, store),
                     TextCompletionService(bus, llm, concurrency=CONCURRENCY,
                                           coalescing=coalescing),
                     PromptService(bus, concurrency=CONCURRENCY),
                     JokeService(bus, concurrency=CONCURRENCY)):
            await stack.enter_async_context(part)
        agent = await stack.enter_async_context(AgentService(
            bus, concurrency=CONCURRENCY, options=AgentOptions(coalescing=coalescing)))
        config = await stack.enter_async_context(ConfigClient(bus))
        version = await config.put({("tool-service", service["id"]): json.dumps(service),
                                    ("tool", tool["name"]): json.dumps(tool)})
        await agent.wait_for_config(version)
        client = await stack.enter_async_context(RequestClient(bus, **AGENT_QUEUES,
                                                               is_final=is_final))
        tools = await stack.enter_async_context(ToolServiceClient(
            bus, request_queue=service["request-queue"],
            response_queue=service["response-queue"]))
        yield Stack(llm, client, tools)


async def dialog(stack: Stack, question: str, *, streaming: bool) -> Dialog:
    start = time.perf_counter()
    first = None
    count = 0
    async for m in stack.client.stream({"question": question, "streaming": streaming},
                                       timeout=600):
        count += 1
        if first is None and m["message_type"] in ("thought", "answer") and m["content"]:
            first = time.perf_counter() - start
        last = m
    assert last["message_type"] == "answer", last
    return Dialog(time.perf_counter() - start, first, count)


async def steps(stack: Stack, n: int, *, streaming: bool) -> tuple[float, list[Dialog]]:
    """Seconds per step over ``n`` two-step dialogs one after another; the dialogs."""
    start = time.perf_counter()
    done = [await dialog(stack, f"joke {('food', 'animals')[i % 2]}", streaming=streaming)
            for i in range(n)]
    return (time.perf_counter() - start) / n / 2, done


async def round_trip(stack: Stack, n: int) -> float:
    call = {"user": "u", "config": {"style": "pun"}, "arguments": {"topic": "food"}}
    start = time.perf_counter()
    for _ in range(n):
        await stack.tools.call(**call)
    return (time.perf_counter() - start) / n


async def concurrent(stack: Stack, n: int) -> float:
    start = time.perf_counter()
    await asyncio.gather(*[dialog(stack, f"joke {('food', 'animals')[i % 2]}", streaming=True)
                           for i in range(n)])
    return time.perf_counter() - start


async def measure(args: argparse.Namespace) -> list[Figure]:
    rounds = args.rounds
    per_round = max(args.dialogs // rounds, 1)
    with tempfile.TemporaryDirectory() as tmp:
        async with agent_stack(OFF, Path(tmp)) as off, \
                agent_stack(Coalescing(), Path(tmp)) as on:
            for stack in (off, on):  # warm up
                for streaming in (False, True):
                    await steps(stack, 20, streaming=streaming)
                await round_trip(stack, 100)
            best: dict[str, float] = {}
            dialogs: dict[str, list[Dialog]] = {"plain": [], "off": [], "on": []}
            for _ in range(rounds):
                figures = {
                    "floor": await round_trip(on, per_round * 2),
                    "plain": await steps(on, per_round, streaming=False),
                    "off": await steps(off, per_round, streaming=True),
                    "on": await steps(on, per_round, streaming=True),
                }
                for name, value in figures.items():
                    seconds = value if isinstance(value, float) else value[0]
                    best[name] = min(best.get(name, seconds), seconds)
                    if not isinstance(value, float):
                        dialogs[name] += value[1]

            # first-token times with a model that writes at a pace, one-step dialogs
            paced: dict[str, list[float]] = {"off": [], "on": []}
            for stack in (off, on):
                stack.llm.pace = args.pace
            for _ in range(args.paced):
                for name, stack in (("off", off), ("on", on)):
                    d = await dialog(stack, "hello", streaming=True)
                    assert d.first_token is not None
                    paced[name].append(d.first_token)
            paced_messages = {name: (await dialog(stack, "hello", streaming=True)).messages
                              for name, stack in (("off", off), ("on", on))}
            for stack in (off, on):
                stack.llm.pace = 0.0

            crowd: dict[str, tuple[float, float, float]] = {}
            for name, stack in (("off", off), ("on", on)):
                rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                wall = await concurrent(stack, args.concurrent)
                rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                crowd[name] = (wall, rss_before / 1024, rss_after / 1024)

    def first_token(name: str) -> float:
        return statistics.median(d.first_token for d in dialogs[name]
                                 if d.first_token is not None) * 1e3

    def messages(name: str) -> float:
        return statistics.median(d.messages for d in dialogs[name])

    ms = 1e3
    plain_what = "agent step, not streaming, same run"
    words = f"a word every {args.pace * 1e3:g} ms"
    out = [
        Figure(bench=BENCH, path="tool-service round trip (joke, memory bus)",
               value=best["floor"] * ms, unit="ms"),
        Figure(bench=BENCH, path="agent step, not streaming", value=best["plain"] * ms,
               unit="ms", floor=best["floor"] * ms, floor_what="tool-service round trip"),
        Figure(bench=BENCH, path="agent step, streaming word chunks, coalescing off",
               value=best["off"] * ms, unit="ms", floor=best["plain"] * ms, floor_what=plain_what),
        Figure(bench=BENCH, path="agent step, streaming word chunks, coalescing on (default)",
               value=best["on"] * ms, unit="ms", floor=best["plain"] * ms, floor_what=plain_what,
               target="≤ 3× floor"),
        Figure(bench=BENCH, path="first-token time, instant LLM, coalescing off",
               value=first_token("off"), unit="ms", note="median; request to first text"),
        Figure(bench=BENCH, path="first-token time, instant LLM, coalescing on",
               value=first_token("on"), unit="ms", floor=first_token("off"),
               floor_what="coalescing off", target="no added latency (≈ 1× floor)",
               note="median; request to first text"),
        Figure(bench=BENCH, path=f"first-token time, LLM writing {words}, coalescing off",
               value=statistics.median(paced["off"]) * ms, unit="ms",
               note=f"median of {len(paced['off'])}; {paced_messages['off']} messages a dialog"),
        Figure(bench=BENCH, path=f"first-token time, LLM writing {words}, coalescing on",
               value=statistics.median(paced["on"]) * ms, unit="ms",
               floor=statistics.median(paced["off"]) * ms, floor_what="coalescing off",
               target="no added latency (≈ 1× floor)",
               note=f"median of {len(paced['on'])}; {paced_messages['on']} messages a dialog"),
        Figure(bench=BENCH, path="client messages per streamed two-step dialog, coalescing off",
               value=messages("off"), unit="messages", floor=messages("plain"),
               floor_what="the same dialog not streamed"),
        Figure(bench=BENCH, path="client messages per streamed two-step dialog, coalescing on",
               value=messages("on"), unit="messages", floor=messages("plain"),
               floor_what="the same dialog not streamed"),
    ]
    for name in ("off", "on"):
        wall, before, after = crowd[name]
        out.append(Figure(
            bench=BENCH, path=f"{args.concurrent} concurrent streaming dialogs, coalescing {name}",
            value=wall, unit="s", note=f"wall, all answered; peak RSS {after:.0f} MiB "
                                       f"(before: {before:.0f} MiB)"))
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dialogs", type=int, default=None,
                        help="two-step dialogs per mode (default 600; --quick 150)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds the dialogs are split into (default 6; --quick 3)")
    parser.add_argument("--concurrent", type=int, default=1000)
    parser.add_argument("--pace", type=float, default=0.002,
                        help="seconds between the words of the paced LLM (default %(default)s)")
    parser.add_argument("--paced", type=int, default=None,
                        help="paced dialogs per mode (default 40; --quick 15)")
    add_arguments(parser)
    args = parser.parse_args()
    args.dialogs = args.dialogs or (150 if args.quick else 600)
    args.rounds = args.rounds or (3 if args.quick else 6)
    args.paced = args.paced or (15 if args.quick else 40)
    emit(await measure(args), args)


if __name__ == "__main__":
    asyncio.run(main())
