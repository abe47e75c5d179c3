"""Many calls' deadlines on one timer (:class:`toolmesh.rpc.deadline.Deadlines`): each
expires once, when it passes, in the order they pass; a deadline discarded first never does."""

from __future__ import annotations

import asyncio
from typing import Any

from toolmesh.rpc.deadline import Deadlines


class Expiries:
    """Records which deadlines expired, in order, and lets a test wait for one."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.events: dict[str, asyncio.Event] = {}

    def __call__(self, name: str) -> Any:
        self.events[name] = asyncio.Event()

        def expire() -> None:
            self.order.append(name)
            self.events[name].set()

        return expire

    async def wait(self, name: str) -> None:
        async with asyncio.timeout(10):
            await self.events[name].wait()


async def test_deadlines_expire_once_in_the_order_they_pass() -> None:
    deadlines, expired = Deadlines(), Expiries()
    now = asyncio.get_running_loop().time()
    deadlines.add(now + 0.3, expired("third"))
    deadlines.add(now + 0.1, expired("first"))  # sooner than the armed one: armed anew
    deadlines.add(now + 0.2, expired("second"))
    deadlines.add(now - 1, expired("passed"))  # already past: at the next turn
    await expired.wait("third")
    assert expired.order == ["passed", "first", "second", "third"]


async def test_a_discarded_deadline_never_expires() -> None:
    deadlines, expired = Deadlines(), Expiries()
    now = asyncio.get_running_loop().time()
    ended = deadlines.add(now + 0.05, expired("ended"))
    deadlines.add(now + 0.15, expired("kept"))
    deadlines.discard(ended)  # its call ended in time
    await expired.wait("kept")
    assert expired.order == ["kept"]
    deadlines.discard(ended)  # twice is harmless


async def test_one_failing_expiry_does_not_keep_the_others_from_expiring() -> None:
    deadlines, expired = Deadlines(), Expiries()
    loop = asyncio.get_running_loop()
    reported: list[BaseException] = []
    loop.set_exception_handler(lambda _, context: reported.append(context["exception"]))

    def fail() -> None:
        raise RuntimeError("an expiry's bug")

    now = loop.time()
    deadlines.add(now + 0.05, fail)
    deadlines.add(now + 0.05, expired("other"))
    await expired.wait("other")
    assert [str(e) for e in reported] == ["an expiry's bug"]


async def test_closing_forgets_every_deadline() -> None:
    deadlines, expired = Deadlines(), Expiries()
    now = asyncio.get_running_loop().time()
    deadlines.add(now + 0.05, expired("forgotten"))
    deadlines.close()
    later = Deadlines()
    later.add(now + 0.15, expired("after"))
    await expired.wait("after")
    assert expired.order == ["after"]
