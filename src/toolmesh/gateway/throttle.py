"""Failed-auth throttling per client address, across REST and the WebSocket together.

A guesser is slowed wherever it guesses: each client address (an IPv6 one by its /64, which one
machine usually holds whole) has a token bucket of ``burst`` wrong tokens that refills at
``rate`` a second. Every token presented takes one from its address's bucket before it is
checked and a right one gives it back, so concurrent guesses cannot all pass while the first is
still being looked up. An empty bucket refuses every token its address presents — the right one
too: a throttle that let the right token through would tell a guesser when it found it — with
:class:`Throttled` (HTTP 429 with ``Retry-After``; on the WebSocket an ``auth-failed`` frame and
a close with the reason) until the bucket refills.

At most ``max_addresses`` addresses are remembered (least recently used dropped first, when a
wrong token needs the room; beyond it only while tokens are being checked), and an address
whose bucket is full again is forgotten, so the table stays bounded whatever addresses clients
come from, and right tokens never push a guesser out.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable

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
        #: address → [tokens left, when they were counted]; only addresses below full
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, address: str | None) -> str | None:
        """Take one attempt from ``address``'s bucket before its token is checked; the key to
        :meth:`give_back` when the token was right. :class:`Throttled` when none is left."""
        key = address_key(address)
        if key is None:  # not a network peer (a Unix socket, a test transport)
            return None
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:  # room is made only once it failed (a right token evicts nothing)
            self._buckets[key] = [self.burst - 1, now]
            return key
        left = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        self._buckets.move_to_end(key)
        if left < 1:
            bucket[0] = left
            wait = (1 - left) / self.rate
            raise Throttled(f"too many wrong tokens from this address (at most "
                            f"{self.burst:g} at once, then {self.rate:g} a second): every token "
                            f"it sends is refused for {wait:.1f} s more; check the token and "
                            "retry then", retry_after=wait)
        bucket[0] = left - 1
        return key

    def failed(self, key: str | None) -> None:
        """The token taken for was wrong: its attempt stays spent, and the least recently
        used addresses beyond ``max_addresses`` are forgotten."""
        while len(self._buckets) > self.max_addresses:
            self._buckets.popitem(last=False)

    def give_back(self, key: str | None) -> None:
        """The token taken for was right: return its attempt (a full bucket is forgotten)."""
        if key is None:
            return
        bucket = self._buckets.get(key)
        if bucket is None:
            return
        bucket[0] += 1
        if bucket[0] >= self.burst:
            del self._buckets[key]


def throttle_of(bounds: Bounds) -> AuthThrottle | None:
    """The throttle ``bounds`` sets; ``None`` when ``auth_failure_rate`` is 0 (off)."""
    if bounds.auth_failure_rate <= 0:
        return None
    return AuthThrottle(rate=bounds.auth_failure_rate, burst=max(1, bounds.auth_failure_burst),
                        max_addresses=max(1, bounds.auth_throttle_addresses))
