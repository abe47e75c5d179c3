"""The PostgreSQL config store: asyncpg with a small pool, shareable by many machines.

URL: ``postgresql://user:password@host:5432/db?schema=NAME`` (``postgres://`` too). The
optional ``schema`` parameter (default ``public``) names the schema holding the tables; it is
created, with the tables, if missing. Other parameters (e.g. ``sslmode``) go to asyncpg.

Every write is one transaction that first locks the version row (``SELECT ... FOR UPDATE``).
The lock serialises writers across machines; the write bumps the row (``UPDATE ...
RETURNING``) once it has changed something, so versions are handed out once, without gaps (a
rolled-back write gives its number back, a delete that found nothing takes none), and in commit
order. The request-id check comes right after that lock is taken: in READ COMMITTED the check's
statement sees every write committed before, so two machines handling the same request id
cannot both apply it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from toolmesh.config.errors import ConfigError
from toolmesh.config.store.base import (
    ALL_WORKSPACES,
    AUDIT_KEPT,
    REMEMBERED_REQUESTS,
    SYSTEM_ACTOR,
    TOKEN_TYPE,
    AuditEntry,
    Item,
    Key,
    StoredToken,
    Unchanged,
    check_history,
    check_items,
    check_keys,
    check_name,
    check_remembered,
    check_request_id,
    check_token,
    iso_utc,
)
from toolmesh.postgres import DDL_LOCK, quote_ident
from toolmesh.urls import mask_url, url_passwords

DEFAULT_SCHEMA = "public"

# what a failing server, network or driver raises; anything else is a bug and propagates
_DB_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)


def split_schema(url: str) -> tuple[str, str]:
    """``(dsn for asyncpg, schema)``: the URL without its ``schema`` parameter, and that."""
    try:
        parts = urlsplit(url)
    except ValueError as e:
        raise ConfigError(f"cannot open the config store at {mask_url(url)}: {e}") from None
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [v for k, v in pairs if k == "schema"]
    if len(schemas) > 1:
        raise ConfigError(f"config store URL {mask_url(url)} names more than one schema")
    schema = schemas[0] if schemas else DEFAULT_SCHEMA
    if not schema or "\x00" in schema or len(schema.encode("utf-8")) > 63:
        # PostgreSQL would silently truncate a longer name and so share someone else's schema
        raise ConfigError(f"config store URL {mask_url(url)}: schema must be 1 to 63 bytes,"
                          f" got {schema!r}")
    rest = urlencode([(k, v) for k, v in pairs if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema


class PostgresConfigStore:
    """A :class:`~toolmesh.config.store.base.ConfigStore` in PostgreSQL tables.

    ``remembered_requests``: how many versions back request ids are recognised.
    """

    def __init__(self, url: str, *, pool_size: int = 4, connect_timeout: float = 10.0,
                 remembered_requests: int = REMEMBERED_REQUESTS) -> None:
        self._dsn, self.schema = split_schema(url)
        self.url = mask_url(url)  # only the masked form is kept for messages
        # secrets to scrub from driver messages: the user-info password and ?password=
        self._secrets = url_passwords(url)
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self.remembered_requests = check_remembered(remembered_requests)
        self._pool: asyncpg.Pool | None = None
        s = quote_ident(self.schema)
        self._config = f"{s}.toolmesh_config"
        self._version = f"{s}.toolmesh_config_version"
        self._applied = f"{s}.toolmesh_config_applied"
        self._audit = f"{s}.toolmesh_config_audit"
        self._tokens = f"{s}.toolmesh_tokens"

    def __repr__(self) -> str:
        return f"PostgresConfigStore({self.url!r})"

    def _error(self, what: str, e: BaseException) -> ConfigError:
        message = f"{what}: {e}"
        for secret in self._secrets:  # in case a driver message ever echoes the URL
            message = message.replace(secret, "***")
        return ConfigError(message)

    # --- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, and create the schema and tables if missing."""
        if self._pool is not None:
            return
        what = f"cannot open the config store at {self.url}"
        try:
            pool = await asyncpg.create_pool(self._dsn, min_size=1, max_size=self.pool_size,
                                             timeout=self.connect_timeout)
        except (*_DB_ERRORS, ValueError) as e:
            raise self._error(what, e) from None
        try:
            async with pool.acquire() as conn:
                await self._create_tables(conn)
        except BaseException as e:
            await pool.close()
            if isinstance(e, _DB_ERRORS):
                raise self._error(what, e) from None
            raise
        self._pool = pool

    async def _create_tables(self, conn: asyncpg.Connection) -> None:
        async with conn.transaction():
            tables = (self._config, self._version, self._applied, self._audit, self._tokens)
            present = await conn.fetchval(
                "SELECT " + " AND ".join(f"to_regclass(${i}) IS NOT NULL"
                                         for i in range(1, len(tables) + 1)), *tables)
            # skip DDL when the tables exist: CREATE ... IF NOT EXISTS still needs the CREATE
            # privilege, which a deployment's runtime role may rightly lack (a store made
            # before toolmesh_config_applied existed gets it here, once, from a role that may)
            if not present:
                await conn.execute(DDL_LOCK)
                if not await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1",
                                           self.schema):
                    await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.schema)}")
                await conn.execute(f"""
                    CREATE TABLE IF NOT EXISTS {self._config} (
                        workspace text NOT NULL,
                        type      text NOT NULL,
                        key       text NOT NULL,
                        value     text NOT NULL,
                        PRIMARY KEY (workspace, type, key)
                    );
                    CREATE TABLE IF NOT EXISTS {self._version} (
                        id      integer PRIMARY KEY CHECK (id = 1),
                        version bigint NOT NULL
                    );
                    CREATE TABLE IF NOT EXISTS {self._applied} (
                        request_id text PRIMARY KEY,
                        version    bigint NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    );
                    CREATE INDEX IF NOT EXISTS toolmesh_config_applied_version
                        ON {self._applied} (version);
                    CREATE TABLE IF NOT EXISTS {self._audit} (
                        seq       bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                        at        timestamptz NOT NULL DEFAULT clock_timestamp(),
                        actor     text NOT NULL,
                        workspace text NOT NULL,
                        operation text NOT NULL,
                        type      text NOT NULL,
                        key       text NOT NULL,
                        version   bigint
                    );
                    CREATE INDEX IF NOT EXISTS toolmesh_config_audit_item
                        ON {self._audit} (type, key, seq);
                    CREATE TABLE IF NOT EXISTS {self._tokens} (
                        id           text PRIMARY KEY,
                        digest       text NOT NULL UNIQUE,
                        workspaces   text NOT NULL,
                        capabilities text NOT NULL,
                        name         text NOT NULL DEFAULT '',
                        created      timestamptz NOT NULL DEFAULT clock_timestamp()
                    );
                """)
            await conn.execute(f"INSERT INTO {self._version} (id, version) VALUES (1, 0)"
                               " ON CONFLICT (id) DO NOTHING")

    async def close(self) -> None:
        """Close the pool; safe to call twice."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _require_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise ConfigError(f"the config store at {self.url} is not open")
        return self._pool

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        pool = self._require_pool()
        try:
            return await pool.fetch(sql, *args)
        except _DB_ERRORS as e:
            raise self._error(f"cannot read the config store at {self.url}", e) from None

    # --- reads ---------------------------------------------------------------------------

    async def version(self) -> int:
        """The current version (0 for an empty store)."""
        rows = await self._fetch(f"SELECT version FROM {self._version} WHERE id = 1")
        return int(rows[0]["version"]) if rows else 0

    async def get(self, workspace: str, keys: Sequence[Key]) -> list[str | None]:
        """The value of each ``(type, key)``, in order; ``None`` where missing."""
        check_name("workspace", workspace)
        check_keys(keys)  # validate only: the answer has one entry per requested key
        if not keys:
            return []
        rows = await self._fetch(
            f"SELECT c.value FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS k(t, k, n)"
            f" LEFT JOIN {self._config} c"
            f" ON c.workspace = $1 AND c.type = k.t AND c.key = k.k ORDER BY k.n",
            workspace, [t for t, _ in keys], [k for _, k in keys])
        return [r["value"] for r in rows]

    async def keys(self, workspace: str, type: str) -> list[str]:
        """The keys of ``type`` in ``workspace``, sorted (by code point, as Python sorts)."""
        return sorted(await self.values(workspace, type))

    async def values(self, workspace: str, type: str) -> dict[str, str]:
        """Every ``key -> value`` of ``type`` in ``workspace``."""
        check_name("workspace", workspace)
        check_name("type", type)
        rows = await self._fetch(f"SELECT key, value FROM {self._config}"
                                 " WHERE workspace = $1 AND type = $2", workspace, type)
        return {r["key"]: r["value"] for r in rows}

    async def dump(self, workspace: str) -> dict[str, dict[str, str]]:
        """The whole workspace as ``{type: {key: value}}``."""
        check_name("workspace", workspace)
        rows = await self._fetch(f"SELECT type, key, value FROM {self._config}"
                                 " WHERE workspace = $1", workspace)
        out: dict[str, dict[str, str]] = {}
        for r in rows:
            out.setdefault(r["type"], {})[r["key"]] = r["value"]
        return out

    async def workspaces(self) -> list[str]:
        """The workspaces holding at least one item, sorted."""
        rows = await self._fetch(f"SELECT DISTINCT workspace FROM {self._config}")
        return sorted(r["workspace"] for r in rows)

    # --- writes --------------------------------------------------------------------------

    async def put(self, workspace: str, values: Sequence[Item], *,
                  request_id: str | None = None, actor: str = SYSTEM_ACTOR) -> int:
        """Write every ``(type, key, value)`` in one transaction; the new version (or, for a
        recorded ``request_id``, the version it produced, writing nothing). Audited as
        ``actor``'s."""
        check_name("workspace", workspace)
        items = check_items(values)
        check_request_id(request_id)
        check_name("actor", actor)
        sql = (f"INSERT INTO {self._config} (workspace, type, key, value)"
               f" SELECT $1, t, k, v FROM unnest($2::text[], $3::text[], $4::text[]) AS u(t, k, v)"
               f" ON CONFLICT (workspace, type, key) DO UPDATE SET value = EXCLUDED.value")

        async def write(conn: asyncpg.Connection) -> list[Key]:
            if items:
                await conn.execute(sql, workspace, [i[0] for i in items],
                                   [i[1] for i in items], [i[2] for i in items])
            return [(t, k) for t, k, _ in items]  # a put is a change even if nothing differs

        return await self._write("put", workspace, len(items), write, request_id, actor)

    async def delete(self, workspace: str, keys: Sequence[Key], *,
                     request_id: str | None = None, actor: str = SYSTEM_ACTOR) -> int:
        """Remove every ``(type, key)`` in one transaction; the new version, or
        :class:`Unchanged` when none of them exists (``request_id`` and ``actor`` as for
        :meth:`put`)."""
        check_name("workspace", workspace)
        pairs = check_keys(keys)
        check_request_id(request_id)
        check_name("actor", actor)
        sql = (f"DELETE FROM {self._config} c USING unnest($2::text[], $3::text[]) AS k(t, k)"
               f" WHERE c.workspace = $1 AND c.type = k.t AND c.key = k.k"
               f" RETURNING c.type, c.key")

        async def remove(conn: asyncpg.Connection) -> list[Key] | None:
            if not pairs:
                return None
            rows = await conn.fetch(sql, workspace, [t for t, _ in pairs],
                                    [k for _, k in pairs])
            gone = {(r["type"], r["key"]) for r in rows}
            return [p for p in pairs if p in gone] or None  # in the caller's order

        return await self._write("delete", workspace, len(pairs), remove, request_id, actor)

    async def _write(self, op: str, workspace: str, count: int,
                     change: Callable[[asyncpg.Connection], Awaitable[list[Key] | None]],
                     request_id: str | None, actor: str) -> int:
        """Run ``change`` (which returns the keys it wrote or removed, or ``None`` when it
        changed nothing) in one transaction with the version bump, the audit and the request
        record; the version to answer."""
        pool = self._require_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                # the version row's lock first: it orders concurrent writers by commit; the
                # bump itself waits until the change is known to change something
                current = await conn.fetchval(f"SELECT version FROM {self._version}"
                                              " WHERE id = 1 FOR UPDATE")
                if current is None:
                    raise ConfigError(f"the config store at {self.url} has no version row in"
                                      f" {self._version}; was it emptied by hand?")
                if request_id is not None:
                    # a new statement after the lock: sees an earlier writer's record
                    recorded = await conn.fetchval(f"SELECT version FROM {self._applied}"
                                                   " WHERE request_id = $1", request_id)
                    if recorded is not None:
                        return int(recorded)  # a replay: nothing was written
                changed = await change(conn)
                version: int
                if changed is None:
                    version = Unchanged(current)
                else:
                    version = int(await conn.fetchval(f"UPDATE {self._version}"
                                                      " SET version = version + 1 WHERE id = 1"
                                                      " RETURNING version"))
                    await self._record_audit(conn, actor, workspace, op, changed, version)
                if request_id is not None:
                    # the record, and forgetting ids too old to keep, in the same transaction
                    await conn.execute(f"WITH pruned AS (DELETE FROM {self._applied}"
                                       "  WHERE version <= $2::bigint - $3::bigint)"
                                       f" INSERT INTO {self._applied} (request_id, version)"
                                       " VALUES ($1, $2)",
                                       request_id, int(version), self.remembered_requests)
        except _DB_ERRORS as e:
            if isinstance(e, asyncpg.PostgresError) and not isinstance(
                    e, asyncpg.PostgresConnectionError):
                outcome = "nothing was written"
            else:
                # the connection broke: the COMMIT may or may not have reached the server
                outcome = "the connection failed; compare version() to see if it was written"
            raise self._error(f"cannot {op} {count} item(s) in workspace {workspace!r} of the"
                              f" config store at {self.url} ({outcome})", e) from None
        return version

    # --- audit and tokens ----------------------------------------------------------------

    async def _record_audit(self, conn: asyncpg.Connection, actor: str, workspace: str,
                            operation: str, keys: Sequence[Key], version: int | None) -> None:
        """Record one entry per key (in the caller's transaction); keep the newest
        :data:`AUDIT_KEPT`."""
        if not keys:
            return
        await conn.execute(f"INSERT INTO {self._audit}"
                           " (actor, workspace, operation, type, key, version)"
                           " SELECT $1, $2, $3, t, k, $4"
                           " FROM unnest($5::text[], $6::text[]) WITH ORDINALITY AS u(t, k, n)"
                           " ORDER BY n",
                           actor, workspace, operation, version,
                           [t for t, _ in keys], [k for _, k in keys])
        await conn.execute(f"DELETE FROM {self._audit} WHERE seq <="
                           f" (SELECT max(seq) FROM {self._audit}) - $1::bigint", AUDIT_KEPT)

    async def history(self, *, workspace: str | None = None, type: str | None = None,
                      key: str | None = None, limit: int = 20) -> list[AuditEntry]:
        """The newest ``limit`` audit entries matching the filters given, newest first."""
        limit = check_history(workspace, type, key, limit)
        rows = await self._fetch(
            "SELECT seq, at, actor, workspace, operation, type, key, version"
            f" FROM {self._audit}"
            " WHERE ($1::text IS NULL OR workspace = $1) AND ($2::text IS NULL OR type = $2)"
            " AND ($3::text IS NULL OR key = $3) ORDER BY seq DESC LIMIT $4",
            workspace, type, key, limit)
        return [AuditEntry(seq=r["seq"], at=iso_utc(r["at"]), actor=r["actor"],
                           workspace=r["workspace"], operation=r["operation"], type=r["type"],
                           key=r["key"],
                           version=None if r["version"] is None else int(r["version"]))
                for r in rows]

    async def tokens(self) -> list[StoredToken]:
        """Every stored token, by id."""
        rows = await self._fetch("SELECT id, digest, workspaces, capabilities, name, created"
                                 f" FROM {self._tokens} ORDER BY id")
        return [_token(r) for r in rows]

    async def add_token(self, token: StoredToken, *, actor: str) -> StoredToken:
        """Store ``token`` and audit it; :class:`ConfigError` if its id or digest is taken."""
        check_token(token)
        check_name("actor", actor)
        pool = self._require_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(
                    f"INSERT INTO {self._tokens} (id, digest, workspaces, capabilities, name)"
                    " VALUES ($1, $2, $3, $4, $5)"
                    " RETURNING id, digest, workspaces, capabilities, name, created",
                    token.id, token.digest, json.dumps(list(token.workspaces)),
                    json.dumps(list(token.capabilities)), token.name)
                await self._record_audit(conn, actor, ALL_WORKSPACES, "token-create",
                                         [(TOKEN_TYPE, token.id)], None)
        except asyncpg.UniqueViolationError:
            raise ConfigError(f"a token with id {token.id!r} exists already") from None
        except _DB_ERRORS as e:
            raise self._error(f"cannot store a token in the config store at {self.url}",
                              e) from None
        return _token(row)

    async def remove_token(self, id: str, *, actor: str) -> bool:
        """Delete the token ``id`` and audit it; whether there was one."""
        check_name("token id", id)
        check_name("actor", actor)
        pool = self._require_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                gone = await conn.fetchval(f"DELETE FROM {self._tokens} WHERE id = $1"
                                           " RETURNING id", id)
                if gone is not None:
                    await self._record_audit(conn, actor, ALL_WORKSPACES, "token-revoke",
                                             [(TOKEN_TYPE, id)], None)
        except _DB_ERRORS as e:
            raise self._error(f"cannot revoke a token in the config store at {self.url}",
                              e) from None
        return gone is not None


def _token(row: asyncpg.Record) -> StoredToken:
    return StoredToken(id=row["id"], digest=row["digest"],
                       workspaces=tuple(json.loads(row["workspaces"])),
                       capabilities=tuple(json.loads(row["capabilities"])), name=row["name"],
                       created=iso_utc(row["created"]))
