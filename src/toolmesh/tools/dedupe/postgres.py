"""The dedupe store replicas share: one table in the config store's PostgreSQL (the URL forms
of :mod:`toolmesh.config.store.postgres`, ``?schema=NAME`` among them). The seam:
:mod:`toolmesh.tools.dedupe.store`.

Table ``toolmesh_tool_calls``, a row per key: while a run holds it, its claim's token and
lease; once done, its responses (JSON), their size, and when it expires. A claim is one
``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` that takes a free key, an expired one, or one
whose holder's lease ran out — so two replicas never both run a key. A replica whose key is
held elsewhere waits on ``LISTEN toolmesh_tool_calls`` (every completion and release is
``NOTIFY``-ed, with the key) or until the holder's lease runs out, by the database's clock —
no polling. Every hundredth completion sweeps the table: expired rows, then the oldest done
rows beyond the entry and byte budgets, then runs whose holders vanished long ago.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from toolmesh import json_codec
from toolmesh.config.errors import ConfigError
from toolmesh.config.store.postgres import split_schema
from toolmesh.postgres import DDL_LOCK, quote_ident
from toolmesh.tools.dedupe.store import (
    Claim,
    Claimed,
    DedupeError,
    Kept,
    Limits,
    Reused,
)
from toolmesh.urls import mask_url, url_passwords

log = logging.getLogger("toolmesh.tools.dedupe")

_DB_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)
#: the channel completions and releases are announced on (payload: the key)
CHANNEL = "toolmesh_tool_calls"
_SWEEP_EVERY = 100


def _row_key(key: str) -> str:
    """A key as the table holds it: its SHA-256 (keys come in any length)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class PostgresDedupe:
    """A :class:`~toolmesh.tools.dedupe.store.DedupeStore` in PostgreSQL, shared by every
    replica (and every service: keys are scoped by service id) that uses the database."""

    def __init__(self, url: str, *, limits: Limits | None = None, pool_size: int = 2,
                 connect_timeout: float = 10.0, sweep_every: int = _SWEEP_EVERY) -> None:
        """``sweep_every``: completions between two sweeps of the table (the first sweeps)."""
        try:
            self._dsn, self.schema = split_schema(url)
        except ConfigError as e:  # the config store's URL rules, said of this store
            raise DedupeError(e.message.replace("config store", "dedupe store")) from None
        self.url = mask_url(url)
        self._secrets = url_passwords(url)
        self.limits = limits or Limits()
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self._pool: asyncpg.Pool | None = None
        self._table = f"{quote_ident(self.schema)}.toolmesh_tool_calls"
        self._listener: asyncpg.Connection | None = None
        self._listening: asyncio.Lock | None = None
        #: key -> the futures of the claims waiting for it to be completed or released
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._completed = 0
        self._sweep_every = sweep_every
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresDedupe({self.url!r})"

    def _error(self, e: BaseException) -> DedupeError:
        message = f"the dedupe store at {self.url}: {e}"
        for secret in self._secrets:  # in case a driver message ever echoes the URL
            message = message.replace(secret, "***")
        return DedupeError(message)

    # --- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        if self._pool is not None:
            return
        self._closed = False
        try:
            pool = await asyncpg.create_pool(self._dsn, min_size=1, max_size=self.pool_size,
                                             timeout=self.connect_timeout)
        except (*_DB_ERRORS, ValueError) as e:
            raise self._error(e) from None
        try:
            async with pool.acquire() as conn, conn.transaction():
                if await conn.fetchval("SELECT to_regclass($1) IS NULL", self._table):
                    await conn.execute(DDL_LOCK)
                    await conn.execute(
                        f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.schema)}")
                    await conn.execute(f"""
                        CREATE TABLE IF NOT EXISTS {self._table} (
                            key         text PRIMARY KEY,
                            fingerprint text NOT NULL,
                            running     boolean NOT NULL,
                            token       text,
                            lease_until timestamptz,
                            responses   text,
                            size        integer NOT NULL DEFAULT 0,
                            done_at     timestamptz,
                            expires     timestamptz
                        );
                        CREATE INDEX IF NOT EXISTS toolmesh_tool_calls_done
                            ON {self._table} (done_at) WHERE NOT running""")
        except BaseException as e:
            await pool.close()
            if isinstance(e, _DB_ERRORS):
                raise self._error(e) from None
            raise
        self._pool = pool
        self._listening = asyncio.Lock()

    async def close(self) -> None:
        self._closed = True
        self._wake_all()
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                await listener.close()
            except _DB_ERRORS:
                pass
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _db(self) -> asyncpg.Pool:
        if self._pool is None or self._closed:
            raise DedupeError("the dedupe store is not open (the service is stopping?)")
        return self._pool

    # --- the seam ------------------------------------------------------------------------

    async def claim(self, key: str, fingerprint: str, *, lease: float) -> Claim:
        key = _row_key(key)
        token = secrets.token_hex(12)
        while True:
            # listening before looking: a completion between the look and the wait is heard
            ended = self._waiter(key)
            try:
                await self._listen()
                outcome = await self._try_claim(key, fingerprint, token, lease)
                if not isinstance(outcome, float):
                    return outcome
                if outcome > 0:  # held by a run elsewhere: until it ends, or its lease does
                    await asyncio.wait({ended}, timeout=outcome)
            finally:
                self._unwait(key, ended)
            if self._closed:
                raise DedupeError("the dedupe store is closed (the service is stopping)")

    async def _try_claim(self, key: str, fingerprint: str, token: str,
                         lease: float) -> Claim | float:
        """What claiming ``key`` came to — or, while another run holds it, the seconds left
        of that run's lease (``0.0``: look again at once)."""
        try:
            async with self._db().acquire() as conn:
                taken = await conn.fetchval(f"""
                    INSERT INTO {self._table} AS c (key, fingerprint, running, token,
                                                    lease_until)
                    VALUES ($1, $2, true, $3, clock_timestamp() + make_interval(secs => $4))
                    ON CONFLICT (key) DO UPDATE SET
                        fingerprint = excluded.fingerprint, running = true,
                        token = excluded.token, lease_until = excluded.lease_until,
                        responses = NULL, size = 0, done_at = NULL, expires = NULL
                    WHERE (c.running AND c.lease_until < clock_timestamp())
                       OR (NOT c.running AND c.expires < clock_timestamp())
                    RETURNING c.token""", key, fingerprint, token, float(lease))
                if taken == token:
                    return Claimed(key, token)
                row = await conn.fetchrow(f"""
                    SELECT running, fingerprint, responses, size,
                           extract(epoch FROM lease_until - clock_timestamp())::float8 AS left
                    FROM {self._table} WHERE key = $1""", key)
        except _DB_ERRORS as e:
            raise self._error(e) from None
        if row is None:  # released between the two statements
            return 0.0
        if row["fingerprint"] != fingerprint:
            return Reused()
        if not row["running"]:
            responses = row["responses"]
            return Kept(None if responses is None else tuple(json.loads(responses)),
                        row["size"])
        return max(float(row["left"] or 0.0), 0.0)

    async def complete(self, claim: Claimed, responses: Sequence[Mapping[str, Any]] | None,
                       *, size: int) -> None:
        kept = None
        if responses is not None and size <= self.limits.max_result:
            kept = json_codec.dumps([dict(r) for r in responses]).decode()
        try:
            async with self._db().acquire() as conn:
                done = await conn.fetchval(f"""
                    WITH done AS (
                        UPDATE {self._table} SET running = false, token = NULL,
                            lease_until = NULL, responses = $3, size = $4,
                            done_at = clock_timestamp(),
                            expires = clock_timestamp() + make_interval(secs => $5)
                        WHERE key = $1 AND token = $2 RETURNING key)
                    SELECT count(pg_notify($6, key)) FROM done""",
                    claim.key, claim.token, kept, size, float(self.limits.ttl), CHANNEL)
                if not done:
                    log.warning("a call's result was not kept: its claim's lease ran out "
                                "before it answered (another replica may have run it too)")
                self._completed += 1
                if self._completed % self._sweep_every == 1 % self._sweep_every:
                    await self._sweep(conn)
        except _DB_ERRORS as e:
            raise self._error(e) from None

    async def release(self, claim: Claimed) -> None:
        try:
            async with self._db().acquire() as conn:
                await conn.execute(f"""
                    WITH gone AS (DELETE FROM {self._table} WHERE key = $1 AND token = $2
                                  RETURNING key)
                    SELECT count(pg_notify($3, key)) FROM gone""",
                    claim.key, claim.token, CHANNEL)
        except _DB_ERRORS as e:
            raise self._error(e) from None

    async def _sweep(self, conn: asyncpg.Connection) -> None:
        """Drop expired rows, the oldest done rows beyond the budgets, and runs whose
        holders vanished more than a ``ttl`` ago."""
        await conn.execute(f"""
            DELETE FROM {self._table} WHERE key IN (
                SELECT key FROM (
                    SELECT key, expires,
                           row_number() OVER w AS n,
                           sum(coalesce(octet_length(responses), 0)) OVER w AS kept
                    FROM {self._table} WHERE NOT running
                    WINDOW w AS (ORDER BY done_at DESC)) AS d
                WHERE n > $1 OR kept > $2 OR expires < clock_timestamp())
            OR (running AND lease_until < clock_timestamp() - make_interval(secs => $3))""",
            self.limits.entries, self.limits.max_bytes, float(self.limits.ttl))

    # --- waiting -------------------------------------------------------------------------

    def _waiter(self, key: str) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, set()).add(future)
        return future

    def _unwait(self, key: str, future: asyncio.Future[None]) -> None:
        waiting = self._waiters.get(key)
        if waiting is not None:
            waiting.discard(future)
            if not waiting:
                del self._waiters[key]

    def _notified(self, _conn: Any, _pid: int, _channel: str, key: str) -> None:
        for future in self._waiters.get(key, ()):
            if not future.done():
                future.set_result(None)

    def _wake_all(self) -> None:
        for waiting in self._waiters.values():
            for future in waiting:
                if not future.done():
                    future.set_result(None)

    def _lost(self, _conn: Any) -> None:
        """The listening connection closed: every waiter looks again (and listens anew)."""
        self._listener = None
        self._wake_all()

    async def _listen(self) -> None:
        """Be listening on :data:`CHANNEL` (a connection of its own, opened once)."""
        if self._listener is not None and not self._listener.is_closed():
            return
        assert self._listening is not None, "open() the store first"
        async with self._listening:
            if self._listener is not None and not self._listener.is_closed():
                return
            try:
                listener = await asyncpg.connect(self._dsn, timeout=self.connect_timeout)
            except (*_DB_ERRORS, ValueError) as e:
                raise self._error(e) from None
            try:
                await listener.add_listener(CHANNEL, self._notified)
            except _DB_ERRORS as e:
                await listener.close()
                raise self._error(e) from None
            listener.add_termination_listener(self._lost)
            if self._closed:
                await listener.close()
                return
            self._listener = listener
