"""The journal bounded by bytes (issue 42, part 6): each question stored once, the oldest
finished dialogs dropped when the journal passes its byte budget (never a running one), and
in SQLite the freed pages given back so that the file shrinks — measured on disk. Journals
written by the version before (the question twice, no sizes, a SQLite file that never gave
pages back) open, read back as written, and come under the budget."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import asyncpg
import pytest

from tests.dialogs.test_journal import POSTGRES_URL
from toolmesh.dialogs import RUNNING, DialogJournal, open_journal

MiB = 1024 * 1024

#: the SQLite layout of the version before: a question in ``question`` and in ``request``
SECOND_LAYOUT = """
CREATE TABLE toolmesh_dialogs (
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
    out_token  INTEGER
);
CREATE TABLE toolmesh_dialog_writes (
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


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def on_disk(path: Path) -> tuple[int, int]:
    """The sizes of the database file and of its WAL (0: none)."""
    wal = Path(f"{path}-wal")
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0


async def a_dialog(journal: DialogJournal, id: str, question: str, *,
                   finish: bool = True) -> None:
    """A dialog as the agent writes one that answers after one call: its reply, then its
    result and its end; the request holds the question, as an agent request does."""
    await journal.begin_with(id, workspace="default", user="alice", question=question,
                             request={"question": question, "user": "alice",
                                      "streaming": False},
                             timeout=60, entries=[("reply", {"step": 1, "thought": "look"})],
                             steps=1)
    if finish:
        await journal.finish(id, status="answer", entries=[
            ("result", {"call": "c1", "observation": "found"}),
            ("end", {"message": {"message_type": "answer", "content": "done"}})],
            tool_calls=1)


# --- SQLite ---------------------------------------------------------------------------------

async def test_sqlite_120_large_dialogs_stay_under_the_byte_budget_on_disk(
        tmp_path: Path) -> None:
    """The issue's run at a smaller scale: 120 dialogs of 200 KB questions (24 MB of
    questions, 48 MB as the version before stored them) with ``keep=50`` and an 8 MiB budget.
    The file and its WAL never take more than the budget; the newest dialogs are kept, and a
    dialog still running from the start is not dropped however old."""
    path = tmp_path / "config.db"
    budget = 8 * MiB
    journal = await open_journal(str(path), keep=50, max_bytes=budget)
    try:
        await a_dialog(journal, "waiting", "w" * 200_000, finish=False)
        worst = 0
        for i in range(120):
            await a_dialog(journal, f"d{i}", f"{i}:" + "q" * 200_000)
            await asyncio.sleep(0)  # the loop's other work (an agent's are bus messages)
            db, wal = on_disk(path)
            assert db <= budget, f"after dialog {i}: the file is {db} bytes"
            worst = max(worst, db + wal)
        assert worst <= budget, f"file and WAL took {worst} bytes at most"
        kept = {d.id for d in await journal.recent(limit=1000)}
    finally:
        await journal.close()
    assert "waiting" in kept and {"d119", "d118", "d117"} <= kept and "d0" not in kept
    # about as many as fit in three quarters of the budget (each takes ~200 KB): the bytes
    # bound binds, not the count
    assert 20 <= len(kept) <= 40, kept
    assert path.stat().st_size <= budget


async def test_sqlite_a_question_is_stored_once_and_read_back_in_the_request(
        tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    journal = await open_journal(str(path))
    try:
        await a_dialog(journal, "once", "what is the weather?")
        # a request whose question is not the dialog's keeps its own
        await journal.begin("other", workspace="default", user="u", question="summary",
                            request={"question": "the asked one", "state": "s"}, timeout=None)
        for id, request in [("once", {"question": "what is the weather?", "user": "alice",
                                      "streaming": False}),
                            ("other", {"question": "the asked one", "state": "s"})]:
            found = await journal.get(id)
            assert found is not None and found[0].request == request
        assert (await journal.unfinished())[0].request == {"question": "the asked one",
                                                           "state": "s"}
    finally:
        await journal.close()
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        stored = dict(db.execute("SELECT id, request FROM toolmesh_dialogs"))
    assert "question" not in json.loads(stored["once"])
    assert json.loads(stored["other"])["question"] == "the asked one"


def write_second_layout(path: Path, *, dialogs: int, size: int) -> None:
    """A journal as the version before wrote it: ``dialogs`` finished ones of ``size``-byte
    questions (each also in the request), then one still running; the file in SQLite's
    default ``auto_vacuum=NONE``."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(SECOND_LAYOUT)
        for n in range(1, dialogs + 2):
            running = n == dialogs + 1
            question = f"{n}:" + "q" * size
            db.execute(
                "INSERT INTO toolmesh_dialogs VALUES (?, ?, 'default', 'alice', ?, ?,"
                " '2026-12-01T10:00:00.000Z', '2026-12-01T10:00:01.000Z', NULL, ?, ?, 1, 1,"
                " 0, NULL, NULL)",
                (n, f"old{n}", question, RUNNING,
                 json.dumps({"question": question, "user": "alice"}),
                 json.dumps([["reply", {"step": 1}]])))
            if not running:
                db.execute("INSERT INTO toolmesh_dialog_writes VALUES (?, 1, 2, 1,"
                           " '2026-12-01T10:00:02.000Z', ?, 1, 0, 'answer', 7, 3)",
                           (n, json.dumps([["end", {"answer": f"a{n}"}]])))
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 0


async def test_sqlite_a_journal_of_the_version_before_opens_reads_back_and_shrinks(
        tmp_path: Path) -> None:
    """40 dialogs of 100 KB questions stored twice (8 MB) in a file that never gave pages
    back, opened with a 2 MiB budget: it reads back as written, the oldest finished dialogs
    go, the file is switched to incremental vacuum and is under the budget once opened; a
    dialog written then stores its question once."""
    path = tmp_path / "config.db"
    write_second_layout(path, dialogs=40, size=100_000)
    assert path.stat().st_size > 8_000_000
    journal = await open_journal(str(path), max_bytes=2 * MiB)
    try:
        assert path.stat().st_size <= 2 * MiB
        found = await journal.get("old40")
        assert found is not None
        dialog, entries = found
        assert dialog.request == {"question": dialog.question, "user": "alice"}
        assert (dialog.status, dialog.in_token, dialog.out_token) == ("answer", 7, 3)
        assert [(e.seq, e.kind, e.body) for e in entries] == [
            (1, "reply", {"step": 1}), (2, "end", {"answer": "a40"})]
        assert [d.id for d in await journal.unfinished()] == ["old41"]  # kept, running
        assert await journal.get("old1") is None  # the oldest, finished: dropped
        await a_dialog(journal, "new", "n" * 1000)
    finally:
        await journal.close()
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        assert db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL
        request = db.execute("SELECT request FROM toolmesh_dialogs WHERE id = 'new'").fetchone()
        assert "question" not in json.loads(request[0])
    assert path.stat().st_size <= 2 * MiB


async def test_sqlite_the_file_shrinks_when_dialogs_are_dropped(tmp_path: Path) -> None:
    """Without the vacuum, dropping dialogs frees pages the file keeps: here, 30 dialogs of
    200 KB, then a budget of 1 MiB — the file goes from over 6 MB to under 1 MiB."""
    path = tmp_path / "d.db"
    journal = await open_journal(str(path), max_bytes=0)
    try:
        for i in range(30):
            await a_dialog(journal, f"d{i}", "x" * 200_000)
    finally:
        await journal.close()
    assert path.stat().st_size > 6_000_000
    journal = await open_journal(str(path), max_bytes=1 * MiB)
    try:
        assert path.stat().st_size <= 1 * MiB
        assert [d.id for d in await journal.recent(limit=3)] == ["d29", "d28", "d27"]
    finally:
        await journal.close()


async def test_sqlite_running_dialogs_are_never_dropped_for_size(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Running dialogs alone over the budget: none is dropped (the journal goes over, with a
    warning that says why); the finished ones go."""
    path = tmp_path / "d.db"
    journal = await open_journal(str(path), max_bytes=1 * MiB)
    try:
        for i in range(8):
            await a_dialog(journal, f"run{i}", "r" * 200_000, finish=False)
        for i in range(3):
            await a_dialog(journal, f"done{i}", "d" * 200_000)
    finally:
        await journal.close()
    journal = await open_journal(str(path), max_bytes=1 * MiB)
    try:
        assert {d.id for d in await journal.unfinished()} == {f"run{i}" for i in range(8)}
        assert {d.id for d in await journal.recent(status="answer")} == set()
    finally:
        await journal.close()
    assert any("running dialogs (never dropped for size)" in r.getMessage()
               for r in caplog.records), caplog.text


async def test_no_byte_bound_and_bad_bounds(tmp_path: Path) -> None:
    from toolmesh.dialogs import JournalError

    for bad in (-1, 1.5, True):
        with pytest.raises(JournalError, match="bytes dialogs may take"):
            await open_journal(str(tmp_path / "d.db"), max_bytes=bad)  # type: ignore[arg-type]
    path = tmp_path / "d.db"
    journal = await open_journal(str(path), max_bytes=0)
    try:
        for i in range(12):
            await a_dialog(journal, f"d{i}", "x" * 100_000)
        assert len(await journal.recent()) == 12  # 0: no bound by bytes
    finally:
        await journal.close()


# --- PostgreSQL ------------------------------------------------------------------------------

@pytest.fixture
async def pg_url() -> AsyncIterator[tuple[str, str]]:
    """A PostgreSQL journal URL in a schema of its own (dropped after), and the schema."""
    schema = f"TmDlgB-{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{sep}schema={quote(schema)}", schema
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {_qi(schema)} CASCADE")
    finally:
        await conn.close()


async def kept_bytes(schema: str) -> tuple[int, int]:
    """What the journal's rows hold: the sizes it keeps, and its text's bytes counted
    independently of them."""
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        sizes = await conn.fetchval(
            f"SELECT coalesce(sum(bytes), 0) FROM {_qi(schema)}.toolmesh_dialogs")
        text = await conn.fetchval(
            f"SELECT (SELECT coalesce(sum(octet_length(question) + octet_length(request)), 0)"
            f" FROM {_qi(schema)}.toolmesh_dialogs) + (SELECT coalesce(sum(octet_length(body)),"
            f" 0) FROM {_qi(schema)}.toolmesh_dialog_entries)")
    finally:
        await conn.close()
    return int(sizes), int(text)


async def test_postgres_drops_the_oldest_finished_dialogs_by_size(
        pg_url: tuple[str, str]) -> None:
    url, schema = pg_url
    budget = 1 * MiB
    journal = await open_journal(url, max_bytes=budget)
    try:
        await a_dialog(journal, "waiting", "w" * 50_000, finish=False)
        for i in range(60):  # 3 MB of questions
            await a_dialog(journal, f"d{i}", f"{i}:" + "q" * 50_000)
    finally:
        await journal.close()  # the sweep under way ends first
    sizes, text = await kept_bytes(schema)
    assert text < sizes <= budget, (sizes, text)
    journal = await open_journal(url, max_bytes=budget)
    try:
        kept = {d.id for d in await journal.recent(limit=1000)}
        found = await journal.get("d59")
        assert found is not None
        assert found[0].request == {"question": found[0].question, "user": "alice",
                                    "streaming": False}
    finally:
        await journal.close()
    assert "waiting" in kept and "d59" in kept and "d0" not in kept
    assert 8 <= len(kept) <= 20, kept
    conn = await asyncpg.connect(POSTGRES_URL)
    try:  # stored once
        request = await conn.fetchval(
            f"SELECT request FROM {_qi(schema)}.toolmesh_dialogs WHERE id = 'd59'")
    finally:
        await conn.close()
    assert "question" not in json.loads(request)


async def test_postgres_running_dialogs_are_never_dropped_for_size(
        pg_url: tuple[str, str], caplog: pytest.LogCaptureFixture) -> None:
    url, schema = pg_url
    journal = await open_journal(url, max_bytes=1 * MiB)
    try:
        for i in range(8):
            await a_dialog(journal, f"run{i}", "r" * 200_000, finish=False)
        for i in range(3):
            await a_dialog(journal, f"done{i}", "d" * 200_000)
    finally:
        await journal.close()
    journal = await open_journal(url, max_bytes=1 * MiB)
    try:
        assert {d.id for d in await journal.unfinished()} == {f"run{i}" for i in range(8)}
        # the last may have ended after the last sweep began: it goes with the next
        assert {d.id for d in await journal.recent(status="answer")} <= {"done2"}
    finally:
        await journal.close()
    assert any("never dropped for size" in r.getMessage() for r in caplog.records), caplog.text


async def test_postgres_a_journal_of_the_version_before_opens_and_is_sized_from_its_text(
        pg_url: tuple[str, str]) -> None:
    """Tables as the version before created them (no sizes, the question twice): the
    journal opens and reads them as written, and the byte sweep counts their text."""
    url, schema = pg_url
    s = _qi(schema)
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        await conn.execute(f"""
            CREATE SCHEMA {s};
            CREATE TABLE {s}.toolmesh_dialogs (
                id text PRIMARY KEY, n bigint GENERATED ALWAYS AS IDENTITY,
                workspace text NOT NULL, "user" text NOT NULL, question text NOT NULL,
                status text NOT NULL,
                started timestamptz NOT NULL DEFAULT clock_timestamp(),
                updated timestamptz NOT NULL DEFAULT clock_timestamp(), due timestamptz,
                steps integer NOT NULL DEFAULT 0, tool_calls integer NOT NULL DEFAULT 0,
                in_token bigint, out_token bigint, request text NOT NULL);
            CREATE INDEX toolmesh_dialogs_started ON {s}.toolmesh_dialogs (started);
            CREATE INDEX toolmesh_dialogs_status ON {s}.toolmesh_dialogs (status, started);
            CREATE TABLE {s}.toolmesh_dialog_entries (
                dialog text NOT NULL REFERENCES {s}.toolmesh_dialogs (id) ON DELETE CASCADE,
                seq integer NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp(),
                kind text NOT NULL, body text NOT NULL, PRIMARY KEY (dialog, seq));
        """)
        for i in range(10):  # 10 × 2 × 100 KB, finished
            question = f"{i}:" + "o" * 100_000
            await conn.execute(
                f"INSERT INTO {s}.toolmesh_dialogs (id, workspace, \"user\", question, status,"
                " request, steps) VALUES ($1, 'default', 'alice', $2, 'answer', $3, 1)",
                f"old{i}", question, json.dumps({"question": question, "user": "alice"}))
            await conn.execute(f"INSERT INTO {s}.toolmesh_dialog_entries (dialog, seq, kind,"
                               " body) VALUES ($1, 1, 'end', $2)", f"old{i}",
                               json.dumps({"answer": f"a{i}"}))
    finally:
        await conn.close()
    journal = await open_journal(url, max_bytes=1 * MiB)
    try:
        found = await journal.get("old9")
        assert found is not None
        assert found[0].request == {"question": found[0].question, "user": "alice"}
        assert [(e.seq, e.kind, e.body) for e in found[1]] == [(1, "end", {"answer": "a9"})]
        # new dialogs beside them: the sweep they set off counts the old ones by their text
        for i in range(12):
            await a_dialog(journal, f"new{i}", f"{i}:" + "n" * 20_000)
    finally:
        await journal.close()
    journal = await open_journal(url, max_bytes=1 * MiB)
    try:
        kept = {d.id for d in await journal.recent(limit=1000)}
    finally:
        await journal.close()
    # 2 MB of old text over a 1 MiB budget: the oldest go first, the new ones all stay
    assert {f"new{i}" for i in range(12)} <= kept and "old0" not in kept and "old9" in kept


def test_the_flag_and_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from toolmesh.cli import options
    from toolmesh.dialogs import DEFAULT_MAX_BYTES

    def parse(*argv: str) -> int:
        parser = argparse.ArgumentParser()
        options.add_dialogs(parser)
        return int(parser.parse_args(argv).dialogs_max_bytes)

    monkeypatch.delenv("TOOLMESH_DIALOGS_MAX_BYTES", raising=False)
    assert parse() == DEFAULT_MAX_BYTES == options.DIALOGS_MAX_BYTES == 256 * MiB
    assert parse("--dialogs-max-bytes", "0") == 0
    monkeypatch.setenv("TOOLMESH_DIALOGS_MAX_BYTES", str(64 * MiB))
    assert parse() == 64 * MiB
    assert parse("--dialogs-max-bytes", "1000") == 1000
    monkeypatch.setenv("TOOLMESH_DIALOGS_MAX_BYTES", "lots")
    with pytest.raises(SystemExit):
        parse()
    assert parse("--dialogs-max-bytes", "5") == 5  # the flag wins; the variable is not read
