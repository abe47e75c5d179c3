"""A coroutine started by hand and awaited through :func:`toolmesh.coroutines.resume` behaves
as if it had been awaited from the start."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from toolmesh.coroutines import resume

where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="task")


async def two_steps(gate: asyncio.Event, seen: list[str]) -> str:
    seen.append(where.get())
    await gate.wait()
    seen.append(where.get())
    return "done"


async def test_resume_returns_what_the_coroutine_returns_and_keeps_its_context() -> None:
    gate, seen = asyncio.Event(), []
    context = contextvars.copy_context()
    context.run(where.set, "its own")
    coroutine = two_steps(gate, seen)
    waits_on = context.run(coroutine.send, None)  # the first step, by hand
    task = asyncio.ensure_future(resume(coroutine, waits_on, context))
    await asyncio.sleep(0)
    assert not task.done()
    gate.set()
    assert await asyncio.wait_for(task, 5) == "done"
    assert seen == ["its own", "its own"]
    assert where.get() == "task"


async def test_without_a_context_it_goes_on_in_the_awaiting_tasks() -> None:
    gate, seen = asyncio.Event(), []
    coroutine = two_steps(gate, seen)
    waits_on = coroutine.send(None)  # in this test's context

    async def awaiting() -> str:
        where.set("the awaiting task's")
        return await resume(coroutine, waits_on)

    task = asyncio.ensure_future(awaiting())
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.wait_for(task, 5) == "done"
    assert seen == ["task", "the awaiting task's"]


async def test_cancelling_the_awaiting_task_cancels_the_coroutine_where_it_waits() -> None:
    seen: list[str] = []
    coroutine = two_steps(asyncio.Event(), seen)
    task = asyncio.ensure_future(resume(coroutine, coroutine.send(None)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # it never took its second step, and is finished rather than left suspended
    assert seen == ["task"]
    assert coroutine.cr_frame is None
