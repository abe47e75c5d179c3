"""Who gets the next render worker (toolmesh.prompt.fair_share), step by step on a fake clock.

The rules: slow workspaces — those with a long recent render, or none ended yet — share all
workers but one, so a quick workspace always finds one; the workspace that used the workers
least lately goes first; one workspace holds at most all workers but one. Each test hands
out named workers and checks who holds what, never how long anything took.
"""

from __future__ import annotations

import asyncio

import pytest

from toolmesh.prompt import PromptError
from toolmesh.prompt import fair_share
from toolmesh.prompt.fair_share import COST_HALF_LIFE, QUICK, FairShare, Lease


class Clock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pool(capacity: int, clock: Clock) -> FairShare[str]:
    share: FairShare[str] = FairShare(capacity=capacity, clock=clock)
    for i in range(capacity):
        share.put(f"w{i}")
    return share


async def render(share: FairShare[str], clock: Clock, tenant: str, *, held: float,
                 cost: float | None = None, check: bool = False) -> None:
    """One render of ``tenant`` that holds its worker ``held`` seconds (``cost``: the CPU the
    worker reported; ``None``: stopped at the time limit, so no report)."""
    lease = await share.acquire(tenant)
    clock.now += held
    share.release(lease, returned=lease.item, cost=cost, render=not check)


async def asking(share: FairShare[str], tenant: str) -> asyncio.Task[Lease[str]]:
    """A task asking for a worker for ``tenant``, run until it has one or waits."""
    task = asyncio.create_task(share.acquire(tenant))
    await asyncio.sleep(0)
    return task


async def test_a_quick_workspace_finds_a_worker_however_many_slow_ones_there_are() -> None:
    clock = Clock()
    share = pool(2, clock)
    await render(share, clock, "benign", held=0.002, cost=0.001)
    hostile = ["h1", "h2", "h3"]
    for name in hostile:
        await render(share, clock, name, held=2.0)  # stopped at the time limit
    assert [share.slow(name) for name in ("benign", *hostile)] == [False, True, True, True]

    asked = [await asking(share, name) for name in hostile for _ in range(2)]
    # the slow ones hold one worker together; the other is kept
    assert sum(share.held(name) for name in hostile) == 1
    assert sum(share.waiting(name) for name in hostile) == 5
    assert share.idle == 1
    for _ in range(3):
        benign = await asking(share, "benign")
        assert benign.done()
        share.release(benign.result(), returned=benign.result().item, cost=0.001)
        assert share.idle == 1 and sum(share.held(name) for name in hostile) == 1

    # the slow ones take turns on their one worker: each one's first render before any second
    order: list[str] = []
    ended: set[Lease[str]] = set()
    while len(order) < len(asked):
        [lease] = [t.result() for t in asked if t.done() and t.result() not in ended]
        order.append(lease.tenant)
        ended.add(lease)
        clock.now += 2.0
        share.release(lease, returned=lease.item)
        await asyncio.sleep(0)
        assert share.idle == (1 if len(ended) < len(asked) else 2)
    assert sorted(order[:3]) == hostile and sorted(order[3:]) == hostile, order


async def test_a_workspace_is_slow_until_a_render_of_it_ends_a_compile_check_does_not_count(
        ) -> None:
    clock = Clock()
    share = pool(2, clock)
    await render(share, clock, "checked", held=0.002, cost=0.001, check=True)
    await render(share, clock, "benign", held=0.002, cost=0.001)
    assert share.slow("new") and share.slow("checked") and not share.slow("benign")
    hostile = await asking(share, "hostile")  # new: slow, but no slow one holds a worker
    assert hostile.done()

    new, checked = await asking(share, "new"), await asking(share, "checked")
    benign = await asking(share, "benign")
    assert not new.done() and not checked.done() and benign.done()
    share.release(benign.result(), returned="w-benign", cost=0.001)
    assert share.idle == 1 and not new.done()

    clock.now += 2.0
    share.release(hostile.result(), returned=None)  # killed at the time limit
    await asyncio.sleep(0)
    assert new.done() and not checked.done()  # the first to ask, both having used nothing
    share.release(new.result(), returned="w-new", cost=0.001)
    await asyncio.sleep(0)
    assert checked.done()
    share.release(checked.result(), returned="w-checked", cost=0.001)
    assert not share.slow("new") and not share.slow("checked") and share.slow("hostile")


async def test_the_workspace_that_used_the_workers_least_goes_first() -> None:
    clock = Clock()
    share = pool(2, clock)
    for name, held in (("light", 1.0), ("heavy", 3.0), ("middle", 2.0), ("holder", 0.5)):
        await render(share, clock, name, held=held)
    holder = await asking(share, "holder")
    assert holder.done()
    asked = {name: await asking(share, name) for name in ("heavy", "middle", "light")}
    order = []
    lease = holder.result()
    while True:
        share.release(lease, returned=lease.item)
        await asyncio.sleep(0)
        done = [name for name, task in asked.items() if task.done() and name not in order]
        if not done:
            break
        [name] = done
        order.append(name)
        lease = asked[name].result()
    assert order == ["light", "middle", "heavy"]


async def test_a_long_render_makes_its_workspace_slow_for_minutes_by_cpu_not_waiting() -> None:
    clock = Clock()
    share = pool(2, clock)
    await render(share, clock, "stretched", held=0.5, cost=0.002)  # a busy machine, not it
    await render(share, clock, "costly", held=0.5, cost=0.5)
    await render(share, clock, "stopped", held=2.0)
    assert not share.slow("stretched") and share.slow("costly") and share.slow("stopped")

    running = await asking(share, "stretched")
    clock.now += QUICK * 2
    assert share.slow("stretched")  # a render running long counts as it runs
    share.release(running.result(), returned=running.result().item, cost=0.001)
    assert not share.slow("stretched")

    clock.now += COST_HALF_LIFE * 5  # 2 s halved five times: 62 ms
    assert share.slow("stopped") and not share.slow("costly")
    clock.now += COST_HALF_LIFE
    assert not share.slow("stopped")


async def test_one_workspace_holds_all_workers_but_one_and_with_one_worker_slow_ones_go_on(
        ) -> None:
    clock = Clock()
    share = pool(3, clock)
    await render(share, clock, "busy", held=0.001, cost=0.001)
    asked = [await asking(share, "busy") for _ in range(3)]
    assert [t.done() for t in asked] == [True, True, False] and share.idle == 1
    assert (await asking(share, "new")).done()

    single = pool(1, clock)
    await render(single, clock, "slow", held=2.0)
    assert (await asking(single, "slow")).done()


async def test_a_render_that_gives_up_leaves_no_trace() -> None:
    clock = Clock()
    share = pool(2, clock)
    held = await asking(share, "hostile")
    waiting = await asking(share, "other")  # new, so slow: waits for the hostile one
    assert not waiting.done()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert share.waiting("other") == 0

    # handed a worker in the same turn as it gave up: the worker comes back
    waiting = await asking(share, "other")
    share.release(held.result(), returned=held.result().item)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert share.held("other") == 0 and share.idle == 2


async def test_closing_refuses_those_waiting_and_those_to_come() -> None:
    clock = Clock()
    share = pool(1, clock)
    held = await asking(share, "a")
    waiting = await asking(share, "b")
    stopping = PromptError("stopping")
    assert share.close(stopping) == []
    with pytest.raises(PromptError, match="stopping"):
        await waiting
    with pytest.raises(PromptError, match="stopping"):
        await share.acquire("c")
    share.release(held.result(), returned=held.result().item)
    assert share.idle == 0  # not taken back by a closed pool
    share.open()
    share.put("w-new")
    assert (await asking(share, "c")).done()


async def test_what_is_remembered_stays_bounded_and_forgetting_favours_no_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fair_share, "REMEMBERED", 8)
    clock = Clock()
    share = pool(2, clock)
    await render(share, clock, "hostile", held=2.0)
    for i in range(40):
        await render(share, clock, f"w{i}", held=0.001, cost=0.001)
        assert share.remembered <= 9
    assert share.slow("hostile") and share.slow("w0") and not share.slow("w39")
