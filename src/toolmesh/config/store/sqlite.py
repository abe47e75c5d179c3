"""The SQLite config store: one file, stdlib :mod:`sqlite3`, for a single machine.

All database work runs on one dedicated worker thread, so the event loop never blocks and
the connection is only ever used by the thread that made it. Writes start with
``BEGIN IMMEDIATE`` (take the write lock first), so several processes sharing the file still
get distinct, gapless versions; they wait up to ``busy_timeout`` seconds for each other.
The write lock also makes the request-id check and the write one step: two processes
handling the same request id cannot both find it unrecorded.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

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
)
from toolmesh.files import private_dir, private_file

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS toolmesh_config (
    workspace TEXT NOT NULL,
    type      TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (workspace, type, key)
);
CREATE TABLE IF NOT EXISTS toolmesh_config_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT OR IGNORE INTO toolmesh_config_version (id, version) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS toolmesh_config_applied (
    request_id TEXT PRIMARY KEY,
    version    INTEGER NOT NULL,
    applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX IF NOT EXISTS toolmesh_config_applied_version
    ON toolmesh_config_applied (version);
CREATE TABLE IF NOT EXISTS toolmesh_config_audit (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    actor     TEXT NOT NULL,
    workspace TEXT NOT NULL,
    operation TEXT NOT NULL,
    type      TEXT NOT NULL,
    key       TEXT NOT NULL,
    version   INTEGER
);
CREATE INDEX IF NOT EXISTS toolmesh_config_audit_item
    ON toolmesh_config_audit (type, key, seq);
CREATE TABLE IF NOT EXISTS toolmesh_tokens (
    id           TEXT PRIMARY KEY,
    digest       TEXT NOT NULL UNIQUE,
    workspaces   TEXT NOT NULL,
    capabilities TEXT NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    created      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
"""

_AUDIT = ("INSERT INTO toolmesh_config_audit (actor, workspace, operation, type, key, version)"
          " VALUES (?, ?, ?, ?, ?, ?)")
_AUDIT_COLUMNS = "seq, at, actor, workspace, operation, type, key, version"

_BUMP = "UPDATE toolmesh_config_version SET version = version + 1 WHERE id = 1 RETURNING version"


class SQLiteConfigStore:
    """A :class:`~toolmesh.config.store.base.ConfigStore` in a SQLite file (WAL mode).

    The file and its parent directories are created on :meth:`open` if missing — the
    folder 0700 and the files (the database, its WAL and shared-memory files) 0600, as they
    may hold secrets; existing files with wider modes are tightened, with a log line.
    ``remembered_requests``: how many versions back request ids are recognised.
    """

    def __init__(self, path: str | Path, *, busy_timeout: float = 30.0,
                 remembered_requests: int = REMEMBERED_REQUESTS) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.remembered_requests = check_remembered(remembered_requests)
        self._executor: ThreadPoolExecutor | None = None
        self._db: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SQLiteConfigStore({str(self.path)!r})"

    # --- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Create (if needed) and open the database file."""
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1,
                                            thread_name_prefix="toolmesh-config-sqlite")
        try:
            self._db = await self._run(self._connect)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    def _connect(self) -> sqlite3.Connection:
        try:
            # an existing folder is the user's choice (it may be /tmp): only new ones are made
            # private; the data folder itself is made private by the command that names it
            private_dir(self.path.parent, tighten=False)
            for suffix in ("", "-wal", "-shm"):
                # SQLite creates the -wal and -shm files with the database file's mode
                if suffix == "" or Path(f"{self.path}{suffix}").exists():
                    private_file(Path(f"{self.path}{suffix}"))
            # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a put is exactly one
            # transaction including the version bump
            db = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_timeout)
        except (OSError, sqlite3.Error) as e:
            raise ConfigError(f"cannot open the config store at {self.path}: {e}") from None
        try:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise sqlite3.OperationalError(f"cannot switch to WAL mode (got {mode!r})")
            # FULL: a put that returned survives a power cut, not just a process crash
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}COMMIT;")
        except sqlite3.Error as e:
            db.close()
            raise ConfigError(f"cannot open the config store at {self.path}: {e}") from None
        return db

    async def close(self) -> None:
        """Close the database; safe to call twice."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        # on the worker, so calls already queued still run against the open connection
        await asyncio.get_running_loop().run_in_executor(executor, self._close_db)
        executor.shutdown(wait=True)

    def _close_db(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        if self._executor is None:
            raise ConfigError(f"the config store at {self.path} is not open")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _conn(self) -> sqlite3.Connection:
        # called on the worker thread; the store may have been closed meanwhile
        if self._db is None:
            raise ConfigError(f"the config store at {self.path} is not open")
        return self._db

    # --- reads ---------------------------------------------------------------------------

    async def version(self) -> int:
        """The current version (0 for an empty store)."""
        return await self._run(self._read, self._version)

    async def get(self, workspace: str, keys: Sequence[Key]) -> list[str | None]:
        """The value of each ``(type, key)``, in order; ``None`` where missing."""
        check_name("workspace", workspace)
        # validate each pair but keep the caller's order and duplicates: one answer per key
        check_keys(keys)
        return await self._run(self._read, self._get, workspace, list(keys))

    async def keys(self, workspace: str, type: str) -> list[str]:
        """The keys of ``type`` in ``workspace``, sorted."""
        return sorted(await self.values(workspace, type))

    async def values(self, workspace: str, type: str) -> dict[str, str]:
        """Every ``key -> value`` of ``type`` in ``workspace``."""
        check_name("workspace", workspace)
        check_name("type", type)
        rows = await self._run(self._read, self._select,
                               "SELECT key, value FROM toolmesh_config"
                               " WHERE workspace = ? AND type = ?", (workspace, type))
        return dict(rows)

    async def dump(self, workspace: str) -> dict[str, dict[str, str]]:
        """The whole workspace as ``{type: {key: value}}``."""
        check_name("workspace", workspace)
        rows = await self._run(self._read, self._select,
                               "SELECT type, key, value FROM toolmesh_config"
                               " WHERE workspace = ?", (workspace,))
        out: dict[str, dict[str, str]] = {}
        for t, k, v in rows:
            out.setdefault(t, {})[k] = v
        return out

    async def workspaces(self) -> list[str]:
        """The workspaces holding at least one item, sorted."""
        rows = await self._run(self._read, self._select,
                               "SELECT DISTINCT workspace FROM toolmesh_config", ())
        return sorted(w for (w,) in rows)

    def _read(self, fn: Callable[..., T], *args: object) -> T:
        db = self._conn()
        try:
            # one read transaction: a multi-statement read sees a single snapshot
            db.execute("BEGIN")
            try:
                return fn(db, *args)
            finally:
                db.execute("COMMIT")
        except sqlite3.Error as e:
            raise ConfigError(f"cannot read the config store at {self.path}: {e}") from None

    @staticmethod
    def _version(db: sqlite3.Connection) -> int:
        row = db.execute("SELECT version FROM toolmesh_config_version WHERE id = 1").fetchone()
        return 0 if row is None else int(row[0])

    @staticmethod
    def _select(db: sqlite3.Connection, sql: str, params: tuple[str, ...]) -> list[tuple]:
        return db.execute(sql, params).fetchall()

    @staticmethod
    def _get(db: sqlite3.Connection, workspace: str, keys: list[Key]) -> list[str | None]:
        sql = "SELECT value FROM toolmesh_config WHERE workspace = ? AND type = ? AND key = ?"
        out: list[str | None] = []
        for t, k in keys:
            row = db.execute(sql, (workspace, t, k)).fetchone()
            out.append(None if row is None else row[0])
        return out

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
        rows = [(workspace, t, k, v) for t, k, v in items]

        def write(db: sqlite3.Connection) -> list[Key]:
            db.executemany("INSERT INTO toolmesh_config (workspace, type, key, value)"
                           " VALUES (?, ?, ?, ?) ON CONFLICT (workspace, type, key)"
                           " DO UPDATE SET value = excluded.value", rows)
            return [(t, k) for t, k, _ in items]  # a put is a change even if nothing differs

        return await self._run(self._write, "put", workspace, len(items), write, request_id,
                               actor)

    async def delete(self, workspace: str, keys: Sequence[Key], *,
                     request_id: str | None = None, actor: str = SYSTEM_ACTOR) -> int:
        """Remove every ``(type, key)`` in one transaction; the new version, or
        :class:`Unchanged` when none of them exists (``request_id`` and ``actor`` as for
        :meth:`put`)."""
        check_name("workspace", workspace)
        pairs = check_keys(keys)
        check_request_id(request_id)
        check_name("actor", actor)

        def remove(db: sqlite3.Connection) -> list[Key] | None:
            sql = "DELETE FROM toolmesh_config WHERE workspace = ? AND type = ? AND key = ?"
            removed = [(t, k) for t, k in pairs if db.execute(sql, (workspace, t, k)).rowcount]
            return removed or None

        return await self._run(self._write, "delete", workspace, len(pairs), remove,
                               request_id, actor)

    def _write(self, op: str, workspace: str, count: int,
               change: Callable[[sqlite3.Connection], list[Key] | None],
               request_id: str | None, actor: str) -> int:
        """Run ``change`` (which returns the keys it wrote or removed, or ``None`` when it
        changed nothing) in one write transaction with the version bump, the audit and the
        request record; the version to answer."""
        db = self._conn()
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise ConfigError(f"cannot {op} in the config store at {self.path}"
                              f" (nothing was written): {e}") from None
        try:
            # under the write lock: no other writer can record this id between check and write,
            # nor bump the version between the change and its bump
            recorded = None if request_id is None else db.execute(
                "SELECT version FROM toolmesh_config_applied WHERE request_id = ?",
                (request_id,)).fetchone()
            if recorded is not None:
                db.execute("ROLLBACK")  # nothing was written: a replay
                return int(recorded[0])
            changed = change(db)
            version: int
            if changed is None:
                version = Unchanged(self._version(db))
            else:
                row = db.execute(_BUMP).fetchone()
                if row is None:
                    raise ConfigError(f"the config store at {self.path} has no version row in"
                                      " toolmesh_config_version; was it emptied by hand?")
                version = int(row[0])
                self._audit(db, [(actor, workspace, op, t, k, version) for t, k in changed])
            if request_id is not None:
                self._record(db, request_id, version)
            db.execute("COMMIT")
        except BaseException as e:
            if db.in_transaction:  # a failed COMMIT may already have rolled back
                db.execute("ROLLBACK")
            if not isinstance(e, sqlite3.Error):
                raise
            raise ConfigError(f"cannot {op} {count} item(s) in workspace {workspace!r} of the"
                              f" config store at {self.path} (nothing was written): {e}"
                              ) from None
        return version

    @staticmethod
    def _audit(db: sqlite3.Connection, entries: list[tuple[str | int | None, ...]]) -> None:
        """Record ``entries`` (actor, workspace, operation, type, key, version); keep only the
        newest :data:`AUDIT_KEPT`."""
        if not entries:
            return
        db.executemany(_AUDIT, entries)
        db.execute("DELETE FROM toolmesh_config_audit WHERE seq <= "
                   "(SELECT max(seq) FROM toolmesh_config_audit) - ?", (AUDIT_KEPT,))

    def _record(self, db: sqlite3.Connection, request_id: str, version: int) -> None:
        """Remember that ``request_id`` produced ``version``; forget ids too old to keep."""
        db.execute("DELETE FROM toolmesh_config_applied WHERE version <= ?",
                   (version - self.remembered_requests,))
        db.execute("INSERT INTO toolmesh_config_applied (request_id, version) VALUES (?, ?)",
                   (request_id, int(version)))

    # --- audit and tokens ----------------------------------------------------------------

    async def history(self, *, workspace: str | None = None, type: str | None = None,
                      key: str | None = None, limit: int = 20) -> list[AuditEntry]:
        """The newest ``limit`` audit entries matching the filters given, newest first."""
        limit = check_history(workspace, type, key, limit)
        where = [(f"{column} = ?", value) for column, value in
                 (("workspace", workspace), ("type", type), ("key", key)) if value is not None]
        sql = (f"SELECT {_AUDIT_COLUMNS} FROM toolmesh_config_audit"
               + (" WHERE " + " AND ".join(c for c, _ in where) if where else "")
               + " ORDER BY seq DESC LIMIT ?")
        rows = await self._run(self._read, self._select, sql,
                               (*(v for _, v in where), limit))
        return [AuditEntry(seq=r[0], at=r[1], actor=r[2], workspace=r[3], operation=r[4],
                           type=r[5], key=r[6], version=r[7]) for r in rows]

    async def tokens(self) -> list[StoredToken]:
        """Every stored token, by id."""
        rows = await self._run(self._read, self._select,
                               "SELECT id, digest, workspaces, capabilities, name, created"
                               " FROM toolmesh_tokens ORDER BY id", ())
        return [StoredToken(id=r[0], digest=r[1], workspaces=tuple(json.loads(r[2])),
                            capabilities=tuple(json.loads(r[3])), name=r[4], created=r[5])
                for r in rows]

    async def add_token(self, token: StoredToken, *, actor: str) -> StoredToken:
        """Store ``token`` and audit it; :class:`ConfigError` if its id or digest is taken."""
        check_token(token)
        check_name("actor", actor)
        return await self._run(self._add_token, token, actor)

    async def remove_token(self, id: str, *, actor: str) -> bool:
        """Delete the token ``id`` and audit it; whether there was one."""
        check_name("token id", id)
        check_name("actor", actor)
        return await self._run(self._remove_token, id, actor)

    def _add_token(self, token: StoredToken, actor: str) -> StoredToken:
        def add(db: sqlite3.Connection) -> StoredToken:
            try:
                created = db.execute(
                    "INSERT INTO toolmesh_tokens (id, digest, workspaces, capabilities, name)"
                    " VALUES (?, ?, ?, ?, ?) RETURNING created",
                    (token.id, token.digest, json.dumps(list(token.workspaces)),
                     json.dumps(list(token.capabilities)), token.name)).fetchone()[0]
            except sqlite3.IntegrityError:
                raise ConfigError(f"a token with id {token.id!r} exists already") from None
            self._audit(db, [(actor, ALL_WORKSPACES, "token-create", TOKEN_TYPE, token.id,
                              None)])
            return StoredToken(id=token.id, digest=token.digest, workspaces=token.workspaces,
                               capabilities=token.capabilities, name=token.name,
                               created=created)

        return self._transaction("store a token", add)

    def _remove_token(self, id: str, actor: str) -> bool:
        def remove(db: sqlite3.Connection) -> bool:
            gone = db.execute("DELETE FROM toolmesh_tokens WHERE id = ?", (id,)).rowcount > 0
            if gone:
                self._audit(db, [(actor, ALL_WORKSPACES, "token-revoke", TOKEN_TYPE, id, None)])
            return gone

        return self._transaction("revoke a token", remove)

    def _transaction(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` in one write transaction (on the worker thread)."""
        db = self._conn()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = fn(db)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise ConfigError(f"cannot {what} in the config store at {self.path}"
                              f" (nothing was written): {e}") from None
        return result
