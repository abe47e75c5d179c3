"""Failed-auth throttling per client address, across REST and the WebSocket together.

A guesser is slowed wherever it guesses: each client address (an IPv6 one by its /64, which one
machine usually holds whole) has a token bucket of ``burst`` wrong tokens that refills at
``rate`` a second. Only a token found wrong is charged: a right one costs nothing, and neither
does a check still in progress, so clients that open many connections at once (a connection
pool, a reverse proxy that is one address for everyone, clients reconnecting together) are
never refused for being many. An empty bucket refuses every token its address presents without
checking it — the right one too: a throttle that let the right token through would tell a
guesser when it found it — with :class:`Throttled` (HTTP 429 with ``Retry-After``; on the
WebSocket an ``auth-failed`` frame and a close with the reason) until the bucket refills.

Checks do not wait while the token table is warm (:mod:`.tokens` keeps it so), so a burst of
guesses is checked one at a time, each charged before the next is looked at. A check that does
wait holds nothing while it waits for the table (its first load, a load after tokens changed),
and its address is looked at again before its token is compared (:meth:`AuthThrottle.recheck`),
so guesses that waited together are still compared at most a burst of them; one whose token
names an id the table lacks holds one of its address's attempts while the table is reloaded
for it (:meth:`AuthThrottle.holding`: made-up tokens cannot pile up behind the reload).

At most ``max_addresses`` addresses are remembered (least recently used dropped first when a
wrong token needs the room), and an address whose bucket is full again is forgotten, so the
table stays bounded whatever addresses clients come from, and right tokens never push a guesser
out.
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

from toolmesh.errors import ToolmeshError
from toolmesh.gateway.bounds import Bounds

__all__ = ["AuthThrottle", "Throttled", "address_key", "throttle_of"]


class Throttled(ToolmeshError):
    """Too many wrong tokens came from the caller's address: refused without a check."""

    type = "auth-throttled"

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        #: seconds until the address may present a token again
        self.retry_after = retry_after

    @property
    def retry_after_header(self) -> str:
        """``Retry-After`` in whole seconds (at least 1: the header has no fractions)."""
        return str(max(1, math.ceil(self.retry_after)))


def address_key(address: str | None) -> str | None:
    """The bucket an address belongs to: itself, or an IPv6 address's /64."""
    if not address or ":" not in address:
        return address or None
    try:
        network = ipaddress.IPv6Network((address.split("%", 1)[0], 64), strict=False)
    except ValueError:
        return address
    mapped = ipaddress.IPv6Address(address.split("%", 1)[0]).ipv4_mapped
    return str(mapped) if mapped is not None else str(network)


class AuthThrottle:
    """Token buckets of wrong tokens per client address (see the module docstring)."""

    def __init__(self, *, rate: float, burst: int, max_addresses: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1 or max_addresses < 1:
            raise ValueError("an auth throttle needs rate > 0, burst >= 1, max_addresses >= 1")
        self.rate = rate
        self.burst = float(burst)
        self.max_addresses = max_addresses
        self._clock = clock
        #: address → [attempts left, when they were counted]; only addresses below full
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()
        #: address → checks holding an attempt while they wait (:meth:`holding`)
        self._held: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._buckets)

    def check(self, address: str | None) -> str | None:
        """Before ``address``'s token is checked: the key to charge (:meth:`failed`) if it is
        wrong, or :class:`Throttled` when none of its attempts is left. Takes nothing."""
        key = address_key(address)
        if key is not None:  # None: not a network peer (a Unix socket, a test transport)
            self.recheck(key)
        return key

    def recheck(self, key: str | None) -> None:
        """After a check waited for the token table: :class:`Throttled` if ``key`` ran out of
        attempts meanwhile (wrong tokens checked while it waited), before its token is
        compared. Guesses that all waited together are so compared at most a burst of them."""
        if key is None:
            return
        left = self._left(key) - self._held.get(key, 0)
        if left < 1:
            wait = (1 - left) / self.rate
            raise Throttled(f"too many wrong tokens from this address (at most "
                            f"{self.burst:g} at once, then {self.rate:g} a second): every token "
                            f"it sends is refused for {wait:.1f} s more; check the token and "
                            "retry then", retry_after=wait)

    def failed(self, key: str | None) -> None:
        """The token checked for ``key`` was wrong: one attempt spent, and the least recently
        used addresses beyond ``max_addresses`` forgotten."""
        if key is None:
            return
        left = self._left(key) - 1  # (a bucket refilled to full was forgotten: made anew)
        self._buckets[key] = [left, self._clock()]
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_addresses:
            self._buckets.popitem(last=False)

    @contextlib.contextmanager
    def holding(self, key: str | None) -> Iterator[None]:
        """Hold one of ``key``'s attempts while the block waits to check a token:
        :class:`Throttled` (nothing held) when none is left. Given back after; charging a
        wrong token is still :meth:`failed`'s."""
        if key is None:
            yield
            return
        self.recheck(key)
        self._held[key] = self._held.get(key, 0) + 1
        try:
            yield
        finally:
            held = self._held[key] - 1
            if held:
                self._held[key] = held
            else:
                del self._held[key]

    def _left(self, key: str) -> float:
        """Attempts ``key`` has now, refilled since last counted (a full bucket is forgotten:
        an address that stopped failing leaves nothing behind)."""
        bucket = self._buckets.get(key)
        if bucket is None:
            return self.burst
        now = self._clock()
        left = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        if left >= self.burst:
            del self._buckets[key]
            return left
        bucket[0], bucket[1] = left, now
        self._buckets.move_to_end(key)
        return left


def throttle_of(bounds: Bounds) -> AuthThrottle | None:
    """The throttle ``bounds`` sets; ``None`` when ``auth_failure_rate`` is 0 (off)."""
    if bounds.auth_failure_rate <= 0:
        return None
    return AuthThrottle(rate=bounds.auth_failure_rate, burst=max(1, bounds.auth_failure_burst),
                        max_addresses=max(1, bounds.auth_throttle_addresses))
