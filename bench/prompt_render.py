"""A normal prompt render through the render workers, beside the same render in-process.

Since issue 34 the prompt service renders templates in worker processes with a time limit
(:class:`toolmesh.prompt.renderer.RenderPool`), never on its event loop. The floor is the old
path: :meth:`PromptTemplate.render` in this process (the sandbox and its size checks
included). Two templates: the shipped ``agent-react`` with ten tools and a three-step history
(what an agent step renders), and the one-line ``question``. Figures are medians of
sequential renders, best of three rounds; the pipe round trip is a fixed cost of some tens of
microseconds a render, beside an LLM call of hundreds of milliseconds.

    python bench/prompt_render.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import Figure, add_arguments, emit  # noqa: E402

from toolmesh.prompt import DEFAULT_TEMPLATES, PromptTemplate  # noqa: E402
from toolmesh.prompt.renderer import RenderPool  # noqa: E402

BENCH = "prompt_render"


def agent_variables() -> dict[str, Any]:
    tools = [{"name": f"tool-{i}", "description": f"Tool number {i}, which does a thing",
              "arguments": [{"name": "topic", "type": "string", "required": True,
                             "description": "what it is about"},
                            {"name": "count", "type": "integer", "required": False,
                             "description": "how many"}]} for i in range(10)]
    history = [{"thought": f"step {i}", "action": "tool-1", "arguments": {"topic": "x"},
                "observation": "a result " * 20} for i in range(3)]
    return {"question": "What is going on?", "tools": tools, "history": history,
            "context": ""}


async def median_us(render: Any, n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await render()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


async def measure(args: argparse.Namespace) -> list[Figure]:
    n = 300 if args.quick else 2000
    cases: list[tuple[str, PromptTemplate, dict[str, Any]]] = [
        ("agent-react, 10 tools, 3 steps", DEFAULT_TEMPLATES["agent-react"], agent_variables()),
        ("question", DEFAULT_TEMPLATES["question"], {"question": "Why?"}),
    ]
    figures = []
    async with RenderPool() as pool:
        for name, template, variables in cases:
            await pool.render(template, variables, tenant="bench")  # compiled in a worker

            async def in_process(t: PromptTemplate = template,
                                 v: dict[str, Any] = variables) -> None:
                t.render(v)

            async def worker(t: PromptTemplate = template, v: dict[str, Any] = variables) -> None:
                await pool.render(t, v, tenant="bench")

            floor = value = float("inf")
            for _ in range(3):
                floor = min(floor, await median_us(in_process, n))
                value = min(value, await median_us(worker, n))
            figures.append(Figure(
                bench=BENCH, path=f"prompt render through a worker process: {name}",
                value=value, unit="µs", floor=floor,
                floor_what="the same render in-process (the old path)",
                note=f"median of {n}, best of 3"))
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args = parser.parse_args()
    emit(await measure(args), args)


if __name__ == "__main__":
    asyncio.run(main())
