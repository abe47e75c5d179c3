"""The sending side of announcements: one running instance of a tool service telling the
bus it is alive (:mod:`toolmesh.registry.wire`)."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from typing import Any

from toolmesh.bus.base import Bus, Message, Producer, Subscription
from toolmesh.registry.wire import (
    ANNOUNCEMENT_QUEUE,
    PROBE_QUEUE,
    Announcement,
    Goodbye,
)

log = logging.getLogger("toolmesh.registry")

#: seconds a goodbye may take to send when stopping (a broker that is gone must not hold the
#: exit; the registries then drop the instance after its ttl)
GOODBYE_TIMEOUT = 2.0
#: seconds a probe's answer waits, so that a burst of probes (every agent of a fleet
#: restarting, a process probing in a loop) is answered by one announcement, not one each
PROBE_DELAY = 0.05


def new_instance_id() -> str:
    """An id unique to this process: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def announcement(*, id: str, workspace: str, descriptor: dict[str, Any],
                 tools: dict[str, dict[str, Any]], ttl: float,
                 instance: str | None = None) -> Announcement:
    """The announcement of this process's instance of service ``id``."""
    return Announcement(id=id, instance=instance or new_instance_id(), workspace=workspace,
                        descriptor=descriptor, tools=tools, ttl=ttl,
                        host=socket.gethostname(), pid=os.getpid(), started=time.time())


class Announcer:
    """Sends ``announcement`` at :meth:`start`, again every ``ttl / 3`` seconds and whenever
    someone probes, and a goodbye at :meth:`stop`.

    A send that fails (the broker is down) is logged once and tried again at the next beat:
    the service goes on serving, and the registries see it again once the bus is back.
    """

    def __init__(self, bus: Bus, announcement: Announcement, *,
                 queue: str = ANNOUNCEMENT_QUEUE, probe_queue: str = PROBE_QUEUE) -> None:
        self.bus = bus
        self.announcement = announcement
        self.interval = announcement.ttl / 3
        self._queue = queue
        self._probe_queue = probe_queue
        self._body = announcement.to_wire()
        self._producer: Producer | None = None
        self._probes: Subscription | None = None
        self._beat: asyncio.Task[None] | None = None
        self._answer: asyncio.Task[None] | None = None
        self._failing = False

    async def start(self) -> None:
        if self._beat is not None:
            return
        self._producer = await self.bus.producer(self._queue)
        self._probes = await self.bus.subscribe(self._probe_queue, self._on_probe,
                                                subscription="tool-descriptor-probes",
                                                concurrency=1)
        await self.announce()
        self._beat = asyncio.create_task(self._heartbeat(), name="announcer-heartbeat")
        log.info("announcing tool service %s (instance %s) in workspace %r every %g s",
                 self.announcement.id, self.announcement.instance,
                 self.announcement.workspace, self.interval)

    async def stop(self) -> None:
        """Stop the heartbeat and say goodbye (registries drop the instance at once)."""
        beat, self._beat = self._beat, None
        if beat is None:
            return
        probes, self._probes = self._probes, None
        if probes is not None:
            await probes.close()
        # both ended before the goodbye: an announcement after it would bring the instance
        # back to every registry for a ttl
        tasks = {beat} | ({self._answer} if self._answer is not None else set())
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        goodbye = Goodbye(id=self.announcement.id, instance=self.announcement.instance,
                          workspace=self.announcement.workspace)
        await self._send(goodbye.to_wire(), timeout=GOODBYE_TIMEOUT)

    async def announce(self) -> None:
        """Send the announcement now."""
        await self._send(self._body, timeout=self.interval)

    async def _send(self, body: dict[str, Any], *, timeout: float) -> None:
        assert self._producer is not None
        try:
            async with asyncio.timeout(timeout):
                await self._producer.send(body)
        except Exception as e:  # the bus is down or slow: the next beat tries again
            if not self._failing:
                why = (f"the bus did not take it within {timeout:g} s"
                       if isinstance(e, TimeoutError) else f"{type(e).__name__}: {e}")
                log.warning("could not announce tool service %s (%s); trying again every "
                            "%g s", self.announcement.id, why, self.interval)
            self._failing = True
            return
        if self._failing:
            log.info("announcing tool service %s again", self.announcement.id)
        self._failing = False

    async def _heartbeat(self) -> None:
        while True:
            # a timer, not a poll: nothing is checked, the beat itself is the point
            await asyncio.sleep(self.interval)
            await self.announce()

    async def _on_probe(self, message: Message) -> None:
        if self._answer is None or self._answer.done():
            self._answer = asyncio.create_task(self._answer_probe(), name="announcer-probe")

    async def _answer_probe(self) -> None:
        await asyncio.sleep(PROBE_DELAY)
        if self._beat is not None:
            await self.announce()
