"""The seam of a tool service's dedupe store: each call, named by its idempotency key, is run
once, and a repeat of it gets what the first run answered (docs/tool-services.md,
"Each call once").

A repeat is the same call delivered again: the broker handing a request over once more after
a connection was lost, an agent taken up again after a crash, a client retrying with its key.
The store keeps, per key:

* **running** — a run has the key now (its claim); a repeat waits for that run to end instead
  of running beside it;
* **done** — the run answered: its responses (what was sent, in order) are kept for ``ttl``
  seconds, and a repeat gets them again without running. A run whose responses are bigger
  than ``max_result`` keeps only that it ran: a repeat is told so (``already-ran``) rather
  than run twice.

A run that fails keeps nothing (its claim is released): a repeat runs the call again — a call
that failed did not act, or acts again as it would on any retry.

Keys are scoped by the service's id and the caller's workspace (:func:`entry_key`), and each
carries the digest of the call it was used for (user, config, arguments: :func:`fingerprint`):
the same key sent with another call is refused (``idempotency-key-reused``), never answered
with someone else's result.

Implementations: :mod:`.memory` (one process: ``toolmesh serve``, a single replica) and
:mod:`.postgres` (replicas sharing the config store's PostgreSQL).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import orjson

from toolmesh import json_codec
from toolmesh.errors import ToolmeshError

#: completed calls a store keeps at most (the least recently used go first)
DEFAULT_ENTRIES = 10_000
#: seconds a completed call is kept
DEFAULT_TTL = 3600.0
#: bytes of one call's responses kept at most; a bigger result is not kept
DEFAULT_MAX_RESULT = 256 * 1024
#: bytes of responses a store keeps in all
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: seconds a claim holds when the request carries no deadline (a replica that dies holding
#: a claim keeps a repeat waiting this long at most)
DEFAULT_LEASE = 300.0


class DedupeError(ToolmeshError):
    """The dedupe store cannot be opened, read or written."""

    type = "dedupe-error"


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """How much a store keeps: ``entries`` completed calls, each for ``ttl`` seconds, each
    of at most ``max_result`` bytes of responses, ``max_bytes`` of them in all."""

    entries: int = DEFAULT_ENTRIES
    ttl: float = DEFAULT_TTL
    max_result: int = DEFAULT_MAX_RESULT
    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        for name in ("entries", "max_result", "max_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"dedupe {name.replace('_', '-')} must be a whole number "
                                 f"above 0, not {value!r}")
        if isinstance(self.ttl, bool) or not isinstance(self.ttl, (int, float)) \
                or not 0 < self.ttl < float("inf"):
            raise ValueError(f"dedupe ttl must be a number of seconds above 0, not {self.ttl!r}")
        if self.max_result > self.max_bytes:
            raise ValueError(f"dedupe max-result ({self.max_result}) must not exceed "
                             f"max-bytes ({self.max_bytes})")


@dataclass(slots=True)
class Claimed:
    """This run has the key: complete it with the responses, or release it."""

    key: str
    token: str


@dataclass(slots=True)
class Kept:
    """The key's call ran and answered: ``responses`` as sent (``None``: they were bigger
    than the store keeps, ``size`` bytes)."""

    responses: tuple[dict[str, Any], ...] | None
    size: int


@dataclass(slots=True)
class Reused:
    """The key is (or was) another call's: a different user, config or arguments."""


Claim = Claimed | Kept | Reused


@runtime_checkable
class DedupeStore(Protocol):
    """Where a tool service's completed calls are kept by key (see the module docstring)."""

    limits: Limits

    async def open(self) -> None:
        """Make ready (connect, create tables); safe to call twice."""

    async def close(self) -> None:
        """Let go of what :meth:`open` took; safe to call twice. Waiting claims end with
        :class:`DedupeError`."""

    async def claim(self, key: str, fingerprint: str, *, lease: float) -> Claim:
        """Claim ``key`` for a run of the call ``fingerprint`` names: :class:`Claimed` if no
        run has it, :class:`Kept` if one completed, :class:`Reused` if it names another call.
        A key another run holds is waited for: its completion (then :class:`Kept`) or its
        release (then claimed). ``lease``: seconds this claim holds if its holder vanishes
        without releasing it (a replica killed), after which a repeat may run."""

    async def complete(self, claim: Claimed, responses: Sequence[Mapping[str, Any]] | None,
                       *, size: int) -> None:
        """The claimed run answered ``responses`` (``None``: too big to keep, ``size``
        bytes); repeats get them from now on."""

    async def release(self, claim: Claimed) -> None:
        """The claimed run failed: forget the key, so a repeat runs the call again."""


def entry_key(service: str, workspace: str | None, key: str) -> str:
    """The store's name for idempotency key ``key`` sent to service ``service`` from
    ``workspace``: the three, each but the last after its length, so two services (or
    workspaces) never share an entry whatever their names hold. A store that needs a
    bounded name hashes it (:mod:`.postgres`)."""
    workspace = workspace or ""
    return f"{len(service)}:{service}{len(workspace)}:{workspace}{key}"


def fingerprint(user: str, config: Mapping[str, Any], arguments: Mapping[str, Any]) -> str:
    """The digest of what a call asks: its user, config and arguments (keys sorted)."""
    value = [user, dict(config), dict(arguments)]
    try:
        raw = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # what orjson refuses (a lone surrogate, a huge integer): json's words
        raw = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()


def responses_size(responses: Sequence[Mapping[str, Any]]) -> int:
    """Bytes of ``responses`` as the store keeps them (their JSON)."""
    return len(json_codec.dumps(list(responses)))
