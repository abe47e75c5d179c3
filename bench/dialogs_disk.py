"""What the dialog journal takes on disk (issue 42, part 6): dialogs with 1 MB questions
written to a SQLite journal as the agent writes them (the reply before the call, beginning
the dialog; the result, the turn and the end), the database file and its WAL measured after
every dialog.

The version before kept each question twice and never gave freed pages back: 120 such
dialogs with ``--dialogs-keep 50`` left a 240 MB file here (through ``toolmesh serve``: 202 MB
and a 113 MB WAL; the issue saw 300 MB), and at the default ``--dialogs-keep`` of 10,000 the
file grew by 2 MB a dialog. Now a question
is stored once, the journal keeps under ``--dialogs-max-bytes`` (default 256 MiB) by dropping
the oldest finished dialogs, and the file shrinks as they go. The floor is what the dialogs'
questions hold (the least a journal that keeps them all must take). With ``--postgres URL``
(default: the test server's) the same budget on a PostgreSQL journal: the bytes its rows are
counted to hold, and the tables' size on disk (PostgreSQL reuses the space of deleted rows
after its autovacuum; the files do not shrink).

    python bench/dialogs_disk.py [--dialogs N] [--postgres URL] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import Figure, add_arguments, emit  # noqa: E402

from toolmesh.dialogs import (  # noqa: E402
    DEFAULT_MAX_BYTES,
    DialogJournal,
    JournalError,
    open_journal,
)

BENCH = "dialogs_disk"
MB = 1_000_000
MiB = 1024 * 1024


def on_disk(path: Path) -> tuple[int, int]:
    wal = Path(f"{path}-wal")
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0


async def write(journal: DialogJournal, i: int, question_bytes: int = MB) -> None:
    """Dialog ``d{i}`` as the agent writes one that answers after one call."""
    question = f"{i}:" + "q" * (question_bytes - 8)
    await journal.begin_with(
        f"d{i}", workspace="default", user="alice", question=question,
        request={"question": question, "user": "alice", "streaming": False},
        timeout=60, entries=[("reply", {"step": 1, "thought": "look it up",
                                        "calls": [{"id": "c1", "name": "find",
                                                   "arguments": {}}]})], steps=1)
    await journal.finish(f"d{i}", status="answer", entries=[
        ("result", {"call": "c1", "observation": "found it", "ok": True}),
        ("turn", {"state": None, "wrap": None}),
        ("end", {"message": {"message_type": "answer", "content": "done"}, "answer": "done"})],
        tool_calls=1)


async def run(dialogs: int, *, keep: int, max_bytes: int) -> tuple[int, int, int, float, float]:
    """Write ``dialogs`` dialogs to a SQLite journal; the largest the file and file + WAL
    were after one, the file once the journal closed, the seconds it took and the slowest
    dialog's."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.db"
        journal = await open_journal(str(path), keep=keep, max_bytes=max_bytes)
        peak_db = peak = 0
        slowest = 0.0
        began = time.perf_counter()
        try:
            for i in range(dialogs):
                t = time.perf_counter()
                await write(journal, i)
                slowest = max(slowest, time.perf_counter() - t)
                # an agent's loop does other work between journal writes (bus messages)
                await asyncio.sleep(0)
                db, wal = on_disk(path)
                peak_db, peak = max(peak_db, db), max(peak, db + wal)
        finally:
            await journal.close()
        return peak_db, peak, path.stat().st_size, time.perf_counter() - began, slowest


async def run_postgres(url: str, dialogs: int, *, max_bytes: int) -> tuple[int, int] | None:
    """Write ``dialogs`` dialogs to a PostgreSQL journal in a schema of its own; the bytes
    its rows are counted to hold once it closed, and the tables' size on disk (``None``: no
    PostgreSQL answers)."""
    import asyncpg

    schema = f"tm_bench_disk_{uuid.uuid4().hex[:8]}"
    try:
        journal = await open_journal(f"{url}?schema={schema}", max_bytes=max_bytes)
    except JournalError as e:
        print(f"no PostgreSQL journal: {e.message}", file=sys.stderr)
        return None
    try:
        try:
            for i in range(dialogs):
                await write(journal, i)
                await asyncio.sleep(0)
        finally:
            await journal.close()  # and the sweep under way
        conn = await asyncpg.connect(url)
        try:
            kept = await conn.fetchval(f"SELECT sum(bytes) FROM {schema}.toolmesh_dialogs")
            size = await conn.fetchval(
                f"SELECT pg_total_relation_size('{schema}.toolmesh_dialogs') +"
                f" pg_total_relation_size('{schema}.toolmesh_dialog_entries')")
        finally:
            await conn.close()
    finally:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        finally:
            await conn.close()
    return int(kept), int(size)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogs", type=int, default=0,
                        help="dialogs of the default-bounds run (default: 600, quick: 300)")
    parser.add_argument("--postgres", default="postgresql://root@127.0.0.1:5432/test",
                        metavar="URL", help="a PostgreSQL for its run (default: %(default)s)")
    add_arguments(parser)
    args = parser.parse_args()
    many = args.dialogs or (300 if args.quick else 600)
    figures: list[Figure] = []

    peak_db, peak, after, seconds, slowest = await run(120, keep=50,
                                                       max_bytes=DEFAULT_MAX_BYTES)
    note = (f"120 dialogs in {seconds:.1f} s, slowest {slowest * 1e3:.0f} ms; the file alone "
            f"{peak_db / MB:.0f} MB at most; the version before left 240 MB")
    figures += [
        Figure(bench=BENCH, path="120 dialogs of 1 MB questions, --dialogs-keep 50: file + "
               "WAL at their largest", value=peak / MB, unit="MB", floor=50.0,
               floor_what="the 50 dialogs' questions kept", note=note),
        Figure(bench=BENCH, path="120 dialogs of 1 MB questions, --dialogs-keep 50: file "
               "once closed", value=after / MB, unit="MB", floor=50.0,
               floor_what="the 50 dialogs' questions kept",
               note="with up to 8 MiB of free pages kept for the writes to come"),
    ]

    budget = 64 * MiB
    peak_db, peak, after, seconds, slowest = await run(120, keep=10_000, max_bytes=budget)
    figures.append(Figure(
        bench=BENCH, path="120 dialogs of 1 MB questions, --dialogs-max-bytes 64 MiB: file + "
        "WAL at their largest", value=peak / MB, unit="MB", floor=budget / MB,
        floor_what="the budget", target="≤ 1× floor",
        note=f"the file alone {peak_db / MB:.1f} MB at most, {after / MB:.1f} MB once closed; "
             f"slowest dialog {slowest * 1e3:.0f} ms"))

    peak_db, peak, after, seconds, slowest = await run(many, keep=10_000,
                                                       max_bytes=DEFAULT_MAX_BYTES)
    figures.append(Figure(
        bench=BENCH, path=f"{many} dialogs of 1 MB questions, default bounds (10,000 dialogs, "
        "256 MiB): file + WAL at their largest", value=peak / MB, unit="MB",
        floor=DEFAULT_MAX_BYTES / MB, floor_what="the budget", target="≤ 1× floor",
        note=f"{many} MB of questions written in {seconds:.1f} s, slowest dialog "
             f"{slowest * 1e3:.0f} ms; the file alone {peak_db / MB:.0f} MB at most; the "
             f"version before: 2 MB a dialog, {2 * many} MB"))

    found = await run_postgres(args.postgres, 120, max_bytes=budget)
    if found is not None:
        kept, size = found
        figures.append(Figure(
            bench=BENCH, path="120 dialogs of 1 MB questions, PostgreSQL, --dialogs-max-bytes "
            "64 MiB: bytes its rows hold once closed", value=kept / MB, unit="MB",
            floor=budget / MB, floor_what="the budget", target="≤ 1× floor",
            note=f"the tables on disk (TOAST compresses the repetitive questions): "
                 f"{size / MB:.1f} MB"))
    emit(figures, args)


if __name__ == "__main__":
    asyncio.run(main())
