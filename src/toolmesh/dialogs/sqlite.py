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
what the WAL holds already. A writer that finds the WAL grown by twice the threshold while a
checkpoint runs waits for it (off the loop), so a fast writer does not outgrow it.

The retention's sweep (:mod:`toolmesh.dialogs.sqlite_upkeep`) runs every hundredth dialog
that ends and whenever a :data:`~toolmesh.dialogs.journal.SWEEP_SHARE` of the byte budget was
written (and, if one is due, when the journal closes): by count and age, then by bytes, then
the freed pages given back. It runs in steps on the worker thread, never the loop's: the
loop's writes queue behind a step, the next step behind them; a writer that finds another
share written while a sweep runs waits for it. Opening the journal runs it too, before any
dialog, with the one-time ``VACUUM`` that a file of another ``auto_vacuum`` mode needs. With a
byte budget, checkpoints come after a forty-eighth of it (1000 pages at most), and the WAL is
cut back to that size after each (``journal_size_limit``): file and WAL stay under the budget.

The tables, and why each write is one statement: :mod:`toolmesh.dialogs.sqlite_schema`.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from toolmesh.dialogs import sqlite_rows as rows
from toolmesh.dialogs import sqlite_upkeep as upkeep
from toolmesh.dialogs.journal import (
    ABANDONED,
    DEFAULT_KEEP,
    DEFAULT_MAX_AGE_DAYS,
    DEFAULT_MAX_BYTES,
    RUNNING,
    SWEEP_SHARE,
    Begun,
    Dialog,
    Entry,
    JournalError,
    check_limit,
    fold,
)
from toolmesh.dialogs.sqlite_schema import (
    INSERT_DIALOG_DUE,
    INSERT_DIALOG_NO_DUE,
    INSERT_WRITE,
    NOW,
    STATUS,
    SUMMARY,
    SUMMARY_FROM,
    create,
)
from toolmesh.files import private_dir, private_file

log = logging.getLogger("toolmesh.dialogs")


T = TypeVar("T")

#: SQLITE_BUSY, SQLITE_LOCKED: a lock another connection holds
_BUSY = (5, 6)


class _Busy(Exception):
    """The loop's own attempt found the lock held elsewhere (nothing was written)."""


#: finished dialogs between two retention sweeps
_SWEEP_EVERY = 100

#: WAL pages written between two checkpoints (SQLite's own default threshold; less under a
#: small byte budget), counted as :data:`_PAGES_PER_WRITE` a write plus one per 4 KiB of its
#: entries
_CHECKPOINT_PAGES = 1000
#: the fewest pages between checkpoints, however small the budget
_MIN_CHECKPOINT_PAGES = 32
#: the size of the pages :func:`_pages` counts
_PAGE = 4096
#: a write's pages besides its entries' text: its row's leaf, a dialog's id index (and now
#: and then a split), as measured on a growing journal
_PAGES_PER_WRITE = 2
#: how long the checkpoint's restart waits for a writer or a reader (holding writers back
#: meanwhile) before giving up until more pages were written
_RESTART_WAIT = 0.05


def _pages(*texts: str) -> int:
    """About how many WAL pages a write of ``texts`` adds."""
    return _PAGES_PER_WRITE + (sum(len(t) for t in texts) >> 12)


class SQLiteDialogJournal:
    """A :class:`~toolmesh.dialogs.journal.DialogJournal` in a SQLite file.

    ``keep``: how many of the newest dialogs are kept (and every running one);
    ``max_age_days``: for how long; ``max_bytes``: how much of the file they may take (0: no
    bound; :mod:`toolmesh.dialogs.sqlite_upkeep`).
    """

    def __init__(self, path: str | Path, *, keep: int = DEFAULT_KEEP,
                 max_age_days: float = DEFAULT_MAX_AGE_DAYS,
                 max_bytes: int = DEFAULT_MAX_BYTES, busy_timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.keep = keep
        self.max_age_days = max_age_days
        self.max_bytes = max_bytes
        #: pages (about: :func:`_pages`) written between two sweeps by bytes
        self._sweep_pages = max(1, int(max_bytes * SWEEP_SHARE) // _PAGE)
        # the WAL holds up to about three times this (what starts a checkpoint, what is
        # written while it runs, then a writer waits): two shares of the budget at most
        self._checkpoint_pages = _CHECKPOINT_PAGES if not max_bytes else max(
            _MIN_CHECKPOINT_PAGES, min(_CHECKPOINT_PAGES, self._sweep_pages * 2 // 3))
        self._bounds = upkeep.Bounds(
            keep=keep, max_age_days=max_age_days, max_bytes=max_bytes,
            spare=self._sweep_pages if max_bytes else _CHECKPOINT_PAGES)
        #: pages written (about) since the last sweep began
        self._grown = 0
        #: the last byte sweep left running dialogs alone over the budget (warned once)
        self._over = False
        #: the retention's sweep under way (steps on the worker thread)
        self._sweeping: asyncio.Task[None] | None = None
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
        #: the retention's sweep is to run when the one under way ends
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
            # opening may wait for the lock (the config store's, another process's): no
            # dialog runs yet, and this is not the loop's thread; from the first statement on,
            # which reads the file and, for a new file, writes it
            db.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            # a new file gives freed pages back on request (before its first table: a file of
            # another mode is switched below, by a VACUUM)
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            # checkpoints are the checkpoint thread's (module docstring)
            db.execute("PRAGMA wal_autocheckpoint=0")
            db.execute(f"PRAGMA journal_size_limit={self._checkpoint_pages * _PAGE}")
            if create(db):
                log.info("dialog journal at %s: moved to the layout of dialog numbers", self.path)
            # within its bounds before any dialog runs (a budget lowered, a journal written
            # before), then switched to incremental vacuum if it is not yet
            self._report(upkeep.at_open(db, self._bounds, self.path))
            db.execute("PRAGMA busy_timeout=0")
        except sqlite3.Error as e:
            db.close()
            raise JournalError(f"cannot open the dialog journal at {self.path}: {e}") from None
        return db

    async def close(self) -> None:
        if self._executor is None:
            return
        self._sweep()  # one that fell due as the last ended, or held up by a lock
        while busy := [f for f in (self._sweeping, self._checkpointing) if f is not None]:
            await asyncio.wait(busy)  # one may start the next
        executor, self._executor = self._executor, None
        if executor is None:
            return
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
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

    # --- checkpoints, on their own thread (module docstring) ----------------------------

    def _wrote(self, pages: int) -> None:
        """A write of about ``pages`` WAL pages was committed."""
        self._unchecked += pages
        self._grown += pages
        if self.max_bytes and self._grown >= self._sweep_pages:
            self._sweep_due = True
            self._sweep()
        self._upkeep()

    async def _room(self) -> None:
        """Before a write: wait for the sweep under way if another share of the budget was
        written meanwhile, and for the checkpoint under way if the WAL grew by twice what
        starts one — so that a writer faster than they are does not outgrow either."""
        if self._sweeping is not None and self.max_bytes and self._grown >= self._sweep_pages:
            await asyncio.wait([self._sweeping])
        await self._wal_room()

    async def _wal_room(self) -> None:
        if self._checkpointing is not None and self._unchecked >= 2 * self._checkpoint_pages:
            await asyncio.wait([self._checkpointing])

    def _upkeep(self) -> None:
        """Start a checkpoint when the WAL holds enough pages, on the upkeep thread, unless one
        is under way."""
        if self._checkpointing is not None or self._executor is None:
            return
        if self._unchecked < self._checkpoint_pages:
            return
        self._unchecked = 0
        if self._checkpointer is None:
            self._checkpointer = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="toolmesh-dialogs-sqlite-upkeep")
        future = asyncio.get_running_loop().run_in_executor(self._checkpointer,
                                                            self._checkpoint)
        self._checkpointing = future

        def done(future: asyncio.Future[bool]) -> None:
            self._checkpointing = None
            if future.cancelled():
                return
            error = future.exception()
            if error is not None:
                log.warning("dialog journal at %s: checkpoint failed: %s", self.path, error)
            if error is not None or not future.result():
                # a reader or a writer held it up: try again with a later write
                self._unchecked = max(self._unchecked, self._checkpoint_pages * 3 // 4)
            else:  # what fell due meanwhile
                self._upkeep()

        future.add_done_callback(done)

    def _checkpoint(self) -> bool:
        """A checkpoint (on the upkeep thread, with a connection of its own). ``False``: a
        reader or a writer held it up too long."""
        db = self._checkpoint_db
        if db is None:
            db = self._checkpoint_db = sqlite3.connect(
                self.path, isolation_level=None, timeout=_RESTART_WAIT, check_same_thread=False)
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"PRAGMA journal_size_limit={self._checkpoint_pages * _PAGE}")
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
        stored, folded = fold(question, request)
        body = rows.to_json(stored)
        await self._room()
        begun = await self._run(self._write, self._begin, id, workspace, user, question, body,
                                folded, timeout)
        if begun.fresh:
            self._wrote(_pages(question, body))
        return begun

    def _begin(self, db: sqlite3.Connection, id: str, workspace: str, user: str,
               question: str, request: str, folded: bool, timeout: float | None) -> Begun:
        inserted = self._insert(db, (id, workspace, user, question, RUNNING, request, folded,
                                     "[]", 0, 0, 0, None, None), timeout)
        n, *row, remaining = db.execute(
            f"SELECT {SUMMARY}, (julianday(d.due) - julianday('now')) * 86400.0"
            f" FROM {SUMMARY_FROM} WHERE d.id = ?", (id,)).fetchone()
        dialog = rows.dialog(row)
        if inserted:
            return Begun(dialog=dialog, entries=[], fresh=True, expired=False,
                         remaining=remaining)
        expired = dialog.running and remaining is not None and remaining < 0
        if expired:
            db.execute(f"UPDATE toolmesh_dialogs SET status = ?, updated = {NOW} WHERE n = ?",
                       (ABANDONED, n))
            row = db.execute(f"SELECT {SUMMARY} FROM {SUMMARY_FROM} WHERE d.n = ?",
                             (n,)).fetchone()
            dialog = rows.dialog(row[1:])
        return Begun(dialog=dialog, entries=rows.read_entries(db, n), fresh=False,
                     expired=expired, remaining=remaining)

    async def begin_with(self, id: str, *, workspace: str, user: str, question: str,
                         request: dict[str, Any], timeout: float | None,
                         entries: Sequence[tuple[str, dict[str, Any]]],
                         steps: int | None = None, tool_calls: int | None = None,
                         end: tuple[str, int | None, int | None] | None = None) -> bool:
        head = rows.entries_text(entries)
        stored, folded = fold(question, request)
        text = rows.to_json(stored)
        status, in_token, out_token = end if end is not None else (RUNNING, None, None)
        args = (id, workspace, user, question, status, text, folded, head, len(entries),
                steps or 0, tool_calls or 0, in_token, out_token)
        # one statement: the dialog, its first entries, its counts and its end
        await self._room()
        begun = await self._run(self._single, self._insert, args, timeout)
        self._wrote(_pages(question, head, text))
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
        text = rows.entries_text(entries)
        await self._room()
        await self._run(self._single, self._add, (len(entries), text, steps, tool_calls, None,
                                                None, None, id))
        self._wrote(_pages(text))

    async def finish(self, id: str, *, status: str,
                     entries: Sequence[tuple[str, dict[str, Any]]] = (),
                     steps: int | None = None, tool_calls: int | None = None,
                     in_token: int | None = None, out_token: int | None = None) -> None:
        text = rows.entries_text(entries)
        await self._room()
        await self._run(self._single, self._add, (len(entries), text, steps, tool_calls, status,
                                                in_token, out_token, id))
        self._wrote(_pages(text))
        self._ended()

    @staticmethod
    def _add(db: sqlite3.Connection, args: tuple[Any, ...]) -> None:
        """One write (one statement; see :data:`~toolmesh.dialogs.sqlite_schema.INSERT_WRITE`)."""
        if db.execute(INSERT_WRITE, args).rowcount == 0:
            raise sqlite3.IntegrityError(f"no dialog {args[-1]!r} to append to")

    # --- retention, off the loop (module docstring) --------------------------------------

    def _ended(self) -> None:
        self._finished += 1
        if self._finished % _SWEEP_EVERY == 1:
            self._sweep_due = True
            self._sweep()

    def _sweep(self) -> None:
        """Start the sweep that is due, unless one is under way (it starts when that ends)."""
        if self._sweeping is not None or not self._sweep_due or self._executor is None:
            return
        self._sweep_due = False
        self._grown = 0
        task = asyncio.get_running_loop().create_task(self._sweep_now())

        def done(_: asyncio.Task[None]) -> None:
            self._sweeping = None
            self._sweep()

        task.add_done_callback(done)
        self._sweeping = task

    async def _sweep_now(self) -> None:
        """By count and age, by bytes, then the free pages given back and a checkpoint, so
        that the file shrinks: in steps on the worker thread (most sweeps are one), where the
        loop's writes queue behind a step and the next step behind them."""
        given = 0
        first = True
        try:
            while True:
                more, pages = await self._off(self._sweep_step, first)
                first = False
                if pages:
                    # each page moved goes through the WAL, with the page that points to
                    # it: the checkpoint that falls due is waited for, so that it can start
                    # the WAL again
                    given += pages
                    self._unchecked += 2 * pages
                    self._upkeep()
                    if self._checkpointing is not None:
                        await asyncio.wait([self._checkpointing])
                if not more:
                    break
        except JournalError as e:
            log.warning("dialog journal at %s: retention sweep failed: %s", self.path,
                        e.message)
            return
        if given:  # the file shrinks with a checkpoint
            self._unchecked = max(self._unchecked, self._checkpoint_pages)
            self._upkeep()

    def _sweep_step(self, db: sqlite3.Connection, first: bool) -> tuple[bool, int]:
        more, pages, trimmed = upkeep.step(db, self._bounds, first=first,
                                           most=self._checkpoint_pages // 2)
        if not more:
            self._report(trimmed)
        return more, pages

    async def _off(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(db, *args)`` on the worker thread, never the loop's."""
        if self._executor is None:
            raise JournalError(f"the dialog journal at {self.path} is not open")
        self._queued += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._executor, self._patiently, self._single, fn, *args)
        finally:
            self._queued -= 1

    def _report(self, trimmed: upkeep.Trimmed) -> None:
        if trimmed.over and not self._over:  # once, until it is under again
            upkeep.warn_over(trimmed, self.path, self.max_bytes)
        self._over = trimmed.over

    # --- reads ---------------------------------------------------------------------------

    async def get(self, id: str, *, workspaces: Collection[str] | None = None,
                  ) -> tuple[Dialog, list[Entry]] | None:
        return await self._run(self._single, self._get, id, workspaces)

    @staticmethod
    def _get(db: sqlite3.Connection, id: str, workspaces: Collection[str] | None,
             ) -> tuple[Dialog, list[Entry]] | None:
        where, args = rows.where_in("d.workspace", workspaces)
        # one snapshot for the summary and the entries (another process may be writing)
        db.execute("BEGIN")
        try:
            row = db.execute(f"SELECT {SUMMARY} FROM {SUMMARY_FROM} WHERE d.id = ? AND {where}",
                             [id, *args]).fetchone()
            return None if row is None else (rows.dialog(row[1:]), rows.read_entries(db, row[0]))
        finally:
            db.execute("COMMIT")

    async def recent(self, *, workspaces: Collection[str] | None = None,
                   status: str | None = None, limit: int = 100) -> list[Dialog]:
        limit = check_limit(limit)
        return await self._run(self._single, self._recent, workspaces, status, limit)

    @staticmethod
    def _recent(db: sqlite3.Connection, workspaces: Collection[str] | None, status: str | None,
              limit: int) -> list[Dialog]:
        where, args = rows.where_in("d.workspace", workspaces)
        if status is not None:
            where += f" AND {STATUS} = ?"
            args.append(status)
        return [rows.dialog(r[1:]) for r in db.execute(
            f"SELECT {SUMMARY} FROM {SUMMARY_FROM} WHERE {where}"
            " ORDER BY d.n DESC LIMIT ?", [*args, limit])]

    async def unfinished(self) -> list[Dialog]:
        return await self._run(self._single, self._unfinished)

    @staticmethod
    def _unfinished(db: sqlite3.Connection) -> list[Dialog]:
        return [rows.dialog(r[1:]) for r in db.execute(
            f"SELECT {SUMMARY} FROM {SUMMARY_FROM} WHERE {STATUS} = ? ORDER BY d.n",
            (RUNNING,))]
