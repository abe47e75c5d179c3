"""MCP logins in a SQLite file, for one machine (the embedded default): stdlib :mod:`sqlite3`
on one worker thread of the store's own, as the config store does, so the event loop never
waits on the disk and the connection is only used by the thread that made it.

Three tables (the seam: :mod:`toolmesh.mcp_oauth.grants.store`): ``toolmesh_mcp_grants``
(a row per workspace, principal and resource), ``toolmesh_mcp_pending`` (a row per state,
indexed by expiry) and ``toolmesh_mcp_clients`` (a row per issuer and redirect URI). A
pending login is taken with one ``DELETE ... RETURNING``: of two callbacks with the same
state, in this process or another sharing the file, one gets it. Starting a login drops the
expired ones and, past ``max_pending``, those that expire soonest — no background task.

The file is WAL-mode and made owner-only (0600, in a folder made 0700 when missing): even
sealed, what it holds is nobody else's business.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlsplit

from toolmesh.files import private_dir, private_file
from toolmesh.mcp_oauth.errors import GrantStoreError
from toolmesh.mcp_oauth.grants.memory import MAX_PENDING
from toolmesh.mcp_oauth.grants.store import StoredGrant, StoredPending

__all__ = ["SqliteGrants", "sqlite_path"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS toolmesh_mcp_grants (
    workspace  TEXT NOT NULL,
    principal  TEXT NOT NULL,
    resource   TEXT NOT NULL,
    issuer     TEXT NOT NULL,
    scope      TEXT,
    expires_at REAL,
    obtained   REAL NOT NULL,
    secret     TEXT NOT NULL,
    PRIMARY KEY (workspace, principal, resource)
);
CREATE TABLE IF NOT EXISTS toolmesh_mcp_pending (
    state      TEXT PRIMARY KEY,
    workspace  TEXT NOT NULL,
    principal  TEXT NOT NULL,
    expires_at REAL NOT NULL,
    secret     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS toolmesh_mcp_pending_expires
    ON toolmesh_mcp_pending (expires_at);
CREATE TABLE IF NOT EXISTS toolmesh_mcp_clients (
    issuer       TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    secret       TEXT NOT NULL,
    PRIMARY KEY (issuer, redirect_uri)
);
"""

_GRANT_COLUMNS = "workspace, principal, resource, issuer, scope, expires_at, obtained, secret"

#: a URL scheme at the start of a name (two letters at least: ``C:`` may be a drive)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):")


def sqlite_path(name: str) -> Path:
    """The file a SQLite store name points at: a plain path (``grants.db``,
    ``~/tm/grants.db``), ``sqlite:///abs/path.db`` or ``sqlite:relative/path.db``.

    Raises :class:`ValueError` — saying why, without repeating ``name``, which may hold a
    password — for a name with another scheme (``http://...``), a host, options or no path.
    A file whose name starts with ``word:`` is named ``./word:...``."""
    text = name.strip() if isinstance(name, str) else ""
    if not text:
        raise ValueError("no file named")
    scheme = _SCHEME.match(text)
    if scheme is None:
        return Path(text).expanduser()
    if scheme.group(1).lower() != "sqlite":
        raise ValueError(f"{scheme.group(1)}: is not a SQLite file; name one as PATH, "
                         "sqlite:///ABSOLUTE/PATH or sqlite:RELATIVE/PATH (a file whose name "
                         "holds a colon as ./NAME)")
    parts = urlsplit(text)
    if parts.netloc:
        raise ValueError("sqlite:// is followed by a host; write sqlite:///ABSOLUTE/PATH "
                         "(three slashes) or sqlite:RELATIVE/PATH")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise ValueError("a SQLite file takes no options (?...) nor fragment (#...)")
    path = unquote(parts.path)
    if path in ("", "/"):
        raise ValueError("no file named after sqlite:")
    return Path(path).expanduser()


def _grant(row: tuple) -> StoredGrant:
    return StoredGrant(workspace=row[0], principal=row[1], resource=row[2], issuer=row[3],
                       scope=row[4], expires_at=row[5], obtained=row[6], secret=row[7])


class SqliteGrants:
    """A :class:`~toolmesh.mcp_oauth.grants.store.GrantStore` in the SQLite file ``path``,
    created (owner-only) on :meth:`open` when missing.

    ``max_pending``: the most pending logins kept (the soonest to expire go first);
    ``busy_timeout``: seconds to wait for another process holding the file's write lock."""

    def __init__(self, path: Path, *, max_pending: int = MAX_PENDING,
                 busy_timeout: float = 30.0) -> None:
        if not isinstance(max_pending, int) or isinstance(max_pending, bool) or max_pending < 1:
            raise ValueError(f"max_pending must be a positive whole number, not {max_pending!r}")
        self.path = Path(path)
        self.max_pending = max_pending
        self.busy_timeout = busy_timeout
        self._executor: ThreadPoolExecutor | None = None
        self._db: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SqliteGrants({str(self.path)!r})"

    # --- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Create (if needed) and open the file and its tables; a second call does nothing."""
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1,
                                            thread_name_prefix="toolmesh-mcp-grants")
        try:
            self._db = await self._run(self._connect)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    def _connect(self) -> sqlite3.Connection:
        what = f"cannot open the MCP login store {str(self.path)!r}"
        try:
            # an existing folder is the user's choice (it may be /tmp): only a new one is
            # made private
            private_dir(self.path.parent, tighten=False)
            for suffix in ("", "-wal", "-shm"):
                # made 0600 before SQLite opens it: its -wal and -shm take the file's mode
                if suffix == "" or Path(f"{self.path}{suffix}").exists():
                    private_file(Path(f"{self.path}{suffix}"))
            # isolation_level=None: each statement commits by itself unless we BEGIN
            db = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_timeout)
        except (OSError, sqlite3.Error) as e:
            raise GrantStoreError(f"{what}: {getattr(e, 'strerror', None) or e}; check that "
                                  "its folder exists or can be made, and is writable") from None
        try:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise sqlite3.OperationalError(f"cannot switch to WAL mode (got {mode!r})")
            # FULL: a login that was answered survives a power cut too (logins are few)
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}COMMIT;")
        except sqlite3.Error as e:
            db.close()
            raise GrantStoreError(f"{what}: {e}; is it a SQLite file of toolmesh's?") from None
        return db

    async def close(self) -> None:
        """Close the file; safe to call twice."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        # on the worker, after the calls already queued
        await asyncio.get_running_loop().run_in_executor(executor, self._close_db)
        executor.shutdown(wait=True)

    def _close_db(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        if self._executor is None:
            raise GrantStoreError(f"the MCP login store {str(self.path)!r} is not open")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _call(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` on the connection (on the worker thread), its errors said as the store's."""
        db = self._db
        if db is None:  # closed while the call was queued
            raise GrantStoreError(f"the MCP login store {str(self.path)!r} is not open")
        try:
            return fn(db)
        except sqlite3.Error as e:
            raise GrantStoreError(f"cannot {op} in the MCP login store {str(self.path)!r}: "
                                  f"{e}") from None

    async def _do(self, op: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(self._call, op, fn)

    # --- grants --------------------------------------------------------------------------

    async def get(self, workspace: str, principal: str, resource: str) -> StoredGrant | None:
        """The grant of ``principal`` for ``resource`` in ``workspace``, if any."""
        row = await self._do("read a grant", lambda db: db.execute(
            f"SELECT {_GRANT_COLUMNS} FROM toolmesh_mcp_grants"
            " WHERE workspace = ? AND principal = ? AND resource = ?",
            (workspace, principal, resource)).fetchone())
        return None if row is None else _grant(row)

    async def put(self, grant: StoredGrant) -> None:
        """Keep ``grant``, replacing the one of the same workspace, principal and resource."""
        values = (grant.workspace, grant.principal, grant.resource, grant.issuer, grant.scope,
                  grant.expires_at, grant.obtained, grant.secret)
        await self._do("keep a grant", lambda db: db.execute(
            f"INSERT OR REPLACE INTO toolmesh_mcp_grants ({_GRANT_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", values))

    async def delete(self, workspace: str, principal: str, resource: str | None = None) -> int:
        """Forget ``principal``'s grant for ``resource`` (all of theirs in ``workspace`` when
        ``None``); how many were forgotten."""
        args: tuple[str, ...]
        if resource is None:
            sql, args = ("DELETE FROM toolmesh_mcp_grants WHERE workspace = ? AND principal = ?",
                         (workspace, principal))
        else:
            sql, args = ("DELETE FROM toolmesh_mcp_grants"
                         " WHERE workspace = ? AND principal = ? AND resource = ?",
                         (workspace, principal, resource))
        return await self._do("forget grants", lambda db: db.execute(sql, args).rowcount)

    async def list(self, workspace: str, principal: str | None = None) -> list[StoredGrant]:
        """The grants of ``workspace`` (of ``principal`` only, when given), by resource then
        principal (code point order, as Python sorts)."""
        args: tuple[str, ...] = (workspace,)
        where = "workspace = ?"
        if principal is not None:
            where, args = "workspace = ? AND principal = ?", (workspace, principal)
        rows = await self._do("list grants", lambda db: db.execute(
            f"SELECT {_GRANT_COLUMNS} FROM toolmesh_mcp_grants WHERE {where}"
            # BINARY collation: UTF-8 bytes, so code point order
            " ORDER BY resource, principal", args).fetchall())
        return [_grant(r) for r in rows]

    # --- pending logins ------------------------------------------------------------------

    async def put_pending(self, login: StoredPending) -> None:
        """Keep a login started (replacing one of the same state); drop the expired ones and,
        past ``max_pending``, the others that expire soonest."""
        now = time.time()

        def put(db: sqlite3.Connection) -> None:
            # one write transaction: the count and the drop see no other writer in between
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM toolmesh_mcp_pending WHERE expires_at < ?", (now,))
                db.execute("INSERT OR REPLACE INTO toolmesh_mcp_pending"
                           " (state, workspace, principal, expires_at, secret)"
                           " VALUES (?, ?, ?, ?, ?)",
                           (login.state, login.workspace, login.principal, login.expires_at,
                            login.secret))
                db.execute("DELETE FROM toolmesh_mcp_pending WHERE state IN ("
                           " SELECT state FROM toolmesh_mcp_pending WHERE state <> ?"
                           " ORDER BY expires_at, state LIMIT max(0,"
                           "  (SELECT count(*) FROM toolmesh_mcp_pending) - ?))",
                           (login.state, self.max_pending))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # a failed COMMIT may have rolled back already
                    db.execute("ROLLBACK")
                raise

        await self._do("keep a login started", put)

    async def take_pending(self, state: str, *, now: float) -> StoredPending | None:
        """The login of ``state``, removed in the same statement (so once only); ``None``
        when there is none or it expired before ``now``."""
        row = await self._do("take a login started", lambda db: db.execute(
            "DELETE FROM toolmesh_mcp_pending WHERE state = ?"
            " RETURNING workspace, principal, expires_at, secret", (state,)).fetchone())
        if row is None or row[2] < now:
            return None
        return StoredPending(state=state, workspace=row[0], principal=row[1],
                             expires_at=row[2], secret=row[3])

    # --- client registrations ------------------------------------------------------------

    async def get_client(self, issuer: str, redirect_uri: str) -> str | None:
        """The registration kept for ``issuer`` and ``redirect_uri``, if any."""
        row = await self._do("read a client registration", lambda db: db.execute(
            "SELECT secret FROM toolmesh_mcp_clients WHERE issuer = ? AND redirect_uri = ?",
            (issuer, redirect_uri)).fetchone())
        return None if row is None else row[0]

    async def put_client(self, issuer: str, redirect_uri: str, secret: str) -> None:
        """Keep a registration, replacing one of the same issuer and redirect URI."""
        await self._do("keep a client registration", lambda db: db.execute(
            "INSERT OR REPLACE INTO toolmesh_mcp_clients (issuer, redirect_uri, secret)"
            " VALUES (?, ?, ?)", (issuer, redirect_uri, secret)))
