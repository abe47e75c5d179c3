"""The config-store seam: what every persistence backend provides.

Data model: a store holds string values addressed by ``(workspace, type, key)``. Values are
stored exactly as given (JSON text by convention, but the store never parses them).

Versioning: the store has ONE version counter for all workspaces. It is 0 for an empty store
and goes up by exactly 1 on every ``put`` call and every ``delete`` call that removes at least
one item, in the same transaction as the data, so a reader that sees version N sees every
change up to N and versions are never skipped or handed out twice. A ``delete`` none of whose
keys exists changes nothing: no version, no audit entry; it answers the current version as an
:class:`Unchanged` (so the config service knows there is no change to push).

Idempotency: ``put`` and ``delete`` take an optional ``request_id`` (the bus request's ``id``).
A broker redelivers a request whose consumer died before acknowledging it, and the consumer
may well have committed it already; so the store records "request R produced version V" in
the same transaction as the data and the version bump (a crash cannot separate them), and a
later call with a recorded R writes nothing, bumps nothing and returns V. A ``delete`` that
changed nothing records R too, with the version it answered: a copy arriving after the keys
were put again must not delete them (a request gets its first answer). A request id stands
for one request: a second call with the same id is taken to be the same request, whatever it
carries. The record is bounded: a write that records an id keeps only the ids of the last
``remembered_requests`` versions (default :data:`REMEMBERED_REQUESTS`), its own included, so
a duplicate is recognised while fewer than that many versions have passed since — a count,
not an age, so the bound holds at any write rate and no clock is involved (machines sharing
one PostgreSQL need not agree on the time).

Audit: every ``put`` and ``delete`` that writes (not a replay) records, in the same
transaction, one :class:`AuditEntry` per item it wrote or removed (a key a delete named but
did not find is not recorded) — who asked (``actor``: a token id, ``admin``,
``local``...; never a secret), when (the database's clock, UTC), the workspace, type and key,
the operation and the version it made. Token changes are recorded the same way (workspace
:data:`ALL_WORKSPACES`, type ``token``). The newest :data:`AUDIT_KEPT` entries are kept.
:meth:`ConfigStore.history` reads them newest first.

Tokens: the gateway's scoped tokens live in a table of their own, never reachable through the
config operations; the store holds each token's SHA-256 digest, not the token.

Validation happens before the backend is touched, so a bad request writes nothing:
workspace, type and key must be non-empty strings; every string (values too) must be valid
Unicode without NUL characters, because PostgreSQL cannot store NUL or lone surrogates in
text and both backends must accept the same data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from toolmesh.config.errors import ConfigError

Key = tuple[str, str]
"""``(type, key)``."""

Item = tuple[str, str, str]
"""``(type, key, value)``."""

REMEMBERED_REQUESTS = 10_000
"""How many versions back a store recognises a request id (see the module docstring)."""

AUDIT_KEPT = 100_000
"""How many audit entries a store keeps (the oldest beyond that are dropped as it writes)."""

HISTORY_LIMIT = 1_000
"""The most entries one :meth:`ConfigStore.history` call returns."""

SYSTEM_ACTOR = "system"
"""The actor of a write nobody asked for by name (re-encrypting secrets at start, say)."""

ALL_WORKSPACES = "*"
"""The workspace of audit entries that belong to none (token changes)."""

TOKEN_TYPE = "token"
"""The type of the audit entries of token changes (the key is the token's id)."""


class Unchanged(int):
    """The version a ``delete`` answers when it removed nothing: the current one, unchanged.

    An ``int`` like every write's answer, so callers that only want the version (and stores
    that wrap another, passing its answer on) need not know; the config service tells it
    apart to push no change notice for it. A replay of a recorded request answers a plain
    ``int``: the record keeps the version, not whether the first call changed anything.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Unchanged({int(self)})"


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditEntry:
    """One recorded change: who made it, when, to what."""

    seq: int
    #: when, by the database's clock: ISO 8601, UTC, milliseconds (``2025-01-31T12:00:00.123Z``)
    at: str
    actor: str
    workspace: str
    #: ``put``, ``delete``, ``token-create`` or ``token-revoke``
    operation: str
    type: str
    key: str
    #: the config version the change made (``None`` for token changes)
    version: int | None

    def to_wire(self) -> dict[str, Any]:
        return {"at": self.at, "actor": self.actor, "workspace": self.workspace,
                "operation": self.operation, "type": self.type, "key": self.key,
                "version": self.version}


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredToken:
    """A scoped gateway token as stored: its digest, never the token itself."""

    id: str
    #: hex SHA-256 of the whole token
    digest: str
    workspaces: tuple[str, ...]
    capabilities: tuple[str, ...]
    name: str = ""
    #: when it was created (set by the store; ISO 8601 UTC like :attr:`AuditEntry.at`)
    created: str = ""


def iso_utc(when: datetime) -> str:
    """``when`` as the stores show times: ``2025-01-31T12:00:00.123Z``."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@runtime_checkable
class ConfigStore(Protocol):
    """Durable storage of config items with a store-wide version counter."""

    async def open(self) -> None:
        """Connect, creating the storage (file, tables) if missing."""

    async def close(self) -> None:
        """Release connections; safe to call twice."""

    async def version(self) -> int:
        """The current version: 0 for an empty store."""

    async def get(self, workspace: str, keys: Sequence[Key]) -> list[str | None]:
        """The value of each ``(type, key)``, in order; ``None`` where missing."""

    async def keys(self, workspace: str, type: str) -> list[str]:
        """The keys of ``type`` in ``workspace``, sorted."""

    async def values(self, workspace: str, type: str) -> dict[str, str]:
        """Every ``key -> value`` of ``type`` in ``workspace``."""

    async def dump(self, workspace: str) -> dict[str, dict[str, str]]:
        """The whole workspace as ``{type: {key: value}}``."""

    async def put(self, workspace: str, values: Sequence[Item], *,
                  request_id: str | None = None, actor: str = SYSTEM_ACTOR) -> int:
        """Write every ``(type, key, value)`` atomically (all or nothing); the new version.

        If the same ``(type, key)`` appears twice, the last value wins. With a ``request_id``
        already recorded: nothing is written, and the version it produced is returned.
        Each item is audited as written by ``actor``.
        """

    async def delete(self, workspace: str, keys: Sequence[Key], *,
                     request_id: str | None = None, actor: str = SYSTEM_ACTOR) -> int:
        """Remove every ``(type, key)`` atomically; missing keys are fine; the new version,
        or, when none of them exists, :class:`Unchanged` (the current version: nothing is
        written, bumped or audited, but a ``request_id`` is recorded with it).

        ``request_id`` and ``actor`` as for :meth:`put`; only the removed items are audited.
        """

    async def workspaces(self) -> list[str]:
        """The workspaces holding at least one item, sorted."""

    async def history(self, *, workspace: str | None = None, type: str | None = None,
                      key: str | None = None, limit: int = 20) -> list[AuditEntry]:
        """The newest ``limit`` audit entries (at most :data:`HISTORY_LIMIT`), newest first;
        each filter given narrows them (``None``: any)."""

    async def tokens(self) -> list[StoredToken]:
        """Every stored token, by id."""

    async def add_token(self, token: StoredToken, *, actor: str) -> StoredToken:
        """Store ``token`` (its ``created`` set) and audit it; :class:`ConfigError` if its id
        or digest is taken."""

    async def remove_token(self, id: str, *, actor: str) -> bool:
        """Delete the token ``id`` and audit it; whether there was one."""


# --- validation shared by the backends -----------------------------------------------------


def check_text(what: str, value: Any) -> str:
    """``value`` if it is a string both backends can store, else :class:`ConfigError`."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, not {type(value).__name__}: {value!r:.60}")
    if "\x00" in value:
        raise ConfigError(f"{what} must not contain NUL characters: {value!r:.60}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ConfigError(f"{what} is not valid Unicode ({e.reason}): {value!r:.60}") from None
    return value


def check_name(what: str, value: Any) -> str:
    """Like :func:`check_text`, and not empty (workspace, type and key names)."""
    check_text(what, value)
    if not value:
        raise ConfigError(f"{what} must not be empty")
    return value


def check_request_id(request_id: Any) -> str | None:
    """``request_id`` if it is ``None`` or a storable non-empty string, else
    :class:`ConfigError`."""
    return None if request_id is None else check_name("request_id", request_id)


def check_remembered(count: Any) -> int:
    """``count`` if it is a positive int (how many versions back request ids are kept)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigError(f"remembered_requests must be a positive integer, not {count!r}")
    return count


def _check_sequence(what: str, items: Any) -> Sequence[Any]:
    # a str is a Sequence too, and would be silently split into characters
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise ConfigError(f"{what} must be a list, not {type(items).__name__}")
    return items


def _check_tuple(what: str, item: Any, size: int) -> Sequence[Any]:
    if isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) != size:
        raise ConfigError(f"{what} must be a {size}-tuple, got {item!r:.80}")
    return item


def check_keys(keys: Any) -> list[Key]:
    """Validated ``(type, key)`` pairs, duplicates removed (first occurrence kept)."""
    out: dict[Key, None] = {}
    for i, item in enumerate(_check_sequence("keys", keys)):
        t, k = _check_tuple(f"keys[{i}]", item, 2)
        out[(check_name(f"keys[{i}] type", t), check_name(f"keys[{i}] key", k))] = None
    return list(out)


def check_items(values: Any) -> list[Item]:
    """Validated ``(type, key, value)`` triples; for a repeated ``(type, key)`` the last wins."""
    out: dict[Key, str] = {}
    for i, item in enumerate(_check_sequence("values", values)):
        t, k, v = _check_tuple(f"values[{i}]", item, 3)
        key = (check_name(f"values[{i}] type", t), check_name(f"values[{i}] key", k))
        out[key] = check_text(f"values[{i}] value", v)
    return [(t, k, v) for (t, k), v in out.items()]


def check_history(workspace: Any, type: Any, key: Any, limit: Any) -> int:
    """Validate :meth:`ConfigStore.history`'s filters; the limit to use."""
    for what, value in (("workspace", workspace), ("type", type), ("key", key)):
        if value is not None:
            check_name(what, value)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= HISTORY_LIMIT:
        raise ConfigError(f"limit must be a whole number from 1 to {HISTORY_LIMIT}, "
                          f"not {limit!r:.40}")
    return limit


def check_token(token: Any) -> StoredToken:
    """``token`` if it is a :class:`StoredToken` both backends can store."""
    if not isinstance(token, StoredToken):
        raise ConfigError(f"a token must be a StoredToken, not {type(token).__name__}")
    check_name("token id", token.id)
    check_name("token digest", token.digest)
    check_text("token name", token.name)
    for what, names in (("workspace", token.workspaces), ("capability", token.capabilities)):
        if not names:
            raise ConfigError(f"a token needs at least one {what}")
        for name in names:
            check_name(f"token {what}", name)
    return token


