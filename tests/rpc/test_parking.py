"""A stop does not drain a request that only waits for a person: it is cancelled at once with
a ``service-stopping`` error, as one that parks during the drain is when it parks; a request
of which another part still works (a tool call in flight) is drained as before — on the
in-process bus."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from toolmesh import RequestClient, RequestError, Service
from toolmesh.bus import connect
from toolmesh.bus.memory import new_memory_url
from toolmesh.rpc import parking
from toolmesh.rpc.service import Reply

QUEUES = {"request_queue": "request:tg:parking", "response_queue": "response:tg:parking"}


class Person(Service):
    """``{"wait": true}``: waits for a person (forever); ``{"work": s, "wait": true}``: a call
    that works ``s`` seconds (and answers) beside one that waits; ``{"later": s}``: works
    ``s`` seconds, then waits for a person."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started = asyncio.Event()

    async def handle(self, request: dict[str, Any], reply: Reply) -> None:
        self.started.set()

        async def wait() -> None:
            with parking.working(), parking.for_a_person():
                await asyncio.Event().wait()

        if "later" in request:
            with parking.working():
                await asyncio.sleep(request["later"])
            await wait()
        elif "work" in request:
            # a call that works beside one that waits: it works until its result is kept
            done = parking.hold()
            waits = asyncio.ensure_future(wait())
            await asyncio.sleep(request["work"])
            await reply({"worked": True, "end_of_stream": False})
            done()
            await waits
        else:
            await wait()


async def _stop(service: Service) -> float:
    started = time.monotonic()
    await service.stop()
    return time.monotonic() - started


async def test_a_request_waiting_only_for_a_person_is_let_go_at_once() -> None:
    bus = await connect(new_memory_url())
    person = Person(bus, subscription="person", drain_timeout=10, **QUEUES)
    await person.start()
    async with RequestClient(bus, **QUEUES) as client:
        waiting = asyncio.ensure_future(client.request({"wait": True}, timeout=30))
        await asyncio.wait_for(person.started.wait(), 5)
        await asyncio.sleep(0.05)
        took = await _stop(person)
        with pytest.raises(RequestError) as e:
            await asyncio.wait_for(waiting, 5)
    await bus.close()
    assert took < 1.0, f"the stop took {took:.2f} s for a request waiting for a person"
    assert e.value.type == "service-stopping" and "waited for a person" in e.value.message


async def test_one_that_parks_during_the_drain_is_let_go_when_it_parks() -> None:
    bus = await connect(new_memory_url())
    person = Person(bus, subscription="person", drain_timeout=10, **QUEUES)
    await person.start()
    async with RequestClient(bus, **QUEUES) as client:
        later = asyncio.ensure_future(client.request({"later": 0.5}, timeout=30))
        await asyncio.wait_for(person.started.wait(), 5)
        took = await _stop(person)
        with pytest.raises(RequestError) as e:
            await asyncio.wait_for(later, 5)
    await bus.close()
    assert 0.4 < took < 2.0, f"the stop took {took:.2f} s (its work: 0.5 s, its drain 10 s)"
    assert e.value.type == "service-stopping"


async def test_one_whose_other_part_works_is_drained() -> None:
    bus = await connect(new_memory_url())
    person = Person(bus, subscription="person", drain_timeout=10, **QUEUES)
    await person.start()
    async with RequestClient(bus, **QUEUES) as client:
        both = client.stream({"work": 0.6, "wait": True}, timeout=30)
        first = asyncio.ensure_future(anext(both))
        await asyncio.wait_for(person.started.wait(), 5)
        took = await _stop(person)
        worked = await asyncio.wait_for(first, 5)
        with pytest.raises(RequestError) as e:
            await asyncio.wait_for(anext(both), 5)
    await bus.close()
    # not let go while the work went on: once it ended, only the wait was left
    assert worked["worked"] is True
    assert 0.5 < took < 2.0, f"the stop took {took:.2f} s (the work: 0.6 s, the drain 10 s)"
    assert e.value.type == "service-stopping"
