"""MCP logins in PostgreSQL, shared by every replica: tables beside the config store's, in
the schema the URL names (``?schema=NAME``, default ``public``; the URL forms of
:mod:`toolmesh.config.store.postgres`); asyncpg with a small pool.

The tables are those of :mod:`toolmesh.mcp_oauth.grants.sqlite` (``toolmesh_mcp_grants``,
``toolmesh_mcp_pending``, ``toolmesh_mcp_clients``), made when missing under an advisory
lock, so replicas starting together do not trip over each other's ``CREATE``. A pending login
is taken with one ``DELETE ... RETURNING``: of two callbacks with the same state, on any
replicas, one gets it. Starting a login drops the expired ones and, past ``max_pending``,
those that expire soonest, in a transaction that holds a lock of this schema's pending
logins (two replicas dropping each other's rows could otherwise deadlock).

Times are the callers' (Unix seconds, as the seam says), never the server's clock.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from toolmesh.config.errors import ConfigError
from toolmesh.config.store.postgres import split_schema
from toolmesh.mcp_oauth.errors import GrantStoreError
from toolmesh.mcp_oauth.grants.memory import MAX_PENDING
from toolmesh.mcp_oauth.grants.store import StoredGrant, StoredPending
from toolmesh.postgres import DDL_LOCK, quote_ident
from toolmesh.urls import mask_url, url_passwords

__all__ = ["PostgresGrants"]

T = TypeVar("T")

_DB_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)
_GRANT_COLUMNS = "workspace, principal, resource, issuer, scope, expires_at, obtained, secret"


def _grant(row: asyncpg.Record) -> StoredGrant:
    return StoredGrant(workspace=row["workspace"], principal=row["principal"],
                       resource=row["resource"], issuer=row["issuer"], scope=row["scope"],
                       expires_at=row["expires_at"], obtained=row["obtained"],
                       secret=row["secret"])


class PostgresGrants:
    """A :class:`~toolmesh.mcp_oauth.grants.store.GrantStore` in the PostgreSQL database of
    ``url`` (``postgresql://user:password@host:5432/db?schema=NAME``).

    ``max_pending``: the most pending logins kept (the soonest to expire go first);
    ``pool_size``: connections at most; ``connect_timeout``: seconds to wait for one.
    Raises :class:`GrantStoreError` for a URL it cannot use; only the URL's masked form is
    kept, and its passwords are kept out of every message."""

    def __init__(self, url: str, *, max_pending: int = MAX_PENDING, pool_size: int = 2,
                 connect_timeout: float = 10.0) -> None:
        if not isinstance(max_pending, int) or isinstance(max_pending, bool) or max_pending < 1:
            raise ValueError(f"max_pending must be a positive whole number, not {max_pending!r}")
        try:
            self._dsn, self.schema = split_schema(url)
        except ConfigError as e:  # the config store's URL rules, said of this store
            raise GrantStoreError(e.message.replace("config store", "MCP login store")) from None
        self.url = mask_url(url)
        self._secrets = url_passwords(url)
        self.max_pending = max_pending
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self._pool: asyncpg.Pool | None = None
        s = quote_ident(self.schema)
        self._grants = f"{s}.toolmesh_mcp_grants"
        self._pending = f"{s}.toolmesh_mcp_pending"
        self._clients = f"{s}.toolmesh_mcp_clients"

    def __repr__(self) -> str:
        return f"PostgresGrants({self.url!r})"

    def _error(self, what: str, e: BaseException, hint: str = "") -> GrantStoreError:
        message = f"{what} at {self.url}: {e}{hint}"
        for secret in self._secrets:  # in case a driver message ever echoes the URL
            message = message.replace(secret, "***")
        return GrantStoreError(message)

    # --- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, and make the schema and tables when missing; a second call does nothing."""
        if self._pool is not None:
            return
        what = "cannot open the MCP login store"
        try:
            pool = await asyncpg.create_pool(self._dsn, min_size=1, max_size=self.pool_size,
                                             timeout=self.connect_timeout)
        except (*_DB_ERRORS, ValueError) as e:
            raise self._error(what, e, "; check that PostgreSQL runs there and the URL's "
                              "user, password and database are right") from None
        try:
            async with pool.acquire() as conn:
                await self._create_tables(conn)
        except BaseException as e:
            await pool.close()
            if isinstance(e, _DB_ERRORS):
                raise self._error(what, e, f"; the URL's user must be allowed to create "
                                  f"tables in schema {self.schema!r} (once: later it only "
                                  "reads and writes them)") from None
            raise
        self._pool = pool

    async def _create_tables(self, conn: asyncpg.Connection) -> None:
        async with conn.transaction():
            present = await conn.fetchval(
                "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL"
                " AND to_regclass($3) IS NOT NULL", self._grants, self._pending, self._clients)
            # no DDL when the tables exist: even CREATE ... IF NOT EXISTS needs the CREATE
            # privilege, which a deployment's runtime role may rightly lack
            if present:
                return
            # replicas starting together: one creates, the others wait, then find them made
            await conn.execute(DDL_LOCK)
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.schema)}")
            await conn.execute(f"""
                CREATE TABLE IF NOT EXISTS {self._grants} (
                    workspace  text NOT NULL,
                    principal  text NOT NULL,
                    resource   text NOT NULL,
                    issuer     text NOT NULL,
                    scope      text,
                    expires_at double precision,
                    obtained   double precision NOT NULL,
                    secret     text NOT NULL,
                    PRIMARY KEY (workspace, principal, resource)
                );
                CREATE TABLE IF NOT EXISTS {self._pending} (
                    state      text PRIMARY KEY,
                    workspace  text NOT NULL,
                    principal  text NOT NULL,
                    expires_at double precision NOT NULL,
                    secret     text NOT NULL
                );
                CREATE INDEX IF NOT EXISTS toolmesh_mcp_pending_expires
                    ON {self._pending} (expires_at);
                CREATE TABLE IF NOT EXISTS {self._clients} (
                    issuer       text NOT NULL,
                    redirect_uri text NOT NULL,
                    secret       text NOT NULL,
                    PRIMARY KEY (issuer, redirect_uri)
                );""")

    async def close(self) -> None:
        """Close the pool; safe to call twice."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def _do(self, op: str, fn: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """``fn`` on a connection of the pool, its errors said as the store's."""
        if self._pool is None:
            raise GrantStoreError(f"the MCP login store at {self.url} is not open")
        try:
            async with self._pool.acquire() as conn:
                return await fn(conn)
        except _DB_ERRORS as e:
            raise self._error(f"cannot {op} in the MCP login store", e) from None

    # --- grants --------------------------------------------------------------------------

    async def get(self, workspace: str, principal: str, resource: str) -> StoredGrant | None:
        """The grant of ``principal`` for ``resource`` in ``workspace``, if any."""
        row = await self._do("read a grant", lambda conn: conn.fetchrow(
            f"SELECT {_GRANT_COLUMNS} FROM {self._grants}"
            " WHERE workspace = $1 AND principal = $2 AND resource = $3",
            workspace, principal, resource))
        return None if row is None else _grant(row)

    async def put(self, grant: StoredGrant) -> None:
        """Keep ``grant``, replacing the one of the same workspace, principal and resource."""
        await self._do("keep a grant", lambda conn: conn.execute(
            f"INSERT INTO {self._grants} ({_GRANT_COLUMNS})"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
            " ON CONFLICT (workspace, principal, resource) DO UPDATE SET"
            " issuer = excluded.issuer, scope = excluded.scope,"
            " expires_at = excluded.expires_at, obtained = excluded.obtained,"
            " secret = excluded.secret",
            grant.workspace, grant.principal, grant.resource, grant.issuer, grant.scope,
            grant.expires_at, grant.obtained, grant.secret))

    async def delete(self, workspace: str, principal: str, resource: str | None = None) -> int:
        """Forget ``principal``'s grant for ``resource`` (all of theirs in ``workspace`` when
        ``None``); how many were forgotten."""
        # $3 IS NULL: every resource; one statement either way
        return await self._do("forget grants", lambda conn: conn.fetchval(
            f"WITH gone AS (DELETE FROM {self._grants} WHERE workspace = $1"
            " AND principal = $2 AND ($3::text IS NULL OR resource = $3) RETURNING 1)"
            " SELECT count(*)::int FROM gone", workspace, principal, resource))

    async def list(self, workspace: str, principal: str | None = None) -> list[StoredGrant]:
        """The grants of ``workspace`` (of ``principal`` only, when given), by resource then
        principal (code point order, as Python sorts, whatever the database's collation)."""
        rows = await self._do("list grants", lambda conn: conn.fetch(
            f"SELECT {_GRANT_COLUMNS} FROM {self._grants}"
            " WHERE workspace = $1 AND ($2::text IS NULL OR principal = $2)"
            ' ORDER BY resource COLLATE "C", principal COLLATE "C"', workspace, principal))
        return [_grant(r) for r in rows]

    # --- pending logins ------------------------------------------------------------------

    async def put_pending(self, login: StoredPending) -> None:
        """Keep a login started (replacing one of the same state); drop the expired ones and,
        past ``max_pending``, the others that expire soonest."""
        now = time.time()

        async def put(conn: asyncpg.Connection) -> None:
            async with conn.transaction():
                # one replica at a time drops pending logins of this schema
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))",
                                   f"toolmesh.mcp_oauth.pending:{self.schema}")
                await conn.execute(f"DELETE FROM {self._pending} WHERE expires_at < $1", now)
                await conn.execute(
                    f"INSERT INTO {self._pending} (state, workspace, principal, expires_at,"
                    " secret) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (state) DO UPDATE SET"
                    " workspace = excluded.workspace, principal = excluded.principal,"
                    " expires_at = excluded.expires_at, secret = excluded.secret",
                    login.state, login.workspace, login.principal, login.expires_at,
                    login.secret)
                await conn.execute(
                    f"DELETE FROM {self._pending} WHERE state IN ("
                    f" SELECT state FROM {self._pending} WHERE state <> $1"
                    ' ORDER BY expires_at, state COLLATE "C" LIMIT greatest(0,'
                    f"  (SELECT count(*) FROM {self._pending}) - $2))",
                    login.state, self.max_pending)

        await self._do("keep a login started", put)

    async def take_pending(self, state: str, *, now: float) -> StoredPending | None:
        """The login of ``state``, removed in the same statement (so once only, whichever
        replica asks); ``None`` when there is none or it expired before ``now``."""
        row = await self._do("take a login started", lambda conn: conn.fetchrow(
            f"DELETE FROM {self._pending} WHERE state = $1"
            " RETURNING workspace, principal, expires_at, secret", state))
        if row is None or row["expires_at"] < now:
            return None
        return StoredPending(state=state, workspace=row["workspace"],
                             principal=row["principal"], expires_at=row["expires_at"],
                             secret=row["secret"])

    # --- client registrations ------------------------------------------------------------

    async def get_client(self, issuer: str, redirect_uri: str) -> str | None:
        """The registration kept for ``issuer`` and ``redirect_uri``, if any."""
        return await self._do("read a client registration", lambda conn: conn.fetchval(
            f"SELECT secret FROM {self._clients} WHERE issuer = $1 AND redirect_uri = $2",
            issuer, redirect_uri))

    async def put_client(self, issuer: str, redirect_uri: str, secret: str) -> None:
        """Keep a registration, replacing one of the same issuer and redirect URI."""
        await self._do("keep a client registration", lambda conn: conn.execute(
            f"INSERT INTO {self._clients} (issuer, redirect_uri, secret) VALUES ($1, $2, $3)"
            " ON CONFLICT (issuer, redirect_uri) DO UPDATE SET secret = excluded.secret",
            issuer, redirect_uri, secret))
