"""Which workspace a free render worker serves next: the workers shared fairly.

A render cannot be paused or moved once it runs: a worker given to a template that loops until
the time limit (2 s) is gone for that long, and a new worker takes longer to start than a
benign render may wait (``bench/prompt_fairness.py`` measures both). So fairness is decided
when a worker is handed out, from what each workspace did lately:

* **Slow workspaces share all workers but one.** However many workspaces are slow, together
  they hold at most ``capacity - 1`` workers: the last one is kept for workspaces whose renders
  are known to be quick, which therefore never wait behind a long render, only behind quick
  ones. A workspace is *slow* while its longest recent render took more than :data:`QUICK`: by
  the CPU time the worker spent on it (a busy machine does not stretch that), or for a render
  stopped at the time limit or still running, by the time it has held its worker; that length
  halves every :data:`COST_HALF_LIFE` seconds, so a 2 s render marks its workspace for about
  five minutes. A workspace is slow, too, until a render of it has ended (a compile check does
  not count: it shows how long compiling takes, not rendering), so that a hostile workspace's
  first render cannot take the last worker; a benign one's first render waits only while slow
  workspaces hold all the workers they may, and is then served first (next rule).
* **The workspace that used the workers least lately goes first.** Each waiting workspace has
  its own queue; a free worker goes to the head of the queue of the workspace with the least
  worker time used (halving every :data:`USAGE_HALF_LIFE` seconds; renders running count as
  they run), so slow workspaces take turns and a quick one is served before them.
* **One workspace holds at most ``capacity - 1`` workers at once** (all, when there is one), so
  that one flooding the pool with quick renders leaves a worker to the others.

What is left: a workspace whose renders have been quick for some minutes can take the last
worker for one long render before it is known to be slow again.

Waiting is on futures only; the state is re-read whenever a worker is handed back or added,
or a render asks for one. The clock is injectable, so the rules can be checked step by step.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: seconds a render may take and still count as quick: a shipped agent prompt with fifty tools
#: renders in about a millisecond, so this is far above any benign render, and it is also how
#: long a quick workspace may wait behind another quick one at worst
QUICK = 0.05
#: seconds in which a workspace's longest recent render counts for half as much
COST_HALF_LIFE = 60.0
#: seconds in which a workspace's worker time counts for half as much
USAGE_HALF_LIFE = 10.0
#: workspaces remembered; past that, those idle longest are forgotten (down to half) — which
#: favours none of them: a workspace forgotten counts as slow again
REMEMBERED = 4096


def _decay(value: float, elapsed: float, half_life: float) -> float:
    return value * 0.5 ** (elapsed / half_life) if value else 0.0


class _Tenant:
    """What the pool knows of one workspace: its waiting renders, the workers it holds, and
    its recent use (each decayed value as of ``at``)."""

    __slots__ = ("name", "waiting", "leases", "usage", "cost", "at", "known")

    def __init__(self, name: str, now: float) -> None:
        self.name = name
        self.waiting: deque[_Waiter] = deque()
        self.leases: set[Lease[Any]] = set()
        self.usage = 0.0
        self.cost = 0.0
        self.at = now
        #: a render of it has ended: its cost means something
        self.known = False

    def usage_at(self, now: float) -> float:
        """Worker-seconds used lately, the renders running included."""
        return (_decay(self.usage, now - self.at, USAGE_HALF_LIFE)
                + sum(now - lease.started for lease in self.leases))

    def cost_at(self, now: float) -> float:
        """Seconds of the longest recent render, one still running included."""
        running = max((now - lease.started for lease in self.leases), default=0.0)
        return max(_decay(self.cost, now - self.at, COST_HALF_LIFE), running)

    def slow_at(self, now: float, quick: float) -> bool:
        """Whether its renders share all workers but one with the other slow ones'."""
        return not self.known or self.cost_at(now) > quick

    def add(self, held: float, cost: float, now: float, *, render: bool) -> None:
        """A render (or a compile check) that held its worker ``held`` seconds and cost
        ``cost`` ended at ``now``."""
        self.usage = _decay(self.usage, now - self.at, USAGE_HALF_LIFE) + held
        self.cost = max(_decay(self.cost, now - self.at, COST_HALF_LIFE), cost)
        self.at = now
        self.known = self.known or render


@dataclass(eq=False)
class Lease(Generic[T]):
    """A worker (``item``) handed to workspace ``tenant`` for one render, from ``started``;
    give it back with :meth:`FairShare.release`."""

    tenant: str
    item: T
    started: float
    _owner: _Tenant = field(repr=False)


@dataclass(eq=False)
class _Waiter:
    future: asyncio.Future[Lease[Any]]
    #: arrival order: among workspaces that used the workers equally, the longest waiting first
    seq: int


class FairShare(Generic[T]):
    """Hands ``capacity`` interchangeable workers (``T``) to workspaces by the rules above:
    :meth:`put` a worker when it is ready, :meth:`acquire` one for a render, :meth:`release`
    it after (with the worker, or without it when it was killed)."""

    def __init__(self, *, capacity: int, quick: float = QUICK,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be positive, not {capacity!r}")
        self.capacity = capacity
        self.quick = quick
        #: workers one workspace holds at most, and slow workspaces together
        self.share_cap = max(1, capacity - 1)
        self._clock = clock
        self._idle: list[T] = []
        self._tenants: dict[str, _Tenant] = {}
        #: the workspaces holding a worker, and those waiting for one
        self._holding: set[_Tenant] = set()
        self._queued: set[_Tenant] = set()
        self._seq = itertools.count()
        self._error: BaseException | None = None
        #: futures of :meth:`wait_for` calls, resolved at the next change
        self._watchers: list[asyncio.Future[None]] = []

    def put(self, item: T) -> None:
        """A worker is ready: it goes to whoever is next, or waits for them."""
        if self._error is None:
            self._idle.append(item)
            self._dispatch()
            self._changed()

    async def acquire(self, tenant: str) -> Lease[T]:
        """A worker for one render of ``tenant``, when the rules give it one; raises what
        :meth:`close` was given once the pool closes."""
        if self._error is not None:
            raise self._error
        now = self._clock()
        owner = self._tenants.get(tenant)
        if owner is None:
            owner = self._tenants[tenant] = _Tenant(tenant, now)
        waiter = _Waiter(asyncio.get_running_loop().create_future(), next(self._seq))
        owner.waiting.append(waiter)
        self._queued.add(owner)
        self._dispatch()
        self._changed()
        try:
            lease = await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled() \
                    and waiter.future.exception() is None:
                # handed a worker as the caller gave up: back it goes, unused (which shows
                # nothing of how long the workspace's renders take)
                self.release(waiter.future.result(), returned=waiter.future.result().item,
                             render=False)
            else:
                self._unqueue(owner, waiter)
                self._changed()
            raise
        return lease

    def release(self, lease: Lease[T], *, returned: T | None, cost: float | None = None,
                render: bool = True) -> None:
        """``lease``'s render ended: count its time to its workspace, and take back
        ``returned`` (its worker, healthy) if given — a killed worker's replacement comes by
        :meth:`put` instead. ``cost``: the seconds of CPU the render took, if the worker said;
        else the time it held the worker counts. ``render=False``: not a render (a compile
        check, or no worker was there to render), which counts but does not show the
        workspace's renders to be quick."""
        owner = lease._owner
        if lease not in owner.leases:
            return
        now = self._clock()
        owner.leases.discard(lease)
        held = now - lease.started
        owner.add(held, held if cost is None else cost, now, render=render)
        if not owner.leases:
            self._holding.discard(owner)
        if returned is not None and self._error is None:
            self._idle.append(returned)
        self._dispatch()
        self._forget()
        self._changed()

    def close(self, error: BaseException) -> list[T]:
        """Refuse every render waiting or to come with ``error``; the idle workers, for the
        caller to stop."""
        self._error = error
        for owner in self._queued:
            for waiter in owner.waiting:
                if not waiter.future.done():
                    waiter.future.set_exception(error)
            owner.waiting.clear()
        self._queued.clear()
        idle, self._idle = self._idle, []
        self._changed()
        return idle

    def open(self) -> None:
        """Serve again after :meth:`close` (what was learnt of the workspaces is kept)."""
        self._error = None

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds, checked again whenever a render asks for a
        worker or gives up, a worker is added, handed out or given back, or the pool closes."""
        while not predicate():
            future = asyncio.get_running_loop().create_future()
            self._watchers.append(future)
            try:
                await future
            finally:
                if future in self._watchers:
                    self._watchers.remove(future)

    def held(self, tenant: str) -> int:
        """Workers ``tenant`` holds now."""
        owner = self._tenants.get(tenant)
        return len(owner.leases) if owner else 0

    def waiting(self, tenant: str) -> int:
        """Renders of ``tenant`` waiting for a worker."""
        owner = self._tenants.get(tenant)
        return len(owner.waiting) if owner else 0

    def slow(self, tenant: str) -> bool:
        """Whether ``tenant`` counts as slow now (its renders share all workers but one)."""
        owner = self._tenants.get(tenant)
        return owner is None or owner.slow_at(self._clock(), self.quick)

    @property
    def idle(self) -> int:
        """Workers ready and not handed out."""
        return len(self._idle)

    @property
    def remembered(self) -> int:
        """Workspaces the pool knows something of."""
        return len(self._tenants)

    def _dispatch(self) -> None:
        if not self._idle or not self._queued:
            return
        now = self._clock()
        slow = {owner for owner in self._holding | self._queued
                if owner.slow_at(now, self.quick)}
        slow_held = sum(len(owner.leases) for owner in self._holding if owner in slow)
        while self._idle:
            best: _Tenant | None = None
            best_key = (0.0, 0)
            for owner in self._queued:
                if len(owner.leases) >= self.share_cap:
                    continue
                if owner in slow and slow_held >= self.share_cap:
                    continue
                key = (owner.usage_at(now), owner.waiting[0].seq)
                if best is None or key < best_key:
                    best, best_key = owner, key
            if best is None:
                return
            waiter = best.waiting.popleft()
            if not best.waiting:
                self._queued.discard(best)
            lease: Lease[T] = Lease(best.name, self._idle.pop(), now, best)
            best.leases.add(lease)
            self._holding.add(best)
            if best in slow:
                slow_held += 1
            waiter.future.set_result(lease)

    def _changed(self) -> None:
        watchers, self._watchers = self._watchers, []
        for future in watchers:
            if not future.done():
                future.set_result(None)

    def _unqueue(self, owner: _Tenant, waiter: _Waiter) -> None:
        try:
            owner.waiting.remove(waiter)
        except ValueError:
            return
        if not owner.waiting:
            self._queued.discard(owner)

    def _forget(self) -> None:
        """Past :data:`REMEMBERED` workspaces, forget those idle longest, down to half."""
        if len(self._tenants) <= REMEMBERED:
            return
        idle = sorted((owner for owner in self._tenants.values()
                       if not owner.leases and not owner.waiting), key=lambda owner: owner.at)
        for owner in idle[:len(self._tenants) - REMEMBERED // 2]:
            del self._tenants[owner.name]
