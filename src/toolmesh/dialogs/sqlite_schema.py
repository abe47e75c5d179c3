"""The SQLite journal's tables and statements, and the move of a journal kept in the first
layout to them.

Each write is one statement, touching one or two pages (what a recorded dialog costs is mostly
SQLite's work per statement and per page, not the disk's):

- a dialog's row (``toolmesh_dialogs``) is written once, when it begins, with the entries of
  its first write in it (``head``) and its summary as of then;
- every later write is one row of ``toolmesh_dialog_writes``: its entries, and the dialog's
  summary as of it (counts, status, tokens — carried on from the write before by the insert
  itself). The summary is the last write's, else the dialog row's: derived on read, so no
  write updates the dialog's row (but abandoning it, which is rare).

A dialog has a number (``n``, the table's integer key — an alias of the rowid, so ``VACUUM``
keeps it) besides its id. Ids are clients' request ids, random: rows keyed by them land on a
random page at every write. Writes are keyed by the number, which grows: they sit at the right
edge of their tree, beside those of the dialogs running with them. Only the id index takes a
random page, once a dialog. Entries are numbered from 1 across the head and the writes;
a write's ``seq`` orders the writes, its ``first`` numbers its entries.

A question is stored once: ``request`` leaves out its ``question`` field when that is the
dialog's ``question`` (``folded``; :func:`toolmesh.dialogs.journal.fold`). A journal written
before had it twice: its rows read as they are (``folded`` is added as 0), and the column is
added when it is opened.
"""

from __future__ import annotations

import sqlite3

from toolmesh.dialogs.journal import RUNNING

NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

SCHEMA = """
CREATE TABLE IF NOT EXISTS toolmesh_dialogs (
    n          INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    workspace  TEXT NOT NULL,
    user       TEXT NOT NULL,
    question   TEXT NOT NULL,
    status     TEXT NOT NULL,
    started    TEXT NOT NULL,
    updated    TEXT NOT NULL,
    due        TEXT,
    request    TEXT NOT NULL,
    head       TEXT NOT NULL,
    head_count INTEGER NOT NULL,
    steps      INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL,
    in_token   INTEGER,
    out_token  INTEGER,
    folded     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS toolmesh_dialog_writes (
    dialog     INTEGER NOT NULL REFERENCES toolmesh_dialogs (n) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    first      INTEGER NOT NULL,
    count      INTEGER NOT NULL,
    at         TEXT NOT NULL,
    entries    TEXT NOT NULL,
    steps      INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL,
    status     TEXT,
    in_token   INTEGER,
    out_token  INTEGER,
    PRIMARY KEY (dialog, seq)
) WITHOUT ROWID;
"""


def _insert_dialog(due: str) -> str:
    return ("INSERT INTO toolmesh_dialogs (id, workspace, user, question, status, request,"
            " folded, head, head_count, steps, tool_calls, in_token, out_token, started,"
            f" updated, due) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {NOW}, {NOW}, {due})"
            " ON CONFLICT (id) DO NOTHING")


#: begin a dialog: ``(id, workspace, user, question, status, request, folded, head,
#: head_count, steps, tool_calls, in_token, out_token[, "+S seconds"])``; changes no row if
#: begun before
INSERT_DIALOG_DUE = _insert_dialog("strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?)")
INSERT_DIALOG_NO_DUE = _insert_dialog("NULL")

#: the dialog's last write (none: ``p``'s columns are NULL)
_LAST = ("LEFT JOIN toolmesh_dialog_writes {w} ON {w}.dialog = d.n AND {w}.seq ="
         " (SELECT max(seq) FROM toolmesh_dialog_writes WHERE dialog = d.n)")

#: a write: ``(count, entries, steps, tool_calls, status, in_token, out_token, id)``; a
#: ``None`` keeps what the write before (or the dialog's row) says; changes no row if there
#: is no such dialog
INSERT_WRITE = (
    "INSERT INTO toolmesh_dialog_writes (dialog, seq, first, count, at, entries, steps,"
    " tool_calls, status, in_token, out_token)"
    " SELECT d.n, coalesce(p.seq + 1, 1), coalesce(p.first + p.count, d.head_count + 1), ?,"
    f" {NOW}, ?, coalesce(?, p.steps, d.steps), coalesce(?, p.tool_calls, d.tool_calls),"
    f" coalesce(?, p.status, nullif(d.status, '{RUNNING}')),"
    " coalesce(?, p.in_token, d.in_token), coalesce(?, p.out_token, d.out_token)"
    f" FROM toolmesh_dialogs d {_LAST.format(w='p')} WHERE d.id = ?")

#: the summary's columns, in :class:`~toolmesh.dialogs.journal.Dialog`'s order, after ``d.n``
STATUS = "coalesce(w.status, d.status)"
SUMMARY = (f"d.n, d.id, d.workspace, d.user, d.question, {STATUS}, d.started,"
           " max(d.updated, coalesce(w.at, '')), d.due, coalesce(w.steps, d.steps),"
           " coalesce(w.tool_calls, d.tool_calls), coalesce(w.in_token, d.in_token),"
           " coalesce(w.out_token, d.out_token), d.request, d.folded")
#: what :data:`SUMMARY` selects from
SUMMARY_FROM = f"toolmesh_dialogs d {_LAST.format(w='w')}"

#: drop the finished dialogs but the newest ``keep`` (``?`` 2) dialogs, and those that began
#: before ``now`` + ``?`` 3: of the dialogs older than either bound, a scan by number (they
#: began in that order) that stops at the first younger one
SWEEP = (
    f"DELETE FROM toolmesh_dialogs WHERE n IN (SELECT d.n FROM {SUMMARY_FROM}"
    f" WHERE {STATUS} <> ?1 AND d.n < max("
    " (SELECT max(n) FROM toolmesh_dialogs) - ?2 + 1,"
    " coalesce((SELECT n FROM toolmesh_dialogs WHERE started >="
    " strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3) ORDER BY n LIMIT 1),"
    " (SELECT max(n) FROM toolmesh_dialogs) + 1)))")

#: drop the oldest ``?2`` finished dialogs (status ``<> ?1``), oldest first (the byte
#: budget's sweep: :mod:`toolmesh.dialogs.sqlite_upkeep`)
TRIM = (f"DELETE FROM toolmesh_dialogs WHERE n IN (SELECT d.n FROM {SUMMARY_FROM}"
        f" WHERE {STATUS} <> ?1 ORDER BY d.n LIMIT ?2)")

#: a dialog's entries: its head, then its writes'
HEAD = "SELECT started, head FROM toolmesh_dialogs WHERE n = ?"
WRITES = ("SELECT first, at, entries FROM toolmesh_dialog_writes WHERE dialog = ?"
          " ORDER BY seq")


def create(db: sqlite3.Connection) -> bool:
    """Create the tables if missing, moving a journal of the first layout (a row per entry,
    keyed by the dialog's id) into them, and adding ``folded`` to one written before questions
    were stored once, in one transaction. ``True``: a journal was moved."""
    db.execute("BEGIN IMMEDIATE")
    try:
        moved = _first_layout(db)
        if moved:
            db.execute("ALTER TABLE toolmesh_dialog_entries RENAME TO toolmesh_dialog_entries_1")
            db.execute("ALTER TABLE toolmesh_dialogs RENAME TO toolmesh_dialogs_1")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        if moved:
            _move(db)
        columns = {row[1] for row in db.execute("PRAGMA table_info(toolmesh_dialogs)")}
        if "folded" not in columns:  # a journal written before questions were stored once
            db.execute("ALTER TABLE toolmesh_dialogs ADD COLUMN folded INTEGER NOT NULL"
                       " DEFAULT 0")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return moved


def _first_layout(db: sqlite3.Connection) -> bool:
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return "toolmesh_dialog_entries" in tables


def _move(db: sqlite3.Connection) -> None:
    # rowid order is the order the dialogs began (what listings and retention go by); each
    # old entry becomes a write of its own, carrying the dialog's summary
    db.execute(
        "INSERT INTO toolmesh_dialogs (n, id, workspace, user, question, status, started,"
        " updated, due, request, head, head_count, steps, tool_calls, in_token, out_token)"
        " SELECT rowid, id, workspace, user, question, status, started, updated, due, request,"
        " '[]', 0, steps, tool_calls, in_token, out_token FROM toolmesh_dialogs_1"
        " ORDER BY rowid")
    db.execute(
        "INSERT INTO toolmesh_dialog_writes (dialog, seq, first, count, at, entries, steps,"
        " tool_calls, status, in_token, out_token)"
        " SELECT d.n, e.seq, e.seq, 1, e.at, json_array(json_array(e.kind, json(e.body))),"
        f" d.steps, d.tool_calls, nullif(d.status, '{RUNNING}'), d.in_token, d.out_token"
        " FROM toolmesh_dialog_entries_1 e JOIN toolmesh_dialogs d ON d.id = e.dialog")
    db.execute("DROP TABLE toolmesh_dialog_entries_1")
    db.execute("DROP TABLE toolmesh_dialogs_1")
