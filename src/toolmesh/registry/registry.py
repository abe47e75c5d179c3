"""The receiving side of announcements: which instances of which tool services are alive.

A :class:`Registry` listens on the broadcast announcement queue and keeps, per workspace and
service id, the live instances and what they offer. It is soft state: every process that
needs it (each agent) keeps its own, learns everything within one heartbeat of starting (at
once from services that answer its probe), and loses nothing it could not learn again — no
store to write, no process every agent depends on. An instance is dropped on its goodbye, or
``ttl`` seconds after it was last heard (a timer per instance, reset by each heartbeat).

A process that starts beside its tool services (everything started at once) would otherwise
answer its first requests before the answers to its probe arrive, without the announced tools:
:meth:`Registry.settled` waits, once, until ``settle`` seconds after the probe was sent and the
changes heard by then are applied. Only requests that come within that short window wait (for
the rest of it); after it, and in a process started earlier, it returns at once.

``on_change(workspace)`` is called (one call at a time, bursts coalesced) whenever what a
workspace is offered changes: a service's first instance comes or its last goes, or the
definition its instances announce changes. Heartbeats that change nothing call nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from toolmesh.bus.base import Bus, Message, Subscription
from toolmesh.bus.queue_id import parse_queue_id
from toolmesh.errors import MalformedMessage, QueueIdError
from toolmesh.registry.wire import (
    ANNOUNCEMENT_QUEUE,
    PROBE_QUEUE,
    Announcement,
    AnnouncementError,
    Goodbye,
    parse,
)
from toolmesh.telemetry import metrics

log = logging.getLogger("toolmesh.registry")

#: services (workspace, id) a registry keeps, live or gone; beyond it the longest gone is
#: forgotten first, and a new service is refused while all are live
MAX_SERVICES = 1024
#: live instances one service may have
MAX_INSTANCES = 256
#: the largest announcement accepted, in bytes
MAX_ANNOUNCEMENT_BYTES = 1 << 20
#: seconds after its start-up probe that a registry's first requests wait for the answers
#: (a tool service on the same machine answers in milliseconds; a broker adds tens)
SETTLE_SECONDS = 0.5
#: distinct problems logged before the memory of what was logged starts over
_MAX_COMPLAINTS = 1024

OnChange = Callable[[str], Awaitable[None]]


@dataclass(kw_only=True)
class Instance:
    """One live instance: its latest announcement and when it was heard."""

    announcement: Announcement
    first_seen: float
    last_seen: float
    expiry: asyncio.TimerHandle | None = None

    @property
    def started(self) -> float:
        return self.announcement.started or self.first_seen


@dataclass(kw_only=True)
class ServiceRecord:
    """A service that has announced in a workspace: its live instances (none when it is
    gone), and what they offer."""

    workspace: str
    id: str
    instances: dict[str, Instance] = field(default_factory=dict)
    #: when any instance was last heard (seconds since the epoch)
    last_seen: float = 0.0
    #: the announcement whose definition is offered: the newest-started live instance's
    #: (a rolling upgrade offers the new code's tools as soon as one new instance is up)
    offered: Announcement | None = None
    #: the request queue it was last announced on (still known once it is gone: its
    #: configured tools then fail at once, :meth:`Registry.live_instances`)
    request_queue: str | None = None

    def chosen(self) -> Announcement | None:
        if not self.instances:
            return None
        newest = max(self.instances.values(),
                     key=lambda i: (i.started, i.announcement.instance))
        return newest.announcement


def queue_key(queue: Any) -> str:
    """One spelling of a queue id (announcements and config items may use either)."""
    try:
        return str(parse_queue_id(queue))
    except QueueIdError:
        return str(queue)


class Registry:
    """The live tool-service instances the bus announces (see the module docstring)."""

    def __init__(self, bus: Bus, *, on_change: OnChange | None = None,
                 queue: str = ANNOUNCEMENT_QUEUE, probe_queue: str = PROBE_QUEUE,
                 max_services: int = MAX_SERVICES, max_instances: int = MAX_INSTANCES,
                 quiet: bool = False, settle: float = SETTLE_SECONDS) -> None:
        self.bus = bus
        self.settle = settle
        #: the start-up probe's answers are in and applied (:meth:`settled`)
        self._settled = asyncio.Event()
        self._settling: asyncio.Task[None] | None = None
        #: the notifier is applying changes (a waiter for them must not go before it ends)
        self._applying = False
        # instances coming and going are logged by one registry per process (the agent's);
        # another beside it (the gateway's) logs them at debug level only
        self._events = logging.DEBUG if quiet else logging.INFO
        self._warnings = logging.DEBUG if quiet else logging.WARNING
        self.max_services = max_services
        self.max_instances = max_instances
        self._on_change = on_change
        self._queue = queue
        self._probe_queue = probe_queue
        self._records: dict[tuple[str, str], ServiceRecord] = {}
        #: (service id, request queue) -> its live instances (recounted on every change)
        self._live: dict[tuple[str, str], int] = {}
        self._subscription: Subscription | None = None
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._notifier: asyncio.Task[None] | None = None
        self._complained: set[str] = set()
        #: digest of an announcement's bytes -> the announcement they were found to be
        self._known: dict[bytes, Announcement] = {}
        #: counts every change to what is offered (for waiting on one in tests and tools)
        self.changes = 0
        self._changed = asyncio.Condition()
        #: stops the metrics from counting this registry's instances
        self._uncount: Callable[[], None] | None = None

    async def start(self) -> None:
        """Listen for announcements, then ask every instance to announce itself now."""
        if self._subscription is not None:
            return
        self._uncount = metrics.tool_service_instances.add(self.instances)
        self._notifier = asyncio.create_task(self._notify(), name="registry-notifier")
        self._subscription = await self.bus.subscribe(
            self._queue, self._on_message, subscription="tool-descriptors", concurrency=1)
        try:
            probe = await self.bus.producer(self._probe_queue)
            await probe.send({"probe": True})
        except Exception as e:  # the heartbeats come anyway
            log.warning("could not ask tool services to announce themselves: %s", e)
        self._settling = asyncio.create_task(self._settle_after_probe(),
                                             name="registry-settling")

    async def _settle_after_probe(self) -> None:
        # one timer, not a poll: then wait for the notifier to apply what came meanwhile
        await asyncio.sleep(self.settle)
        async with self._changed:
            await self._changed.wait_for(lambda: not self._applying and not self._wake.is_set())
        self._settled.set()

    async def settled(self) -> None:
        """Return once the answers to the start-up probe are in and applied (module
        docstring): at once after the first ``settle`` seconds, or if never started."""
        if self._settled.is_set() or self._settling is None:
            return
        await self._settled.wait()

    async def stop(self) -> None:
        uncount, self._uncount = self._uncount, None
        if uncount is not None:
            uncount()
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            await subscription.close()
        settling, self._settling = self._settling, None
        if settling is not None:
            settling.cancel()
        self._settled.set()  # nobody waits on a stopped registry
        notifier, self._notifier = self._notifier, None
        if notifier is not None:
            # awaited: a rebuild it is running must not outlive the owner's clients
            notifier.cancel()
            await asyncio.wait({notifier})
        for record in self._records.values():
            for instance in record.instances.values():
                if instance.expiry is not None:
                    instance.expiry.cancel()

    # --- reading -----------------------------------------------------------------------------

    def offered(self, workspace: str) -> dict[str, Announcement]:
        """The services with a live instance in ``workspace``: id -> the announcement whose
        descriptor and tools are offered."""
        return {record.id: record.offered for (ws, _), record in sorted(self._records.items())
                if ws == workspace and record.offered is not None}

    def services(self, workspace: str) -> list[ServiceRecord]:
        """Every service that announced in ``workspace`` (live or gone), by id."""
        return [record for (ws, _), record in sorted(self._records.items()) if ws == workspace]

    def instances(self) -> Iterator[tuple[str, str]]:
        """``(service id, instance id)`` of every live instance, in every workspace."""
        for (_, service_id), record in list(self._records.items()):
            for instance_id in list(record.instances):
                yield service_id, instance_id

    def live_instances(self, service_id: str, request_queue: str) -> int | None:
        """How many live instances of ``service_id`` announce ``request_queue`` (in any
        workspace: one process serves them all); ``None`` when the service never announced
        that queue — then nothing is known (it may run without announcing).

        Keyed by both: a configured tool fails fast only for the service it names, on the
        queue it calls, so a process announcing some other id cannot silence it.
        """
        return self._live.get((service_id, queue_key(request_queue)))

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds, checked after every change to the instances."""
        async with self._changed:
            await self._changed.wait_for(predicate)

    # --- receiving ---------------------------------------------------------------------------

    async def _on_message(self, message: Message) -> None:
        # A heartbeat repeats its instance's last announcement byte for byte: known bytes
        # skip the decoding and the checks (a third of a millisecond, per beat, per agent)
        digest = hashlib.blake2b(message.body, digest_size=16).digest()
        known = self._known.get(digest)
        if known is not None:
            self._announce(known)
            return
        try:
            if len(message.body) > MAX_ANNOUNCEMENT_BYTES:
                raise AnnouncementError(f"an announcement of {len(message.body)} bytes is "
                                        f"over the {MAX_ANNOUNCEMENT_BYTES} allowed")
            value = message.json()
        except (MalformedMessage, AnnouncementError) as e:
            self._complain(None, e.message)
            return
        parsed = self.receive(value)
        if isinstance(parsed, Announcement):
            if len(self._known) >= 4 * self.max_services:
                self._known.clear()
            self._known[digest] = parsed

    def receive(self, value: Any) -> Announcement | Goodbye | None:
        """Apply one decoded announcement or goodbye, and return it (a malformed one is
        logged once, changes nothing and returns ``None``)."""
        try:
            parsed = parse(value)
        except AnnouncementError as e:
            sender = value.get("instance") if isinstance(value, dict) else None
            self._complain(sender if isinstance(sender, str) else None, e.message)
            return None
        if isinstance(parsed, Goodbye):
            self._goodbye(parsed)
        else:
            self._announce(parsed)
        return parsed

    def _announce(self, a: Announcement) -> None:
        key = (a.workspace, a.id)
        record = self._records.get(key)
        if record is None:
            if not self._make_room():
                self._complain(a.instance, f"tool service {a.id!r} not registered: "
                                           f"{self.max_services} services are live already")
                return
            record = self._records[key] = ServiceRecord(workspace=a.workspace, id=a.id)
        now = time.time()
        instance = record.instances.get(a.instance)
        if instance is None:
            if len(record.instances) >= self.max_instances:
                self._complain(a.instance, f"instance {a.instance!r} of {a.id!r} not "
                                           f"registered: it has {self.max_instances} already")
                return
            instance = record.instances[a.instance] = Instance(announcement=a, first_seen=now,
                                                               last_seen=now)
            log.log(self._events, "tool service %s: instance %s (%s pid %s) is up in "
                    "workspace %r", a.id, a.instance, a.host or "?",
                    a.pid if a.pid is not None else "?", a.workspace)
        instance.announcement = a
        instance.last_seen = record.last_seen = now
        if instance.expiry is not None:
            instance.expiry.cancel()
        instance.expiry = asyncio.get_running_loop().call_later(
            a.ttl, self._expire, key, a.instance)
        self._settle(record)

    def _goodbye(self, goodbye: Goodbye) -> None:
        for (workspace, id), record in list(self._records.items()):
            if id != goodbye.id or (goodbye.workspace not in (None, workspace)):
                continue
            instance = record.instances.pop(goodbye.instance, None)
            if instance is None:
                continue
            if instance.expiry is not None:
                instance.expiry.cancel()
            log.log(self._events, "tool service %s: instance %s stopped (%d left)", id,
                    goodbye.instance, len(record.instances))
            self._settle(record)

    def _expire(self, key: tuple[str, str], instance_id: str) -> None:
        record = self._records.get(key)
        if record is None or record.instances.pop(instance_id, None) is None:
            return
        log.log(self._warnings, "tool service %s: instance %s not heard from in its ttl; "
                "counted as gone (%d left)", key[1], instance_id, len(record.instances))
        self._settle(record)

    def _settle(self, record: ServiceRecord) -> None:
        """After a change to ``record``'s instances: recount, and tell the owner if what the
        workspace is offered changed."""
        chosen = record.chosen()
        if chosen is not None:
            record.request_queue = queue_key(chosen.descriptor.get("request-queue"))
        self._recount()
        before = record.offered.definition() if record.offered is not None else None
        after = chosen.definition() if chosen is not None else None
        record.offered = chosen
        if before != after:
            self.changes += 1
            self._dirty.add(record.workspace)
        self._wake.set()  # waiters hear of every change, the owner only of those to the offer

    def _recount(self) -> None:
        counts: dict[tuple[str, str], int] = {}
        for record in self._records.values():
            if record.request_queue is not None:  # announced once: known, live or not
                counts.setdefault((record.id, record.request_queue), 0)
            for instance in record.instances.values():
                key = (record.id, queue_key(instance.announcement.descriptor.get("request-queue")))
                counts[key] = counts.get(key, 0) + 1
        self._live = counts

    def _make_room(self) -> bool:
        if len(self._records) < self.max_services:
            return True
        gone = [r for r in self._records.values() if not r.instances]
        if not gone:
            return False
        oldest = min(gone, key=lambda r: r.last_seen)
        del self._records[(oldest.workspace, oldest.id)]
        return True

    def _complain(self, sender: str | None, problem: str) -> None:
        # logged once per sender and problem: a broken service heartbeats every few seconds
        seen = f"{sender}\x00{problem}"
        if seen in self._complained:
            return
        if len(self._complained) >= _MAX_COMPLAINTS:
            self._complained.clear()
        self._complained.add(seen)
        log.log(self._warnings, "ignored an announcement%s: %s",
                    f" from instance {sender!r}" if sender else "", problem)

    async def _notify(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            self._applying = True
            dirty, self._dirty = self._dirty, set()
            for workspace in sorted(dirty):
                if self._on_change is None:
                    continue
                try:
                    await self._on_change(workspace)
                except Exception:
                    log.exception("applying the announced tool services of workspace %r "
                                  "failed", workspace)
            async with self._changed:
                self._applying = self._wake.is_set()
                self._changed.notify_all()
