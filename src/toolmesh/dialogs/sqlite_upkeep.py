"""The SQLite journal's retention: the sweep by count and age, the byte budget, and the
incremental vacuum that gives freed pages back to the file system.

These run on the journal's upkeep thread, with a connection of its own, or while it opens
(:mod:`toolmesh.dialogs.sqlite`) — never on the event loop. Each statement is a transaction of
its own, short, so that dialogs' writes get in between.

**Bytes** are the database file's pages in use (``page_count`` − ``freelist_count``): what the
file takes on disk once its free pages are given back, indexes and SQLite's own overhead
included — and, when the journal shares the config store's file (the default), the config's
tables too (usually a few hundred KB). A sweep that finds more than
:data:`~toolmesh.dialogs.journal.KEEP_SHARE` of the budget in use drops the oldest finished
dialogs until it is under; a running dialog is never dropped for size.

**Vacuum**: with ``auto_vacuum=INCREMENTAL`` the pages a sweep frees are given back by
``PRAGMA incremental_vacuum``, in batches, and the file shrinks at the next checkpoint. A file
created with another mode (the config store's, or a journal written before) needs one
``VACUUM`` to switch: :func:`switch_to_incremental`, which the journal runs as it opens.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass

from toolmesh.dialogs.journal import KEEP_SHARE, RUNNING
from toolmesh.dialogs.sqlite_schema import SWEEP, TRIM

log = logging.getLogger("toolmesh.dialogs")

#: ``PRAGMA auto_vacuum``'s value for INCREMENTAL
INCREMENTAL = 2
#: the most dialogs one statement of the byte sweep drops
TRIM_BATCH = 256
#: the most pages one ``incremental_vacuum`` statement gives back (4 MiB of 4 KiB pages: tens
#: of milliseconds of holding writers back)
VACUUM_PAGES = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Bounds:
    """What a journal keeps (:class:`~toolmesh.dialogs.sqlite.SQLiteDialogJournal`)."""

    keep: int
    max_age_days: float
    #: 0: no bound
    max_bytes: int
    #: free pages left in the file for the writes to come: pages given back to be taken
    #: again soon cost a move each for nothing
    spare: int


@dataclass(frozen=True, slots=True)
class Trimmed:
    """What a statement of the byte sweep did."""

    #: the finished dialogs it dropped
    dropped: int
    #: bytes in use after it
    used: int
    #: still over its share of the budget, and dialogs were dropped: another statement may
    #: drop more
    more: bool
    #: still over its share of the budget, with no finished dialog left: what is left is
    #: running dialogs (or not the journal's), which are not dropped for size
    over: bool


def used_bytes(db: sqlite3.Connection) -> int:
    """Bytes of the database file in use (its pages but the free ones)."""
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    return int((pages - free) * size)


def sweep(db: sqlite3.Connection, keep: int, max_age_days: float) -> None:
    """Drop the finished dialogs but the newest ``keep`` dialogs, and those older than
    ``max_age_days``: one statement, which visits only the dialogs older than either bound
    (those it drops, and those still running) — dialogs are numbered as they begin."""
    db.execute(SWEEP, (RUNNING, keep, f"-{max_age_days * 86400:.0f} seconds"))


def trim(db: sqlite3.Connection, max_bytes: int) -> Trimmed:
    """One statement of the byte sweep: if more than
    :data:`~toolmesh.dialogs.journal.KEEP_SHARE` of ``max_bytes`` (0: no bound) is in use,
    drop the oldest finished dialogs — about half as many as the excess seems to take, at
    the average size of a dialog (:data:`TRIM_BATCH` at most), so that a few statements drop
    what is needed and at most about a dialog more."""
    used = used_bytes(db)
    target = int(max_bytes * KEEP_SHARE)
    if not max_bytes or used <= target:
        return Trimmed(0, used, more=False, over=False)
    count = db.execute("SELECT count(*) FROM toolmesh_dialogs").fetchone()[0]
    batch = min(max(1, int((used - target) / (used / max(count, 1)) / 2)), TRIM_BATCH)
    dropped = max(db.execute(TRIM, (RUNNING, batch)).rowcount, 0)
    used = used_bytes(db)
    return Trimmed(dropped, used, more=dropped > 0 and used > target,
                   over=dropped == 0 and used > target)


def incremental(db: sqlite3.Connection) -> bool:
    """Whether the file gives freed pages back on request (``auto_vacuum=INCREMENTAL``)."""
    return bool(db.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL)


def give_back(db: sqlite3.Connection, most: int = VACUUM_PAGES, spare: int = 0) -> int:
    """Give up to ``most`` free pages back to the file system (it shrinks at the next
    checkpoint), keeping ``spare`` of them for the writes to come — pages given back to be
    taken again soon cost a move each for nothing; how many were given back (0: none, or the
    file is not ``auto_vacuum=INCREMENTAL``)."""
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    if free <= spare or not incremental(db):
        return 0
    # incremental_vacuum yields a row per page: executescript steps it to the end, where
    # execute would stop after one
    db.executescript(f"PRAGMA incremental_vacuum({min(free - spare, most)})")
    return max(0, int(free - db.execute("PRAGMA freelist_count").fetchone()[0]))


def step(db: sqlite3.Connection, bounds: Bounds, *, first: bool,
         most: int) -> tuple[bool, int, Trimmed]:
    """A step of a sweep: (the first) by count and age; a statement of the byte sweep; when
    that is done, up to ``most`` free pages given back. Whether there is more to do, the
    pages given back, and where the byte sweep stands."""
    if first:
        sweep(db, bounds.keep, bounds.max_age_days)
    trimmed = trim(db, bounds.max_bytes)
    if trimmed.more:
        return True, 0, trimmed
    pages = give_back(db, most, bounds.spare)
    return pages > 0, pages, trimmed


def at_open(db: sqlite3.Connection, bounds: Bounds, where: object) -> Trimmed:
    """The whole sweep as the journal opens, before any dialog runs (a budget lowered, a
    journal written before), the switch to incremental vacuum if the file needs it, and the
    pages given back, the file shrunk at once."""
    sweep(db, bounds.keep, bounds.max_age_days)
    while (trimmed := trim(db, bounds.max_bytes)).more:
        pass
    if not incremental(db):
        switch_to_incremental(db, where)
    given = 0
    while pages := give_back(db, VACUUM_PAGES, bounds.spare):
        given += pages
    if given:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return trimmed


def warn_over(trimmed: Trimmed, where: object, max_bytes: int) -> None:
    """Say that running dialogs alone keep the journal over its budget."""
    log.warning("dialog journal at %s: %.1f MB in use, over %d%% of --dialogs-max-bytes (%.1f "
                "MB) with every finished dialog dropped: what is left is running dialogs "
                "(never dropped for size) or not the journal's", where, trimmed.used / 1e6,
                round(KEEP_SHARE * 100), max_bytes / 1e6)


def switch_to_incremental(db: sqlite3.Connection, where: object) -> bool:
    """Switch a file of another ``auto_vacuum`` mode to INCREMENTAL: one ``VACUUM``, which
    rewrites the file (its pages in use: run it after the sweeps) and holds writers back
    meanwhile; then the WAL it filled is emptied. ``False``, with a warning, if it could not
    (the disk full, a lock held): the freed pages are still reused, and the next opening
    tries again."""
    before = _file_pages(db)
    try:
        db.execute("PRAGMA auto_vacuum=INCREMENTAL")
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as e:
        log.warning("dialog journal at %s: cannot switch the file to incremental vacuum (%s); "
                    "freed space is reused but not given back until it can", where, e)
        return False
    size = db.execute("PRAGMA page_size").fetchone()[0]
    log.info("dialog journal at %s: switched to incremental vacuum (one VACUUM: %.1f MB → "
             "%.1f MB)", where, before * size / 1e6, _file_pages(db) * size / 1e6)
    return True


def _file_pages(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA page_count").fetchone()[0])
