"""Several hostile workspaces cannot starve another's renders (issue 42, part 7).

Through the real prompt service and its real render workers, with the default limits (two
workers, 2 s): workspaces whose templates run until the time limit share one worker, however
many they are, and a workspace whose renders are quick is served on the other while every
hostile render is still running or waiting. What is checked is the order of events and who
holds the workers, not how long anything took (bench/prompt_fairness.py measures that).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.prompt.harness import TIMEOUT, prompt_stack
from tests.prompt.test_render_limits import NESTED, put
from toolmesh import RequestError


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
@pytest.mark.parametrize("hostile", [2, 3])
async def test_hostile_workspaces_share_one_worker_and_a_quick_one_is_served_meanwhile(
        memory: Backend, tmp_path: Path, hostile: int) -> None:
    async with prompt_stack(memory, tmp_path) as stack:
        share = stack.service._renderer.share
        names = [f"hostile-{i}" for i in range(hostile)]
        for name in names:
            await put(stack, name, {"template.hostile": {"prompt": NESTED}})
        await put(stack, "benign", {"template.greet": {"prompt": "Hello {{ name }}"}})

        async def benign() -> None:
            assert await stack.client.render_and_complete(
                "greet", {"name": "B"}, workspace="benign", timeout=TIMEOUT) == "Hello B"

        await benign()  # its renders are known to be quick; the workers are up
        attack = [asyncio.create_task(stack.client.render_and_complete(
            "hostile", {}, workspace=name, timeout=TIMEOUT)) for name in names]
        # every hostile render has reached the pool: one holds a worker, the others wait
        async with asyncio.timeout(TIMEOUT):
            await share.wait_for(
                lambda: sum(share.held(n) + share.waiting(n) for n in names) == hostile)
        for _ in range(10):
            await benign()
            assert sum(share.held(name) for name in names) == 1
            assert sum(share.waiting(name) for name in names) == hostile - 1
        # none of the hostile renders has ended: the benign ones never waited for one
        assert not any(task.done() for task in attack)

        outcomes = await asyncio.gather(*attack, return_exceptions=True)
        for outcome in outcomes:
            assert isinstance(outcome, RequestError), outcome
            assert outcome.message.startswith("template 'hostile' took longer than 2 s"), \
                outcome.message
        await benign()


async def test_a_worker_that_failed_unexpectedly_is_replaced_before_the_next_render(
        memory: Backend, tmp_path: Path) -> None:
    """A recursion cut off deep inside Jinja may leave its worker's state half-changed: that
    worker answers, exits, and a fresh one renders what comes next."""
    async with prompt_stack(memory, tmp_path) as stack:
        await put(stack, "a", {"template.recurse": {
            "prompt": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"},
            "template.sum": {"prompt": "{{ 6 * 7 }}"}})
        renderer = stack.service._renderer
        assert await stack.client.render_and_complete(
            "sum", {}, workspace="a", timeout=TIMEOUT) == "42"  # the workers are up
        async with asyncio.timeout(TIMEOUT):  # workers start as renders need them: all up
            await renderer.share.wait_for(lambda: len(renderer._all) == renderer.limits.workers)
        before = {worker.process.pid for worker in renderer._all}
        with pytest.raises(RequestError, match="RecursionError"):
            await stack.client.render_and_complete("recurse", {}, workspace="a",
                                                   timeout=TIMEOUT)
        after = {worker.process.pid for worker in renderer._all}
        assert len(before - after) == 1 and len(after) == len(before)  # one replaced
        for _ in range(4):  # on whichever worker: every one renders
            assert await stack.client.render_and_complete(
                "sum", {}, workspace="a", timeout=TIMEOUT) == "42"
