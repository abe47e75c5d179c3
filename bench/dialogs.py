"""What recording a dialog costs: the same two-step joke dialog (call tell-joke, then answer)
through an agent that records nothing and through agents that keep a journal (issue 32: a
recorded dialog costs ≤ 1.2× an unrecorded one on the memory bus).

Each stack runs in this process on a memory bus of its own: config, text-completion with an
instant scripted LLM, prompt, the joke service and the agent. Three agents: no journal (the
floor), a SQLite journal (the embedded default: a file beside the config store), and — when
the PostgreSQL of ``--postgres`` answers — a PostgreSQL journal (what replicas share). The
figures are the medians of ``--rounds`` short rounds that alternate the agents, so a burst of
load on the shared machine falls on all of them alike.

    python bench/dialogs.py [--dialogs N] [--rounds N] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import Figure, add_arguments, emit  # noqa: E402

from toolmesh import RequestClient, connect  # noqa: E402
from toolmesh.agent.service import AgentService  # noqa: E402
from toolmesh.bus.memory import new_memory_url  # noqa: E402
from toolmesh.config.client import ConfigClient  # noqa: E402
from toolmesh.config.service import ConfigService  # noqa: E402
from toolmesh.config.store import open_store  # noqa: E402
from toolmesh.dialogs import DialogJournal, JournalError, open_journal  # noqa: E402
from toolmesh.llm import Rule, ScriptedLLM, TextCompletionService  # noqa: E402
from toolmesh.prompt import PromptService  # noqa: E402
from toolmesh.schema.agent import is_final  # noqa: E402
from toolmesh.tools.services.joke import JokeService  # noqa: E402

BENCH = "dialogs"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "joke"
AGENT_QUEUES = {"request_queue": "request:tg:agent:default",
                "response_queue": "response:tg:agent:default"}
RULES = [
    Rule(r"Observation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}"),
    Rule(r"Question: joke (?P<topic>\w+)",
         'Thought: a joke\nAction: tell-joke\nArgs: {"topic": "{topic}"}'),
]


@asynccontextmanager
async def agent_stack(tmp: Path, journal: DialogJournal | None) -> AsyncIterator[RequestClient]:
    bus = await connect(new_memory_url())
    store = await open_store(str(tmp / f"config-{uuid.uuid4().hex[:6]}.db"))
    service = json.loads((EXAMPLES / "joke-service.json").read_text())
    tool = json.loads((EXAMPLES / "tell-joke.json").read_text())
    async with AsyncExitStack() as stack:
        stack.push_async_callback(bus.close)
        stack.push_async_callback(store.close)
        for part in (ConfigService(bus, store),
                     TextCompletionService(bus, ScriptedLLM(rules=RULES)),
                     PromptService(bus), JokeService(bus)):
            await stack.enter_async_context(part)
        agent = await stack.enter_async_context(AgentService(bus, journal=journal))
        config = await stack.enter_async_context(ConfigClient(bus))
        version = await config.put({("tool-service", service["id"]): json.dumps(service),
                                    ("tool", tool["name"]): json.dumps(tool)})
        await agent.wait_for_config(version)
        yield await stack.enter_async_context(RequestClient(bus, **AGENT_QUEUES,
                                                            is_final=is_final))


async def dialogs(client: RequestClient, n: int, *, streaming: bool) -> float:
    """Seconds per dialog over ``n`` dialogs one after another."""
    start = time.perf_counter()
    for i in range(n):
        last = None
        async for last in client.stream({"question": f"joke {('food', 'animals')[i % 2]}",
                                         "streaming": streaming}, timeout=60):
            pass
        assert last is not None and last["message_type"] == "answer", last
    return (time.perf_counter() - start) / n


async def postgres_journal(url: str) -> tuple[DialogJournal | None, str]:
    schema = f"tm_bench_{uuid.uuid4().hex[:8]}"
    try:
        return await open_journal(f"{url}?schema={schema}"), schema
    except JournalError as e:
        print(f"no PostgreSQL journal: {e.message}", file=sys.stderr)
        return None, schema


async def drop_schema(url: str, schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await conn.close()


async def measure(args: argparse.Namespace) -> list[Figure]:
    per_round = max(args.dialogs // args.rounds, 1)
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = await open_journal(str(Path(tmp) / "dialogs.db"))
        postgres, schema = await postgres_journal(args.postgres)
        try:
            async with AsyncExitStack() as stacks:
                clients = {"none": await stacks.enter_async_context(agent_stack(Path(tmp), None)),
                           "sqlite": await stacks.enter_async_context(
                               agent_stack(Path(tmp), sqlite))}
                if postgres is not None:
                    clients["postgres"] = await stacks.enter_async_context(
                        agent_stack(Path(tmp), postgres))
                times: dict[tuple[str, bool], list[float]] = {}
                for client in clients.values():  # warm up
                    await dialogs(client, 20, streaming=False)
                for _ in range(args.rounds):
                    for streaming in (False, True):
                        for name, client in clients.items():
                            seconds = await dialogs(client, per_round, streaming=streaming)
                            times.setdefault((name, streaming), []).append(seconds)
        finally:
            await sqlite.close()
            if postgres is not None:
                await postgres.close()
                await drop_schema(args.postgres, schema)
    figures = []
    for streaming in (False, True):
        mode = "streaming" if streaming else "not streaming"
        floor = statistics.median(times[("none", streaming)]) * 1e3
        for name, what, target in (("sqlite", "SQLite journal (embedded default)", "≤ 1.2× floor"),
                                   ("postgres", "PostgreSQL journal (shared by replicas)", None)):
            if (name, streaming) not in times:
                continue
            figures.append(Figure(
                bench=BENCH, path=f"recorded two-step dialog, {what}, memory bus, {mode}",
                value=statistics.median(times[(name, streaming)]) * 1e3, unit="ms", floor=floor,
                floor_what="the same dialog, not recorded", target=target,
                note=f"median of {args.rounds} alternating rounds; 2 journal writes a dialog: the"
                     " reply before its call (beginning it), the end"))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogs", type=int, default=1200)
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--postgres", default="postgresql://root@127.0.0.1:5432/test")
    add_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.dialogs, args.rounds = 400, 8
    emit(asyncio.run(measure(args)), args)


if __name__ == "__main__":
    main()
