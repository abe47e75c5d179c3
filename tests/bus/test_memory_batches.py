"""What the in-process bus promises a (not inline) handler: the messages that arrive in one
turn of the loop share a task while their handlers finish at once, and each handler still
behaves as if it had a task of its own (:mod:`toolmesh.bus.batch`)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from tests.conftest import Backend
from toolmesh import Bus, Message
from toolmesh.errors import RequestError
from toolmesh.rpc.client import RequestClient
from toolmesh.rpc.service import Reply, Service

mark: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")


async def test_handlers_that_finish_at_once_share_one_task(memory: Backend) -> None:
    queue = f"request:tg:{memory.topic()}"
    bus = await memory.connect()
    tasks: list[asyncio.Task[Any] | None] = []
    done = asyncio.Event()

    async def handler(message: Message) -> None:
        tasks.append(asyncio.current_task())
        if len(tasks) == 100:
            done.set()

    await bus.subscribe(queue, handler, subscription="s", concurrency=100)
    await _send_numbered(bus, queue, 100)
    await asyncio.wait_for(done.wait(), 5)
    assert len(set(map(id, tasks))) == 1
    assert tasks[0] is not asyncio.current_task()


async def test_each_handler_has_its_own_context_and_not_the_senders(memory: Backend) -> None:
    queue = f"request:tg:{memory.topic()}"
    bus = await memory.connect()
    seen: list[str] = []
    done = asyncio.Event()

    async def handler(message: Message) -> None:
        seen.append(mark.get())
        mark.set(f"set by {message.json()['n']}")  # and never reset
        if len(seen) == 3:
            done.set()

    await bus.subscribe(queue, handler, subscription="s")
    mark.set("the sender's")
    await _send_numbered(bus, queue, 3)
    await asyncio.wait_for(done.wait(), 5)
    assert seen == ["unset", "unset", "unset"]
    assert mark.get() == "the sender's"


async def test_a_handler_that_waits_holds_up_no_other(memory: Backend) -> None:
    queue = f"request:tg:{memory.topic()}"
    bus = await memory.connect()
    release = asyncio.Event()
    finished: list[int] = []
    all_done, six_done = asyncio.Event(), asyncio.Event()
    tasks: dict[int, tuple[asyncio.Task[Any] | None, asyncio.Task[Any] | None]] = {}

    async def handler(message: Message) -> None:
        n = message.json()["n"]
        before = asyncio.current_task()
        if n % 3 == 0:
            await release.wait()
        tasks[n] = (before, asyncio.current_task())
        finished.append(n)
        if len(finished) == 6:
            six_done.set()
        if len(finished) == 9:
            all_done.set()

    await bus.subscribe(queue, handler, subscription="s", concurrency=9)
    await _send_numbered(bus, queue, 9)
    # every handler that does not wait finishes while the ones that wait still wait
    await asyncio.wait_for(six_done.wait(), 5)
    assert sorted(finished) == [1, 2, 4, 5, 7, 8]
    release.set()
    await asyncio.wait_for(all_done.wait(), 5)
    # one that waited kept its task across the wait, and shares it with no other that waited
    waiters = [tasks[n] for n in (0, 3, 6)]
    assert all(before is after for before, after in waiters)
    assert len({id(after) for _, after in waiters}) == 3


async def test_close_waits_for_a_handler_that_waits(memory: Backend) -> None:
    queue = f"request:tg:{memory.topic()}"
    bus = await memory.connect()
    release = asyncio.Event()
    finished: list[int] = []

    async def handler(message: Message) -> None:
        await release.wait()
        finished.append(message.json()["n"])

    sub = await bus.subscribe(queue, handler, subscription="s")
    await _send_numbered(bus, queue, 2)
    await asyncio.sleep(0)  # both started and waiting
    closing = asyncio.create_task(sub.close())
    await asyncio.sleep(0.05)
    assert not closing.done()
    release.set()
    await asyncio.wait_for(closing, 5)
    assert sorted(finished) == [0, 1]


async def _send_numbered(bus: Bus, queue: str, count: int) -> None:
    """``{"n": 0}`` … ``{"n": count - 1}`` to ``queue``, all in one turn of the loop."""
    producer = await bus.producer(queue)
    for n in range(count):
        await producer.send({"n": n})


class _Sleepy(Service):
    """Answers at once, except ``{"wait": true}``, which waits until its caller gives up."""

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        if request.get("wait"):
            await asyncio.Event().wait()
        await reply({"n": request["n"]})


async def test_a_deadline_cancels_only_the_request_it_belongs_to(memory: Backend) -> None:
    topic = memory.topic()
    bus = await memory.connect()
    queues = {"request_queue": f"request:tg:{topic}", "response_queue": f"response:tg:{topic}"}
    async with _Sleepy(bus, subscription="s", **queues), RequestClient(bus, **queues) as client:
        # sent in one turn of the loop: one batch, the waiting one in the middle of it
        calls = [asyncio.create_task(client.request({"n": n, "wait": n == 2},
                                                    timeout=0.3 if n == 2 else 5))
                 for n in range(5)]
        results = await asyncio.gather(*calls, return_exceptions=True)
    assert [r for n, r in enumerate(results) if n != 2] == [{"n": n} for n in (0, 1, 3, 4)]
    # the service's expiry or the client's own deadline, whichever came first
    assert isinstance(results[2], RequestError) and results[2].type == "timeout"
