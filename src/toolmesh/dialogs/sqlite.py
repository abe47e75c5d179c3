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
what the WAL holds already. The retention's sweep runs on that thread too, every hundredth
dialog that ends (and, if one is due, when the journal closes).

The tables, and why each write is one statement: :mod:`toolmesh.dialogs.sqlite_schema`.
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
from toolmesh.dialogs.sqlite_schema import (
    HEAD,
    INSERT_DIALOG_DUE,
    INSERT_DIALOG_NO_DUE,
    INSERT_WRITE,
    NOW,
    STATUS,
    SUMMARY,
    SUMMARY_FROM,
    SWEEP,
    WRITES,
    create,
)
from toolmesh.files import private_dir, private_file

log = logging.getLogger("toolmesh.dialogs")


def _json(value: Any) -> str:
    """JSON text of an entry or request: orjson, and text that cannot be UTF-8 (a lone
    surrogate a tool's answer held) escaped rather than refused by the database."""
    return json_codec.dumps(value).decode()


T = TypeVar("T")

#: SQLITE_BUSY, SQLITE_LOCKED: a lock another connection holds
_BUSY = (5, 6)


class _Busy(Exception):
    """The loop's own attempt found the lock held elsewhere (nothing was written)."""


#: finished dialogs between two retention sweeps
_SWEEP_EVERY = 100

#: WAL pages written between two checkpoints (SQLite's own default threshold), counted as
#: :data:`_PAGES_PER_WRITE` a write plus one per 4 KiB of its entries
_CHECKPOINT_PAGES = 1000
#: a write's pages besides its entries' text: its row's leaf, a dialog's id index (and now
#: and then a split), as measured on a growing journal
_PAGES_PER_WRITE = 2
#: how long the checkpoint's restart waits for a writer or a reader (holding writers back
#: meanwhile) before giving up until more pages were written
_RESTART_WAIT = 0.05


def _pages(*texts: str) -> int:
    """About how many WAL pages a write of ``texts`` adds."""
    return _PAGES_PER_WRITE + (sum(len(t) for t in texts) >> 12)


def _entries(entries: Sequence[tuple[str, dict[str, Any]]]) -> str:
    check_entries(entries)
    return _json([[kind, body] for kind, body in entries])


def _time(text: str | None) -> datetime | None:
    if text is None:
        return None
    return datetime.fromisoformat(text).astimezone(UTC)


def _dialog(row: sqlite3.Row | tuple[Any, ...]) -> Dialog:
    """A :data:`~toolmesh.dialogs.sqlite_schema.SUMMARY` row (after its number)."""
    (id, workspace, user, question, status, started, updated, due, steps, tool_calls,
     in_token, out_token, request) = row
    started_at = _time(started)
    updated_at = _time(updated)
    assert started_at is not None and updated_at is not None
    return Dialog(id=id, workspace=workspace, user=user, question=question, status=status,
                  started=started_at, updated=updated_at, due=_time(due), steps=steps,
                  tool_calls=tool_calls, in_token=in_token, out_token=out_token,
                  request=json.loads(request))


def _read_entries(db: sqlite3.Connection, n: int) -> list[Entry]:
    """The entries of the dialog numbered ``n``: its head's, then its writes', numbered."""
    started, head = db.execute(HEAD, (n,)).fetchone()
    found: list[Entry] = []
    for first, at, text in ((1, started, head), *db.execute(WRITES, (n,))):
        when = _time(at)
        assert when is not None
        found += (Entry(seq=seq, at=when, kind=kind, body=body)
                  for seq, (kind, body) in enumerate(json.loads(text), first))
    return found


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

    ``keep``: how many of the newest dialogs are kept (and every running one);
    ``max_age_days``: for how long.
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
        #: the retention's sweep is to run with the next upkeep
        self._sweep_due = False

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
            if create(db):
                log.info("dialog journal at %s: moved to the layout of dialog numbers", self.path)
        except sqlite3.Error as e:
            db.close()
            raise JournalError(f"cannot open the dialog journal at {self.path}: {e}") from None
        return db

    async def close(self) -> None:
        if self._executor is None:
            return
        while self._checkpointing is not None:  # one may start the next
            await asyncio.wait([self._checkpointing])
        if self._sweep_due:  # held up by a checkpoint that just ended, or by a lock
            self._sweep_due = False
            try:
                await self._run(self._single, self._sweep)
            except JournalError as e:
                log.warning("dialog journal at %s: retention sweep failed: %s", self.path,
                            e.message)
        executor, self._executor = self._executor, None
        if executor is None:
            return
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            while self._checkpointing is not None:
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

    # --- checkpoints and retention, on their own thread (module docstring) -------------

    def _wrote(self, pages: int) -> None:
        """A write of about ``pages`` WAL pages was committed."""
        self._unchecked += pages
        self._upkeep()

    def _upkeep(self) -> None:
        """Start a checkpoint when the WAL holds enough pages, and the retention's sweep when
        it is due, on the upkeep thread, unless it is busy."""
        if self._checkpointing is not None or self._executor is None:
            return
        checkpoint = self._unchecked >= _CHECKPOINT_PAGES
        sweep = self._sweep_due
        if not (checkpoint or sweep):
            return
        if checkpoint:
            self._unchecked = 0
        self._sweep_due = False
        if self._checkpointer is None:
            self._checkpointer = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="toolmesh-dialogs-sqlite-upkeep")
        future = asyncio.get_running_loop().run_in_executor(
            self._checkpointer, self._background, sweep, checkpoint)
        self._checkpointing = future

        def done(future: asyncio.Future[bool]) -> None:
            self._checkpointing = None
            if future.cancelled():
                return
            error = future.exception()
            if error is not None:
                log.warning("dialog journal at %s: upkeep failed: %s", self.path, error)
            if error is not None or not future.result():
                # a reader or a writer held it up: try again with a later write
                if checkpoint:
                    self._unchecked = max(self._unchecked, _CHECKPOINT_PAGES * 3 // 4)
                self._sweep_due = self._sweep_due or sweep
            else:  # what fell due meanwhile
                self._upkeep()

        future.add_done_callback(done)

    def _background(self, sweep: bool, checkpoint: bool) -> bool:
        """The sweep and the checkpoint asked for (on the upkeep thread, with a connection of
        its own). ``False``: a reader or a writer held one up too long."""
        db = self._checkpoint_db
        if db is None:
            db = self._checkpoint_db = sqlite3.connect(
                self.path, isolation_level=None, timeout=_RESTART_WAIT, check_same_thread=False)
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
        done = True
        if sweep:
            try:
                self._sweep(db)
            except sqlite3.OperationalError as e:
                if getattr(e, "sqlite_errorcode", None) not in _BUSY:
                    raise
                done = False
        if checkpoint:
            # writers go on meanwhile: most of the work is done without holding them back
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            # the commits made meanwhile (a few pages), with writers held back (a write of the
            # loop's waits for it, see _run): then the next commit starts the WAL again
            busy, _, _ = db.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
            done = done and not busy
        return done

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
        """``fn(db, *args)`` in one write transaction of several statements."""
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

    def _single(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(db, *args)``, whose statements are each a transaction of its own: a read, or
        a write of one statement."""
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
        inserted = self._insert(db, (id, workspace, user, question, RUNNING, request, "[]", 0,
                                     0, 0, None, None), timeout)
        n, *row, remaining = db.execute(
            f"SELECT {SUMMARY}, (julianday(d.due) - julianday('now')) * 86400.0"
            f" FROM {SUMMARY_FROM} WHERE d.id = ?", (id,)).fetchone()
        dialog = _dialog(row)
        if inserted:
            return Begun(dialog=dialog, entries=[], fresh=True, expired=False,
                         remaining=remaining)
        expired = dialog.running and remaining is not None and remaining < 0
        if expired:
            db.execute(f"UPDATE toolmesh_dialogs SET status = ?, updated = {NOW} WHERE n = ?",
                       (ABANDONED, n))
            row = db.execute(f"SELECT {SUMMARY} FROM {SUMMARY_FROM} WHERE d.n = ?",
                             (n,)).fetchone()
            dialog = _dialog(row[1:])
        return Begun(dialog=dialog, entries=_read_entries(db, n), fresh=False,
                     expired=expired, remaining=remaining)

    async def begin_with(self, id: str, *, workspace: str, user: str, question: str,
                         request: dict[str, Any], timeout: float | None,
                         entries: Sequence[tuple[str, dict[str, Any]]],
                         steps: int | None = None, tool_calls: int | None = None,
                         end: tuple[str, int | None, int | None] | None = None) -> bool:
        head = _entries(entries)
        text = _json(request)
        status, in_token, out_token = end if end is not None else (RUNNING, None, None)
        args = (id, workspace, user, question, status, text, head, len(entries), steps or 0,
                tool_calls or 0, in_token, out_token)
        # one statement: the dialog, its first entries, its counts and its end
        begun = await self._run(self._single, self._insert, args, timeout)
        self._wrote(_pages(head, text))
        if begun and end is not None:
            self._ended()
        return begun

    @staticmethod
    def _insert(db: sqlite3.Connection, args: tuple[Any, ...], timeout: float | None) -> bool:
        """Whether the dialog was begun (``False``: its id was begun before)."""
        if timeout is None:
            return db.execute(INSERT_DIALOG_NO_DUE, args).rowcount > 0
        return db.execute(INSERT_DIALOG_DUE, (*args, f"+{timeout:.3f} seconds")).rowcount > 0

    async def append(self, id: str, entries: Sequence[tuple[str, dict[str, Any]]], *,
                     steps: int | None = None, tool_calls: int | None = None) -> None:
        text = _entries(entries)
        await self._run(self._single, self._add, (len(entries), text, steps, tool_calls, None,
                                                None, None, id))
        self._wrote(_pages(text))

    async def finish(self, id: str, *, status: str,
                     entries: Sequence[tuple[str, dict[str, Any]]] = (),
                     steps: int | None = None, tool_calls: int | None = None,
                     in_token: int | None = None, out_token: int | None = None) -> None:
        text = _entries(entries)
        await self._run(self._single, self._add, (len(entries), text, steps, tool_calls, status,
                                                in_token, out_token, id))
        self._wrote(_pages(text))
        self._ended()

    @staticmethod
    def _add(db: sqlite3.Connection, args: tuple[Any, ...]) -> None:
        """One write (one statement; see :data:`~toolmesh.dialogs.sqlite_schema.INSERT_WRITE`)."""
        if db.execute(INSERT_WRITE, args).rowcount == 0:
            raise sqlite3.IntegrityError(f"no dialog {args[-1]!r} to append to")

    def _ended(self) -> None:
        self._finished += 1
        if self._finished % _SWEEP_EVERY == 1:
            self._sweep_due = True
            self._upkeep()

    def _sweep(self, db: sqlite3.Connection) -> None:
        """Drop the finished dialogs but the newest ``keep`` dialogs, and those older than
        ``max_age_days``: one statement, which visits only the dialogs older than either bound
        (those it drops, and those still running) — dialogs are numbered as they begin."""
        db.execute(SWEEP, (RUNNING, self.keep,
                           f"-{self.max_age_days * 86400:.0f} seconds"))

    # --- reads ---------------------------------------------------------------------------

    async def get(self, id: str, *, workspaces: Collection[str] | None = None,
                  ) -> tuple[Dialog, list[Entry]] | None:
        return await self._run(self._single, self._get, id, workspaces)

    @staticmethod
    def _get(db: sqlite3.Connection, id: str, workspaces: Collection[str] | None,
             ) -> tuple[Dialog, list[Entry]] | None:
        where, args = _in("d.workspace", workspaces)
        # one snapshot for the summary and the entries (another process may be writing)
        db.execute("BEGIN")
        try:
            row = db.execute(f"SELECT {SUMMARY} FROM {SUMMARY_FROM} WHERE d.id = ? AND {where}",
                             [id, *args]).fetchone()
            return None if row is None else (_dialog(row[1:]), _read_entries(db, row[0]))
        finally:
            db.execute("COMMIT")

    async def recent(self, *, workspaces: Collection[str] | None = None,
                   status: str | None = None, limit: int = 100) -> list[Dialog]:
        limit = check_limit(limit)
        return await self._run(self._single, self._recent, workspaces, status, limit)

    @staticmethod
    def _recent(db: sqlite3.Connection, workspaces: Collection[str] | None, status: str | None,
              limit: int) -> list[Dialog]:
        where, args = _in("d.workspace", workspaces)
        if status is not None:
            where += f" AND {STATUS} = ?"
            args.append(status)
        return [_dialog(r[1:]) for r in db.execute(
            f"SELECT {SUMMARY} FROM {SUMMARY_FROM} WHERE {where}"
            " ORDER BY d.n DESC LIMIT ?", [*args, limit])]

    async def unfinished(self) -> list[Dialog]:
        return await self._run(self._single, self._unfinished)

    @staticmethod
    def _unfinished(db: sqlite3.Connection) -> list[Dialog]:
        return [_dialog(r[1:]) for r in db.execute(
            f"SELECT {SUMMARY} FROM {SUMMARY_FROM} WHERE {STATUS} = ? ORDER BY d.n",
            (RUNNING,))]
