"""The SQLite journal's layout: a journal written in the first layout (a row per entry, keyed
by the dialog's id — what toolmesh kept until the layout of one statement per write) is moved
when it is opened, and reads back as it was written; and the retention's sweep, which runs off
the event loop, visits only the dialogs it may drop."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

from toolmesh.dialogs import RUNNING, JournalError, open_journal

#: the first layout, exactly as it was created
FIRST_LAYOUT = """
CREATE TABLE toolmesh_dialogs (
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
CREATE TABLE toolmesh_dialog_entries (
    dialog TEXT NOT NULL REFERENCES toolmesh_dialogs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    at     TEXT NOT NULL,
    kind   TEXT NOT NULL,
    body   TEXT NOT NULL,
    PRIMARY KEY (dialog, seq)
) WITHOUT ROWID;
"""


def write_first_layout(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.executescript(FIRST_LAYOUT)
        rows = [
            # id, status, steps, tool_calls, in_token, out_token, entries
            ("ended", "answer", 2, 1, 40, 12, [
                ("reply", {"step": 1, "calls": [{"id": "c1", "name": "tell-joke"}]}),
                ("result", {"call": "c1", "observation": "half \ud800 a pair"}),
                ("end", {"answer": "ha"})]),
            ("waiting", RUNNING, 1, 0, None, None, [
                ("reply", {"step": 1, "calls": [{"id": "c9", "name": "send-mail"}]}),
                ("approval", {"call": "waiting/1/c9", "digest": "d"})]),
        ]
        for i, (id, status, steps, calls, tin, tout, entries) in enumerate(rows):
            db.execute("INSERT INTO toolmesh_dialogs VALUES (?, 'default', 'alice', 'q?', ?,"
                       " ?, ?, NULL, ?, ?, ?, ?, '{\"question\": \"q?\"}', ?)",
                       (id, status, f"2026-12-0{i + 1}T10:00:00.000Z",
                        f"2026-12-0{i + 1}T10:00:05.000Z", steps, calls, tin, tout,
                        len(entries)))
            for seq, (kind, body) in enumerate(entries, 1):
                db.execute("INSERT INTO toolmesh_dialog_entries VALUES (?, ?, ?, ?, ?)",
                           (id, seq, f"2026-12-0{i + 1}T10:00:0{seq}.000Z", kind,
                            json.dumps(body)))


async def test_a_journal_of_the_first_layout_is_moved_and_reads_back_as_written(
        tmp_path: Path) -> None:
    path = tmp_path / "dialogs.db"
    write_first_layout(path)
    journal = await open_journal(str(path))
    try:
        got = await journal.get("ended")
        assert got is not None
        dialog, entries = got
        assert (dialog.status, dialog.steps, dialog.tool_calls, dialog.in_token,
                dialog.out_token) == ("answer", 2, 1, 40, 12)
        assert dialog.request == {"question": "q?"}
        assert dialog.started.isoformat() == "2026-12-01T10:00:00+00:00"
        assert [(e.seq, e.kind) for e in entries] == [(1, "reply"), (2, "result"), (3, "end")]
        assert entries[1].body == {"call": "c1", "observation": "half \ud800 a pair"}
        assert entries[2].at.isoformat() == "2026-12-01T10:00:03+00:00"
        # listed newest first, as before; the running one is still running
        assert [d.id for d in await journal.recent()] == ["waiting", "ended"]
        assert [d.id for d in await journal.unfinished()] == ["waiting"]
        # the waiting dialog goes on where it was: its next entry is numbered after its last
        await journal.append("waiting", [("answer", {"call": "waiting/1/c9"})], steps=1)
        await journal.finish("waiting", status="answer", entries=[("end", {"answer": "sent"})],
                             tool_calls=1, in_token=5)
        got = await journal.get("waiting")
        assert got is not None
        dialog, entries = got
        assert [(e.seq, e.kind) for e in entries] == [
            (1, "reply"), (2, "approval"), (3, "answer"), (4, "end")]
        assert (dialog.status, dialog.steps, dialog.tool_calls, dialog.in_token) == (
            "answer", 1, 1, 5)
    finally:
        await journal.close()
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "toolmesh_dialog_entries" not in tables and "toolmesh_dialogs_1" not in tables
    # opened again: nothing left to move, nothing lost
    journal = await open_journal(str(path))
    try:
        assert [d.id for d in await journal.recent()] == ["waiting", "ended"]
    finally:
        await journal.close()


async def test_a_write_after_a_write_without_entries_numbers_on(tmp_path: Path) -> None:
    journal = await open_journal(str(tmp_path / "d.db"))
    try:
        await journal.begin_with("d", workspace="w", user="u", question="q", request={},
                                 timeout=None, entries=[("reply", {"step": 1})], steps=1)
        await journal.append("d", [], tool_calls=3)
        await journal.append("d", [("result", {"call": "c"})])
        await journal.finish("d", status="answer")
        got = await journal.get("d")
        assert got is not None
        dialog, entries = got
        assert [(e.seq, e.kind) for e in entries] == [(1, "reply"), (2, "result")]
        assert (dialog.status, dialog.steps, dialog.tool_calls) == ("answer", 1, 3)
        # a write to a dialog that does not exist is refused, not lost silently
        with pytest.raises(JournalError, match="no dialog 'nope'"):
            await journal.append("nope", [("result", {})])
    finally:
        await journal.close()


async def test_the_sweep_drops_old_finished_dialogs_by_age_and_keeps_running_ones(
        tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    journal = await open_journal(str(path), keep=1000, max_age_days=1)
    try:
        for id in ("old-ended", "old-running", "new-ended"):
            await journal.begin_with(id, workspace="w", user="u", question="q", request={},
                                     timeout=None, entries=[])
        await journal.finish("old-ended", status="answer")
    finally:
        await journal.close()
    with contextlib.closing(sqlite3.connect(path)) as db, db:  # the first two began two days ago
        db.execute("UPDATE toolmesh_dialogs SET started = '2000-01-01T00:00:00.000Z'"
                   " WHERE id LIKE 'old-%'")
    journal = await open_journal(str(path), keep=1000, max_age_days=1)
    try:
        await journal.finish("new-ended", status="answer")  # the first finish sweeps
    finally:
        await journal.close()
    journal = await open_journal(str(path))
    try:
        assert {d.id for d in await journal.recent()} == {"old-running", "new-ended"}
    finally:
        await journal.close()
