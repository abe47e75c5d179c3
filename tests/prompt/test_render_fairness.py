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
