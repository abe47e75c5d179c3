"""A benign workspace's template renders while 0, 1, 2 and 3 hostile workspaces attack.

Issue 42, part 7: with the default two render workers, two workspaces whose templates run until
the render time limit (2 s) made a third workspace's renders wait up to that long (p99 1.7 s).
Here each hostile workspace keeps two renders of a template that cannot finish in flight all
the time (each is stopped at the time limit, its worker killed and replaced), and the benign
workspace sends a one-line template every 20 ms whether or not the last one has come back
(open loop: a stall delays every render sent during it, as it would a real client's; one not
back after 5 s is given up and counted as 5 s). All
through a :class:`~toolmesh.prompt.renderer.RenderPool` with the default limits.

Per number of hostile workspaces: the benign renders' p50 and p99 once the attack is under way
(sent from the time limit + 1 s after it began: every hostile workspace has had a render
stopped by then), and the p99 and the worst over the whole attack, its first seconds included.
The floor is the benign render with no attack, in the same run. Also printed: the first render
of a workspace new to the pool at the end of each attack (one sample), and how long a new
render worker takes to start (what spawning one on demand, or killing a busy one, would make
a waiting render wait).

    python bench/prompt_fairness.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import Figure, add_arguments, emit  # noqa: E402

from toolmesh.prompt import PromptError, PromptTemplate, RenderLimits  # noqa: E402
from toolmesh.prompt.renderer import RenderPool  # noqa: E402

BENCH = "prompt_fairness"
#: loops no worker finishes within the time limit (each range is within --prompt-max-range)
HOSTILE = PromptTemplate(id="hostile", prompt=(
    "{% for a in range(10000) %}{% for b in range(10000) %}{% for c in range(10000) %}"
    "{% endfor %}{% endfor %}{% endfor %}"))
BENIGN = PromptTemplate(id="greet", prompt="Hello {{ name }}")
#: seconds between the benign workspace's renders
PERIOD = 0.02
#: renders each hostile workspace keeps in flight
HOSTILE_IN_FLIGHT = 2
#: seconds after which a benign render is given up (and counted as taking that long): an open
#: loop against a pool that serves it a render per time limit would otherwise run for minutes
GIVE_UP = 5.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def attack(pool: RenderPool, workspace: str) -> None:
    """Render the hostile template in ``workspace`` again and again (until cancelled)."""
    while True:
        try:
            await pool.render(HOSTILE, {}, tenant=workspace)
        except PromptError:
            pass  # stopped at the time limit, as every one of them is


async def benign(pool: RenderPool, duration: float) -> list[tuple[float, float]]:
    """``(sent, latency)`` of the benign workspace's renders, one sent every :data:`PERIOD`
    for ``duration`` seconds; ``sent`` is seconds from the start."""
    results: list[tuple[float, float]] = []

    async def one(sent: float, start: float) -> None:
        try:
            async with asyncio.timeout(GIVE_UP):
                text = await pool.render(BENIGN, {"name": "B"}, tenant="benign")
            assert text == ("", "Hello B"), text
        except TimeoutError:
            pass
        results.append((sent - start, time.perf_counter() - sent))

    tasks = []
    start = time.perf_counter()
    next_at = start
    while next_at < start + duration:
        tasks.append(asyncio.create_task(one(next_at, start)))
        next_at += PERIOD
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
    await asyncio.gather(*tasks)
    return results


async def under_attack(hostile: int, duration: float
                       ) -> tuple[list[tuple[float, float]], float]:
    """The benign workspace's ``(sent, latency)`` under attack by ``hostile`` workspaces, and
    the latency of the first render of a workspace new to the pool at the end of it."""
    async with RenderPool() as pool:
        await pool.render(BENIGN, {"name": "B"}, tenant="benign")  # the workers are up
        attackers = [asyncio.create_task(attack(pool, f"hostile-{i}"))
                     for i in range(hostile) for _ in range(HOSTILE_IN_FLIGHT)]
        try:
            results = await benign(pool, duration)
            start = time.perf_counter()
            await pool.render(BENIGN, {"name": "N"}, tenant="newcomer")
            return results, time.perf_counter() - start
        finally:
            for task in attackers:
                task.cancel()
            await asyncio.gather(*attackers, return_exceptions=True)


async def worker_start() -> float:
    """Seconds from a new pool's first render to its answer, less a warm render's: a worker's
    start, on this machine as loaded as it is."""
    async with RenderPool(limits=RenderLimits(workers=1)) as pool:
        start = time.perf_counter()
        await pool.render(BENIGN, {"name": "B"}, tenant="benign")
        cold = time.perf_counter() - start
        start = time.perf_counter()
        await pool.render(BENIGN, {"name": "B"}, tenant="benign")
        return cold - (time.perf_counter() - start)


async def measure(args: argparse.Namespace) -> list[Figure]:
    duration = 8.0 if args.quick else 20.0
    settle = RenderLimits().timeout + 1.0
    figures: list[Figure] = []
    floor: float | None = None
    for hostile in (0, 1, 2, 3):
        results, first = await under_attack(hostile, duration)
        steady = [latency * 1000 for sent, latency in results if sent >= settle]
        every = [latency * 1000 for _, latency in results]
        p50, p99 = statistics.median(steady), percentile(steady, 0.99)
        if floor is None:
            floor = p50
        what = f"benign workspace's render, {hostile} hostile workspace{'s' * (hostile != 1)}"
        note = (f"{len(steady)} renders sent every {PERIOD * 1000:g} ms from {settle:g} s into "
                f"the attack; {HOSTILE_IN_FLIGHT} hostile renders in flight per workspace")
        figures += [
            Figure(bench=BENCH, path=f"{what}: p50", value=p50, unit="ms", floor=floor,
                   floor_what="p50 with no hostile workspace", note=note),
            Figure(bench=BENCH, path=f"{what}: p99", value=p99, unit="ms", floor=floor,
                   floor_what="p50 with no hostile workspace", target="< 100 ms", note=note),
            Figure(bench=BENCH, path=f"{what}, whole attack: p99", value=percentile(every, 0.99),
                   unit="ms", note=f"{len(every)} renders over {duration:g} s, the attack's "
                   f"first seconds included; worst {max(every):,.0f} ms; "
                   f"{sum(v >= GIVE_UP * 1000 for v in every)} given up"),
            Figure(bench=BENCH, path=f"a new workspace's first render, {hostile} hostile "
                   f"workspace{'s' * (hostile != 1)}", value=first * 1000, unit="ms",
                   note="one render, at the end of the attack: a workspace none of whose "
                        "renders has ended yet counts as slow"),
        ]
    figures.append(Figure(bench=BENCH, path="a new render worker's start", unit="ms",
                          value=await worker_start() * 1000,
                          note="what a render waits for when a worker is spawned or replaced "
                               "for it"))
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args = parser.parse_args()
    emit(await measure(args), args)


if __name__ == "__main__":
    asyncio.run(main())
