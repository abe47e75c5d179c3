"""The dialog-journal contract: written once, run against SQLite and PostgreSQL (each
PostgreSQL test in a schema of its own, dropped after)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import asyncpg
import pytest

from toolmesh.dialogs import (
    ABANDONED,
    RUNNING,
    DialogJournal,
    JournalError,
    open_journal,
)

POSTGRES_URL = os.environ.get("TOOLMESH_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test")

REQUEST = {"question": "tell me a joke", "user": "alice", "streaming": True}


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@pytest.fixture(params=["sqlite", "postgres"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'state' / 'dialogs.db'}"
        return
    schema = f'TmDlg-{uuid.uuid4().hex[:12]}"q'  # quoting is proved by the quote
    sep = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{sep}schema={quote(schema)}"
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {_qi(schema)} CASCADE")
    finally:
        await conn.close()


@pytest.fixture
async def journal(url: str) -> AsyncIterator[DialogJournal]:
    j = await open_journal(url)
    yield j
    await j.close()


async def begin(journal: DialogJournal, id: str = "d1", *, workspace: str = "default",
                timeout: float | None = 60.0):  # type: ignore[no-untyped-def]
    return await journal.begin(id, workspace=workspace, user="alice",
                               question="tell me a joke", request=REQUEST, timeout=timeout)


async def test_a_dialog_begins_once_and_is_taken_up_with_its_entries(
        journal: DialogJournal) -> None:
    first = await begin(journal)
    assert first.fresh and not first.expired and first.entries == []
    assert first.dialog.status == RUNNING and first.dialog.request == REQUEST
    assert first.dialog.due is not None and first.dialog.due > first.dialog.started
    await journal.append("d1", [("reply", {"step": 1, "thought": "a joke",
                                           "calls": [{"id": "c1", "name": "tell-joke",
                                                      "arguments": {"topic": "cats"}}]})],
                         steps=1)
    await journal.append("d1", [("result", {"call": "c1", "observation": "meow"}),
                                ("turn", {"state": None, "wrap": None})], tool_calls=1)
    again = await begin(journal)  # the same request delivered again
    assert not again.fresh and not again.expired
    assert [(e.seq, e.kind) for e in again.entries] == [(1, "reply"), (2, "result"),
                                                         (3, "turn")]
    assert again.entries[1].body == {"call": "c1", "observation": "meow"}
    assert again.dialog.steps == 1 and again.dialog.tool_calls == 1


async def test_a_dialog_taken_up_after_its_client_stopped_waiting_is_abandoned(
        journal: DialogJournal) -> None:
    await begin(journal, timeout=0.05)
    await asyncio.sleep(0.2)  # the client's deadline passes (the database's clock)
    late = await begin(journal, timeout=60.0)
    assert late.expired and late.dialog.status == ABANDONED
    assert await journal.unfinished() == []
    # an abandoned dialog stays abandoned: a third delivery does not run it either
    assert (await begin(journal)).dialog.status == ABANDONED


async def test_finish_closes_the_dialog_with_its_status_and_tokens(
        journal: DialogJournal) -> None:
    await begin(journal)
    end = {"message_type": "answer", "content": "meow", "end_of_dialog": True}
    await journal.finish("d1", status="answer", entries=[("end", {"message": end})], steps=2,
                         in_token=120, out_token=30)
    got = await journal.get("d1")
    assert got is not None
    dialog, entries = got
    assert (dialog.status, dialog.steps, dialog.in_token, dialog.out_token) == (
        "answer", 2, 120, 30)
    assert entries[-1].kind == "end" and entries[-1].body == {"message": end}
    assert dialog.wire()["status"] == "answer" and dialog.wire()["seconds"] >= 0
    assert await journal.unfinished() == []


async def test_reads_see_only_the_workspaces_they_name(journal: DialogJournal) -> None:
    await begin(journal, "a", workspace="alpha")
    await begin(journal, "b", workspace="beta")
    assert await journal.get("b", workspaces=["alpha"]) is None
    assert (await journal.get("b", workspaces=["beta"])) is not None
    assert [d.id for d in await journal.recent(workspaces=["alpha"])] == ["a"]
    assert await journal.recent(workspaces=[]) == []
    assert {d.id for d in await journal.recent()} == {"a", "b"}
    assert [d.id for d in await journal.recent(status="answer")] == []


async def test_unfinished_dialogs_are_listed_oldest_first(journal: DialogJournal) -> None:
    for id in ("first", "second"):
        await begin(journal, id, timeout=None)
    await journal.finish("first", status="answer")
    await begin(journal, "third")
    assert [d.id for d in await journal.unfinished()] == ["second", "third"]


async def test_retention_keeps_the_newest_dialogs_and_every_running_one(
        url: str) -> None:
    journal = await open_journal(url, keep=2)
    try:
        for i in range(4):
            await begin(journal, f"old{i}")
            await journal.finish(f"old{i}", status="answer", entries=[("end", {"i": i})])
        await begin(journal, "running")
        # the sweep runs on the first finish of every hundred: "last" is the 101st
        for i in range(96):
            await begin(journal, f"x{i}")
            await journal.finish(f"x{i}", status="answer")
        await begin(journal, "last")
        await journal.finish("last", status="answer")
    finally:
        await journal.close()  # a sweep may run in the background until then
    journal = await open_journal(url, keep=2)
    try:
        kept = {d.id for d in await journal.recent(limit=1000)}
        assert kept == {"x95", "last", "running"}
    finally:
        await journal.close()


async def test_entries_of_unknown_kinds_and_bad_limits_are_refused(
        journal: DialogJournal) -> None:
    await begin(journal)
    with pytest.raises(JournalError, match="not a journal entry"):
        await journal.append("d1", [("nonsense", {})])
    with pytest.raises(JournalError, match="positive"):
        await journal.recent(limit=0)
    assert (await journal.get("d1")) is not None and (await journal.get("d1"))[1] == []


async def test_a_journal_in_another_process_sees_what_one_wrote(url: str) -> None:
    one, two = await open_journal(url), await open_journal(url)
    try:
        await begin(one)
        await one.append("d1", [("reply", {"step": 1})])
        taken = await begin(two)
        assert not taken.fresh and [e.kind for e in taken.entries] == ["reply"]
    finally:
        await one.close()
        await two.close()


@pytest.mark.parametrize("bad", ["", "mysql://x/y", "sqlite://host/x.db", "sqlite:x.db"])
async def test_unusable_urls_are_refused_with_the_forms_that_work(bad: str) -> None:
    with pytest.raises(JournalError):
        await open_journal(bad)


async def test_a_journal_that_cannot_be_opened_says_where(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(JournalError, match="cannot open the dialog journal"):
        await open_journal(str(tmp_path / "file" / "dialogs.db"))
    with pytest.raises(JournalError, match="positive"):
        await open_journal(str(tmp_path / "d.db"), keep=0)


async def test_opening_waits_for_a_lock_another_connection_holds(tmp_path: Path) -> None:
    """The file is shared (``config.db``: the config store, another process): a journal that
    opens while another connection holds a write lock waits for it, up to its busy timeout,
    instead of failing at once."""
    path = tmp_path / "config.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        holder.execute("CREATE TABLE other (x)")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("INSERT INTO other VALUES (1)")
        loop = asyncio.get_running_loop()
        # released from another thread while the opening waits on the journal's own
        release = loop.call_later(0.5, lambda: loop.run_in_executor(
            None, holder.execute, "COMMIT"))
        started = loop.time()
        journal = await open_journal(str(path))
        waited = loop.time() - started
        release.cancel()
        try:
            assert (await begin(journal, "w")).fresh
        finally:
            await journal.close()
        assert waited >= 0.4  # it waited for the lock, and got the file after it
    finally:
        holder.close()


async def test_sqlite_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "dialogs.db"
    journal = await open_journal(str(path))
    await journal.close()
    assert path.stat().st_mode & 0o077 == 0
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        assert {"toolmesh_dialogs", "toolmesh_dialog_writes"} <= {
            r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


async def test_text_that_cannot_be_utf8_is_kept_escaped_not_refused(
        journal: DialogJournal) -> None:
    """A tool's answer may hold a lone surrogate (a server's JSON "\\ud800"): the entry is
    stored, and read back as it was."""
    await begin(journal)
    await journal.append("d1", [("result", {"observation": "half \ud800 a pair"})])
    got = await journal.get("d1")
    assert got is not None and got[1][0].body == {"observation": "half \ud800 a pair"}


async def test_writers_of_one_dialog_in_two_processes_take_turns(url: str) -> None:
    """The agent appends a dialog's steps while an approvals service (another replica, its
    own connection) records an answer: no entry is lost, none shares a number."""
    one, other = await open_journal(url), await open_journal(url)
    try:
        await begin(one, "d-race")
        await asyncio.gather(*(
            j.append("d-race", [("answer" if j is other else "result", {"call": f"c{i}"})])
            for i in range(20) for j in (one, other)))
        _, entries = await one.get("d-race") or (None, [])
    finally:
        await one.close()
        await other.close()
    assert [e.seq for e in entries] == list(range(1, 41))
    assert sorted(e.body["call"] for e in entries) == sorted([f"c{i}" for i in range(20)] * 2)
