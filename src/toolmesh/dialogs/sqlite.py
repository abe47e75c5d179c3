"""The SQLite dialog journal: tables beside the config store's, in the same file by default.

A write is tried at once, on the event loop's thread, without waiting for a lock (a commit
in WAL mode takes tens of microseconds; handing it to a thread and back costs more, and the
thread then competes with the loop for the GIL while dialogs run). If another connection holds
the lock — the config store's, another process's — or work is already queued on the journal's
worker thread, the work goes to that thread, which waits up to ``busy_timeout`` seconds for
the lock; so the loop never waits on a lock. ``synchronous=NORMAL`` in WAL mode: a committed
entry survives the process being killed (what the journal is for); a power cut may lose the
last few, which then run again like calls that were in flight.

Checkpoints — copying the WAL back into the database file, with an fsync of each — are not
done by the commit that happens to cross SQLite's threshold (on the loop: milliseconds every
hundred dialogs or so, more on a busy disk) but on a thread of their own, with a connection of
their own, after about as many pages as SQLite's default (``wal_autocheckpoint``, 1000): a
passive checkpoint first, which writers do not wait for; then a restart, which holds writers
back while it copies the few pages committed meanwhile, so that the WAL starts again from its
beginning instead of growing (a write that meets it waits for it without holding up the loop,
then runs on the loop's thread). A commit is as durable as before: a checkpoint only moves
what the WAL holds already.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from toolmesh import json_codec
from toolmesh.dialogs.journal import (
    ABANDONED,
    DEFAULT_KEEP,
    DEFAULT_MAX_AGE_DAYS,
    RUNNING,
    Begun,
    Dialog,
    Entry,
    JournalError,
    check_entries,
    check_limit,
)
from toolmesh.files import private_dir, private_file

log = logging.getLogger("toolmesh.dialogs")


def _json(value: Any) -> str:
    """JSON text of an entry or request: orjson, and text that cannot be UTF-8 (a lone
    surrogate a tool's answer held) escaped rather than refused by the database."""
    return json_codec.dumps(value).decode()


T = TypeVar("T")

_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS toolmesh_dialogs (
    id         TEXT PRIMARY KEY,
    workspace  TEXT NOT NULL,
    user       TEXT NOT NULL,
    question   TEXT NOT NULL,
    status     TEXT NOT NULL,
    started    TEXT NOT NULL,
    updated    TEXT NOT NULL,
    due        TEXT,
    steps      INTEGER NOT NULL DEFAULT 0,
    tool_calls INTEGER NOT NULL DEFAULT 0,
    in_token   INTEGER,
    out_token  INTEGER,
    request    TEXT NOT NULL,
    entries    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS toolmesh_dialog_entries (
    dialog TEXT NOT NULL REFERENCES toolmesh_dialogs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    at     TEXT NOT NULL,
    kind   TEXT NOT NULL,
    body   TEXT NOT NULL,
    PRIMARY KEY (dialog, seq)
) WITHOUT ROWID;
"""

_COLUMNS = ("id, workspace, user, question, status, started, updated, due, steps, tool_calls,"
            " in_token, out_token, request")

#: SQLITE_BUSY, SQLITE_LOCKED: a lock another connection holds
_BUSY = (5, 6)


class _Busy(Exception):
    """The loop's own attempt found the lock held elsewhere (nothing was written)."""


#: finished dialogs between two retention sweeps (a sweep is a couple of indexed deletes)
_SWEEP_EVERY = 100

#: WAL pages written between two checkpoints (SQLite's own default threshold), counted as
#: :data:`_PAGES_PER_WRITE` a write plus one per 4 KiB of its entries
_CHECKPOINT_PAGES = 1000
#: a write's pages besides its entries' text: the dialog's row, its id's index, the entries'
#: leaf (and now and then a split), as measured on a growing journal
_PAGES_PER_WRITE = 5
#: how long the checkpoint's restart waits for a writer or a reader (holding writers back
#: meanwhile) before giving up until more pages were written
_RESTART_WAIT = 0.05


def _insert_dialog(due: str) -> str:
    return ("INSERT INTO toolmesh_dialogs (id, workspace, user, question, status, request,"
            " steps, tool_calls, in_token, out_token, entries, started, updated, due)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {_NOW}, {_NOW}, {due})"
            " ON CONFLICT (id) DO NOTHING")


_INSERT_DIALOG_DUE = _insert_dialog("strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?)")
_INSERT_DIALOG_NO_DUE = _insert_dialog("NULL")

_ENTRY_VALUES = f"(?, ?, {_NOW}, ?, ?)"
#: entries written by one statement at most (one statement, cached, for each count up to it)
_ENTRIES_AT_ONCE = 8
_INSERT_ENTRIES = ["INSERT INTO toolmesh_dialog_entries (dialog, seq, at, kind, body) VALUES "
                   + ", ".join([_ENTRY_VALUES] * n) for n in range(_ENTRIES_AT_ONCE + 1)]


def _insert_entries(db: sqlite3.Connection, id: str, first: int,
                    rows: list[tuple[str, str]]) -> None:
    """Rows ``(kind, body)`` as entries ``first``, ``first + 1``, ... of dialog ``id``: one
    statement for up to :data:`_ENTRIES_AT_ONCE` of them."""
    for start in range(0, len(rows), _ENTRIES_AT_ONCE):
        chunk = rows[start:start + _ENTRIES_AT_ONCE]
        args: list[Any] = []
        for seq, (kind, body) in enumerate(chunk, first + start):
            args += (id, seq, kind, body)
        db.execute(_INSERT_ENTRIES[len(chunk)], args)


def _update_sql(steps: bool, tool_calls: bool, end: bool) -> str:
    sets = [f"updated = {_NOW}", "entries = entries + ?"]
    if steps:
        sets.append("steps = ?")
    if tool_calls:
        sets.append("tool_calls = ?")
    if end:
        sets.append("status = ?, in_token = ?, out_token = ?")
    return f"UPDATE toolmesh_dialogs SET {', '.join(sets)} WHERE id = ? RETURNING entries"


#: the UPDATE of an append, by which of steps, tool_calls and the end it sets
_UPDATE = {(a, b, c): _update_sql(a, b, c)
           for a in (False, True) for b in (False, True) for c in (False, True)}


def _pages(rows: list[tuple[str, str]], *texts: str) -> int:
    """About how many WAL pages a write of ``rows`` (and ``texts``) adds."""
    size = sum(len(body) for _, body in rows) + sum(len(t) for t in texts)
    return _PAGES_PER_WRITE + (size >> 12)


def _time(text: str | None) -> datetime | None:
    if text is None:
        return None
    return datetime.fromisoformat(text).astimezone(UTC)


def _dialog(row: sqlite3.Row | tuple[Any, ...]) -> Dialog:
    (id, workspace, user, question, status, started, updated, due, steps, tool_calls,
     in_token, out_token, request) = row
    started_at = _time(started)
    updated_at = _time(updated)
    assert started_at is not None and updated_at is not None
    return Dialog(id=id, workspace=workspace, user=user, question=question, status=status,
                  started=started_at, updated=updated_at, due=_time(due), steps=steps,
                  tool_calls=tool_calls, in_token=in_token, out_token=out_token,
                  request=json.loads(request))


def _entry(row: tuple[Any, ...]) -> Entry:
    seq, at, kind, body = row
    when = _time(at)
    assert when is not None
    return Entry(seq=seq, at=when, kind=kind, body=json.loads(body))


def _in(column: str, values: Collection[str] | None) -> tuple[str, list[Any]]:
    """A ``column IN (...)`` condition (always true for ``None``; never for none)."""
    if values is None:
        return "1", []
    values = list(values)
    if not values:
        return "0", []
    return f"{column} IN ({', '.join('?' * len(values))})", values


class SQLiteDialogJournal:
    """A :class:`~toolmesh.dialogs.journal.DialogJournal` in a SQLite file.

    ``keep``: how many finished dialogs are kept; ``max_age_days``: for how long.
    """

    def __init__(self, path: str | Path, *, keep: int = DEFAULT_KEEP,
                 max_age_days: float = DEFAULT_MAX_AGE_DAYS, busy_timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.keep = keep
        self.max_age_days = max_age_days
        self.busy_timeout = busy_timeout
        self._executor: ThreadPoolExecutor | None = None
        self._db: sqlite3.Connection | None = None
        self._finished = 0
        #: calls handed to the worker thread and not yet done (none: the loop may use the
        #: connection itself)
        self._queued = 0
        #: the loop's own attempt is under way: a lock held elsewhere is "busy", not waited for
        self._impatient = False
        #: WAL pages written (about: :func:`_pages`) since the last checkpoint began
        self._unchecked = 0
        #: the checkpoint under way, on its own thread and connection (module docstring)
        self._checkpointer: ThreadPoolExecutor | None = None
        self._checkpointing: asyncio.Future[bool] | None = None
        self._checkpoint_db: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SQLiteDialogJournal({str(self.path)!r})"

    async def open(self) -> None:
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1,
                                            thread_name_prefix="toolmesh-dialogs-sqlite")
        try:
            self._db = await self._run(self._connect)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    def _connect(self) -> sqlite3.Connection:
        try:
            private_dir(self.path.parent, tighten=False)
            for suffix in ("", "-wal", "-shm"):
                if suffix == "" or Path(f"{self.path}{suffix}").exists():
                    private_file(Path(f"{self.path}{suffix}"))
            # used by the loop's thread and the worker's, never at once (see _run); no lock
            # is waited for but on the worker (its calls set the timeout)
            db = sqlite3.connect(self.path, isolation_level=None, timeout=0,
                                 check_same_thread=False)
        except (OSError, sqlite3.Error) as e:
            raise JournalError(f"cannot open the dialog journal at {self.path}: {e}") from None
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            # checkpoints are the checkpoint thread's (module docstring)
            db.execute("PRAGMA wal_autocheckpoint=0")
            db.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}COMMIT;")
        except sqlite3.Error as e:
            db.close()
            raise JournalError(f"cannot open the dialog journal at {self.path}: {e}") from None
        return db

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            if self._checkpointing is not None:
                await asyncio.wait([self._checkpointing])
            await asyncio.get_running_loop().run_in_executor(checkpointer,
                                                             self._close_checkpoint_db)
            checkpointer.shutdown(wait=True)
        # the last connection to the file to close checkpoints the WAL and removes it
        await asyncio.get_running_loop().run_in_executor(executor, self._close_db)
        executor.shutdown(wait=True)

    def _close_db(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    # --- checkpoints (module docstring) --------------------------------------------------

    def _wrote(self, pages: int) -> None:
        """A write of about ``pages`` WAL pages was committed: start a checkpoint when the WAL
        holds enough of them and none is under way."""
        self._unchecked += pages
        if (self._unchecked < _CHECKPOINT_PAGES or self._checkpointing is not None
                or self._executor is None):
            return
        self._unchecked = 0
        if self._checkpointer is None:
            self._checkpointer = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="toolmesh-dialogs-sqlite-checkpoint")
        future = asyncio.get_running_loop().run_in_executor(self._checkpointer,
                                                            self._checkpoint)
        self._checkpointing = future
        future.add_done_callback(self._checkpointed)

    def _checkpointed(self, future: asyncio.Future[bool]) -> None:
        self._checkpointing = None
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            log.warning("dialog journal at %s: checkpoint failed: %s", self.path, error)
        if error is not None or not future.result():
            # a reader kept the WAL from starting again: try again a little later
            self._unchecked = max(self._unchecked, _CHECKPOINT_PAGES * 3 // 4)

    def _checkpoint(self) -> bool:
        """Copy the WAL into the database (on the checkpoint thread), then have it start again
        from its beginning. ``False``: a reader or a writer held it up too long (another try
        follows a little later)."""
        db = self._checkpoint_db
        if db is None:
            db = self._checkpoint_db = sqlite3.connect(
                self.path, isolation_level=None, timeout=_RESTART_WAIT, check_same_thread=False)
            db.execute("PRAGMA synchronous=NORMAL")
        # writers go on meanwhile: most of the work is done without holding them back
        db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        # the commits made meanwhile (a few pages), with writers held back (a write of the
        # loop's waits for it, see _run): then the next commit starts the WAL again
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        return not busy

    def _close_checkpoint_db(self) -> None:
        db, self._checkpoint_db = self._checkpoint_db, None
        if db is not None:
            db.close()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``: at once if the connection is free and the lock to be had, else on
        the worker thread (module docstring)."""
        if self._executor is None:
            raise JournalError(f"the dialog journal at {self.path} is not open")
        for _ in range(3):
            if self._queued or self._db is None:
                break
            self._impatient = True
            try:
                return fn(*args)
            except _Busy:
                pass  # the lock is held elsewhere
            finally:
                self._impatient = False
            if self._checkpointing is None:
                break  # by someone else: wait for it on the worker
            # by this journal's checkpoint, for the moment its restart takes: wait for it
            # here, then try again
            await asyncio.wait([self._checkpointing])
        self._queued += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._executor, self._patiently, fn, *args)
        finally:
            self._queued -= 1

    def _patiently(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the worker, waiting for the lock up to ``busy_timeout``."""
        db = self._db
        if db is None:
            return fn(*args)  # opening or closing: fn knows what to do
        db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        try:
            return fn(*args)
        finally:
            db.execute("PRAGMA busy_timeout = 0")

    def _write(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(db, *args)`` in one write transaction (on the worker thread)."""
        db = self._db
        if db is None:
            raise JournalError(f"the dialog journal at {self.path} is not open")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = fn(db, *args)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result
        except sqlite3.Error as e:
            raise self._failure(e) from None

    def _read(self, fn: Callable[..., T], *args: Any) -> T:
        db = self._db
        if db is None:
            raise JournalError(f"the dialog journal at {self.path} is not open")
        try:
            return fn(db, *args)
        except sqlite3.Error as e:
            raise self._failure(e) from None

    def _failure(self, e: sqlite3.Error) -> Exception:
        if self._impatient and getattr(e, "sqlite_errorcode", None) in _BUSY:
            return _Busy()
        return JournalError(f"the dialog journal at {self.path}: {e}")

    # --- writes --------------------------------------------------------------------------

    async def begin(self, id: str, *, workspace: str, user: str, question: str,
                    request: dict[str, Any], timeout: float | None) -> Begun:
        body = _json(request)
        return await self._run(self._write, self._begin, id, workspace, user, question, body,
                               timeout)

    def _begin(self, db: sqlite3.Connection, id: str, workspace: str, user: str,
               question: str, request: str, timeout: float | None) -> Begun:
        inserted = self._insert(db, id, workspace, user, question, request, timeout)
        row = db.execute(f"SELECT {_COLUMNS} FROM toolmesh_dialogs WHERE id = ?",
                         (id,)).fetchone()
        dialog = _dialog(row)
        remaining = db.execute(
            "SELECT (julianday(due) - julianday('now')) * 86400.0 FROM toolmesh_dialogs"
            " WHERE id = ?", (id,)).fetchone()[0]
        if inserted:
            return Begun(dialog=dialog, entries=[], fresh=True, expired=False,
                         remaining=remaining)
        expired = dialog.running and remaining is not None and remaining < 0
        if expired:
            db.execute(f"UPDATE toolmesh_dialogs SET status = ?, updated = {_NOW} WHERE id = ?",
                       (ABANDONED, id))
            row = db.execute(f"SELECT {_COLUMNS} FROM toolmesh_dialogs WHERE id = ?",
                             (id,)).fetchone()
            dialog = _dialog(row)
        entries = [_entry(r) for r in db.execute(
            "SELECT seq, at, kind, body FROM toolmesh_dialog_entries WHERE dialog = ?"
            " ORDER BY seq", (id,))]
        return Begun(dialog=dialog, entries=entries, fresh=False, expired=expired,
                     remaining=remaining)

    async def begin_with(self, id: str, *, workspace: str, user: str, question: str,
                         request: dict[str, Any], timeout: float | None,
                         entries: Sequence[tuple[str, dict[str, Any]]],
                         steps: int | None = None, tool_calls: int | None = None,
                         end: tuple[str, int | None, int | None] | None = None) -> bool:
        check_entries(entries)
        rows = [(kind, _json(body)) for kind, body in entries]
        text = _json(request)
        sweep = False
        if end is not None:
            self._finished += 1
            sweep = self._finished % _SWEEP_EVERY == 1
        begun = await self._run(self._write, self._begin_with, id, workspace, user, question,
                                text, timeout, rows, steps, tool_calls, end, sweep)
        self._wrote(_pages(rows, text))
        return begun

    def _begin_with(self, db: sqlite3.Connection, id: str, workspace: str, user: str,
                    question: str, request: str, timeout: float | None,
                    rows: list[tuple[str, str]], steps: int | None, tool_calls: int | None,
                    end: tuple[str, int | None, int | None] | None, sweep: bool) -> bool:
        # one statement for the dialog, its counts and its end; then its entries
        status, in_token, out_token = end if end is not None else (RUNNING, None, None)
        if not self._insert(db, id, workspace, user, question, request, timeout,
                            status=status, steps=steps or 0, tool_calls=tool_calls or 0,
                            in_token=in_token, out_token=out_token, entries=len(rows)):
            return False
        _insert_entries(db, id, 1, rows)
        if sweep:
            self._sweep(db)
        return True

    @staticmethod
    def _insert(db: sqlite3.Connection, id: str, workspace: str, user: str, question: str,
                request: str, timeout: float | None, *, status: str = RUNNING,
                steps: int = 0, tool_calls: int = 0, in_token: int | None = None,
                out_token: int | None = None, entries: int = 0) -> bool:
        args: tuple[Any, ...] = (id, workspace, user, question, status, request, steps,
                                 tool_calls, in_token, out_token, entries)
        if timeout is None:
            return db.execute(_INSERT_DIALOG_NO_DUE, args).rowcount > 0
        return db.execute(_INSERT_DIALOG_DUE, (*args, f"+{timeout:.3f} seconds")).rowcount > 0

    async def append(self, id: str, entries: Sequence[tuple[str, dict[str, Any]]], *,
                     steps: int | None = None, tool_calls: int | None = None) -> None:
        check_entries(entries)
        rows = [(kind, _json(body)) for kind, body in entries]
        await self._run(self._write, self._append, id, rows, steps, tool_calls, None)
        self._wrote(_pages(rows))

    async def finish(self, id: str, *, status: str,
                     entries: Sequence[tuple[str, dict[str, Any]]] = (),
                     steps: int | None = None, tool_calls: int | None = None,
                     in_token: int | None = None, out_token: int | None = None) -> None:
        check_entries(entries)
        rows = [(kind, _json(body)) for kind, body in entries]
        self._finished += 1
        sweep = self._finished % _SWEEP_EVERY == 1
        await self._run(self._write, self._finish, id, rows, steps, tool_calls,
                        (status, in_token, out_token), sweep)
        self._wrote(_pages(rows))

    def _finish(self, db: sqlite3.Connection, id: str, rows: list[tuple[str, str]],
                steps: int | None, tool_calls: int | None,
                end: tuple[str, int | None, int | None], sweep: bool) -> None:
        self._append(db, id, rows, steps, tool_calls, end)
        if sweep:
            self._sweep(db)

    @staticmethod
    def _append(db: sqlite3.Connection, id: str, rows: list[tuple[str, str]],
                steps: int | None, tool_calls: int | None,
                end: tuple[str, int | None, int | None] | None) -> None:
        args: list[Any] = [len(rows)]
        if steps is not None:
            args.append(steps)
        if tool_calls is not None:
            args.append(tool_calls)
        if end is not None:
            args.extend(end)
        args.append(id)
        row = db.execute(_UPDATE[steps is not None, tool_calls is not None, end is not None],
                         args).fetchone()
        if row is None:
            raise sqlite3.IntegrityError(f"no dialog {id!r} to append to")
        _insert_entries(db, id, row[0] - len(rows) + 1, rows)

    def _sweep(self, db: sqlite3.Connection) -> None:
        """Drop finished dialogs beyond the newest ``keep`` and older than ``max_age_days``."""
        db.execute("DELETE FROM toolmesh_dialogs WHERE status <> ? AND started < "
                   "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?)",
                   (RUNNING, f"-{self.max_age_days * 86400:.0f} seconds"))
        db.execute("DELETE FROM toolmesh_dialogs WHERE status <> ? AND id IN ("
                   " SELECT id FROM toolmesh_dialogs WHERE status <> ?"
                   " ORDER BY rowid DESC LIMIT -1 OFFSET ?)",
                   (RUNNING, RUNNING, self.keep))

    # --- reads ---------------------------------------------------------------------------

    async def get(self, id: str, *, workspaces: Collection[str] | None = None,
                  ) -> tuple[Dialog, list[Entry]] | None:
        return await self._run(self._read, self._get, id, workspaces)

    @staticmethod
    def _get(db: sqlite3.Connection, id: str, workspaces: Collection[str] | None,
             ) -> tuple[Dialog, list[Entry]] | None:
        where, args = _in("workspace", workspaces)
        row = db.execute(f"SELECT {_COLUMNS} FROM toolmesh_dialogs WHERE id = ? AND {where}",
                         [id, *args]).fetchone()
        if row is None:
            return None
        entries = [_entry(r) for r in db.execute(
            "SELECT seq, at, kind, body FROM toolmesh_dialog_entries WHERE dialog = ?"
            " ORDER BY seq", (id,))]
        return _dialog(row), entries

    async def recent(self, *, workspaces: Collection[str] | None = None,
                   status: str | None = None, limit: int = 100) -> list[Dialog]:
        limit = check_limit(limit)
        return await self._run(self._read, self._recent, workspaces, status, limit)

    @staticmethod
    def _recent(db: sqlite3.Connection, workspaces: Collection[str] | None, status: str | None,
              limit: int) -> list[Dialog]:
        where, args = _in("workspace", workspaces)
        if status is not None:
            where += " AND status = ?"
            args.append(status)
        return [_dialog(r) for r in db.execute(
            f"SELECT {_COLUMNS} FROM toolmesh_dialogs WHERE {where}"
            " ORDER BY rowid DESC LIMIT ?", [*args, limit])]

    async def unfinished(self) -> list[Dialog]:
        return await self._run(self._read, self._unfinished)

    @staticmethod
    def _unfinished(db: sqlite3.Connection) -> list[Dialog]:
        return [_dialog(r) for r in db.execute(
            f"SELECT {_COLUMNS} FROM toolmesh_dialogs WHERE status = ?"
            " ORDER BY rowid", (RUNNING,))]
