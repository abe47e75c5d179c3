"""The dedupe store of one process (``toolmesh serve``, a tool service run as a single
replica): completed calls in memory, bounded by count, bytes and age, the least recently used
going first (the seam: :mod:`toolmesh.tools.dedupe.store`)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolmesh.tools.dedupe.store import (
    Claim,
    Claimed,
    DedupeError,
    Kept,
    Limits,
    Reused,
)


@dataclass(slots=True)
class _Running:
    fingerprint: str
    token: str
    #: resolved when the run completes or is released (the waiters then look again); made
    #: by the first waiter (most runs have none)
    ended: asyncio.Future[None] | None = None


@dataclass(slots=True)
class _Done:
    fingerprint: str
    responses: tuple[dict[str, Any], ...] | None
    size: int
    #: bytes this entry counts against the store's budget (0 when its result was not kept)
    cost: int
    expires: float


class MemoryDedupe:
    """A :class:`~toolmesh.tools.dedupe.store.DedupeStore` in this process's memory.

    What it keeps dies with the process: a repeat that reaches another replica, or this one
    restarted, runs the call again (a deployment of several replicas shares
    :class:`~toolmesh.tools.dedupe.postgres.PostgresDedupe` instead). Leases do not apply: a
    run that holds a key here ends, one way or another, before the process does.
    """

    def __init__(self, *, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._done: OrderedDict[str, _Done] = OrderedDict()
        self._running: dict[str, _Running] = {}
        self._bytes = 0
        self._tokens = itertools.count(1)
        self._closed = False

    def __repr__(self) -> str:
        return f"MemoryDedupe({len(self._done)} kept, {len(self._running)} running)"

    @property
    def kept_bytes(self) -> int:
        """Bytes of responses kept now."""
        return self._bytes

    def __len__(self) -> int:
        """Completed calls kept now (expired ones not yet dropped among them)."""
        return len(self._done)

    async def open(self) -> None:
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        for running in self._running.values():
            _wake(running)

    async def claim(self, key: str, fingerprint: str, *, lease: float) -> Claim:
        while True:
            if self._closed:
                raise DedupeError("the dedupe store is closed (the service is stopping)")
            running = self._running.get(key)
            if running is not None:
                if running.fingerprint != fingerprint:
                    return Reused()
                if running.ended is None:
                    running.ended = asyncio.get_running_loop().create_future()
                # shielded: a waiter cancelled (its caller's deadline) must not end the
                # future every other waiter shares
                await asyncio.shield(running.ended)
                continue
            done = self._done.get(key)
            if done is not None:
                if done.expires <= time.monotonic():
                    self._drop(key)
                elif done.fingerprint != fingerprint:
                    return Reused()
                else:
                    self._done.move_to_end(key)
                    return Kept(done.responses, done.size)
            token = str(next(self._tokens))
            self._running[key] = _Running(fingerprint, token)
            return Claimed(key, token)

    async def complete(self, claim: Claimed, responses: Sequence[Mapping[str, Any]] | None,
                       *, size: int) -> None:
        running = self._ended(claim)
        if running is None:
            return
        # the responses as they were sent: nothing else holds them now
        kept = tuple(responses) if responses is not None \
            and size <= self.limits.max_result else None  # type: ignore[arg-type]
        cost = size if kept is not None else 0
        if claim.key in self._done:
            self._drop(claim.key)
        self._done[claim.key] = _Done(running.fingerprint, kept, size, cost,
                                      time.monotonic() + self.limits.ttl)
        self._bytes += cost
        self._evict()
        _wake(running)

    async def release(self, claim: Claimed) -> None:
        running = self._ended(claim)
        if running is not None:
            _wake(running)

    def _ended(self, claim: Claimed) -> _Running | None:
        """The run ``claim`` names, taken off the running ones (``None``: not this claim's)."""
        running = self._running.get(claim.key)
        if running is None or running.token != claim.token:
            return None
        del self._running[claim.key]
        return running

    def _drop(self, key: str) -> None:
        done = self._done.pop(key, None)
        if done is not None:
            self._bytes -= done.cost

    def _evict(self) -> None:
        """Drop the least recently used entries while the store holds too many or too much,
        and the expired ones at its old end (one look per insert: the others expire when
        they are looked up, or reach that end)."""
        limits, done = self.limits, self._done
        while len(done) > limits.entries or self._bytes > limits.max_bytes:
            self._drop(next(iter(done)))
        if done:
            key = next(iter(done))
            if done[key].expires <= time.monotonic():
                self._drop(key)


def _wake(running: _Running) -> None:
    """The run is over: its waiters look again."""
    if running.ended is not None and not running.ended.done():
        running.ended.set_result(None)

