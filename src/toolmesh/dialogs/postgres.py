"""The PostgreSQL dialog journal: what agent replicas on several machines share.

Tables beside the config store's, in the schema the URL names (``?schema=``, default
``public``); asyncpg with a small pool. Times are the server's clock.

A question is stored once (``folded``: :func:`toolmesh.dialogs.journal.fold`). A dialog's row
carries its size (``bytes``): the UTF-8 bytes of its text — question, request, every entry —
before compression, plus an allowance per row for the row, its index entries and the
dialog's id repeated in each entry; each write adds its own. The retention's sweep runs as a
task of its own, off the writes that set it due (every hundredth dialog that ends, and
whenever a replica has written an eighth of the byte budget): by age, by count, then — each
statement a batch of its own — the oldest finished dialogs until what is kept is under
:data:`~toolmesh.dialogs.journal.KEEP_SHARE` of the budget. A journal written before the
columns were added gets them as it is opened; its dialogs' sizes are counted from their text
(``octet_length``, which reads no TOASTed value) until they go.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Collection, Sequence
from typing import Any

import asyncpg

from toolmesh import json_codec
from toolmesh.config.errors import ConfigError
from toolmesh.config.store.postgres import split_schema
from toolmesh.dialogs.journal import (
    ABANDONED,
    DEFAULT_KEEP,
    DEFAULT_MAX_AGE_DAYS,
    DEFAULT_MAX_BYTES,
    KEEP_SHARE,
    RUNNING,
    SWEEP_SHARE,
    Begun,
    Dialog,
    Entry,
    JournalError,
    check_entries,
    check_limit,
    fold,
    unfold,
)
from toolmesh.postgres import DDL_LOCK, quote_ident
from toolmesh.urls import mask_url, url_passwords

log = logging.getLogger("toolmesh.dialogs")


def _json(value: Any) -> str:
    """JSON text of an entry or request: orjson, and text that cannot be UTF-8 (a lone
    surrogate a tool's answer held) escaped rather than refused by the database."""
    return json_codec.dumps(value).decode()


#: bytes counted for a dialog's row besides its text (the row's header and fixed columns, its
#: three index entries), and for an entry's row besides its body (header, columns, the
#: primary key's entry); the dialog's id is counted again in each
_DIALOG_ROW = 160
_ENTRY_ROW = 64
#: the most dialogs one statement of the byte sweep drops
_TRIM_BATCH = 500


_DB_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)
_SWEEP_EVERY = 100
#: seconds until the dialog's client stops waiting, by the server's clock
_REMAINING = "extract(epoch FROM due - clock_timestamp())::float8 AS remaining"
#: begin a dialog: ``(id, workspace, user, question, status, request, timeout, folded,
#: allowance)``; its size is its text's and the allowance
_INSERT = ("INSERT INTO {dialogs} (id, workspace, \"user\", question, status, request, due,"
           " folded, bytes) VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp() +"
           " make_interval(secs => $7), $8, $9 + octet_length($1) + octet_length($2) +"
           " octet_length($3) + octet_length($4) + octet_length($6))"
           " ON CONFLICT (id) DO NOTHING")
#: the byte sweep's batch: drop the oldest finished dialogs (status ``<> $1``), ``$3`` at
#: most, while those kept take more than ``$2`` bytes (``$4``, ``$5``: the allowances per
#: dialog and per entry, for dialogs written before they were sized); gives how many it
#: dropped, and the bytes then still over ``$2`` (none or less: none)
_TRIM = """
WITH sized AS (
    SELECT d.id, d.n, d.status, coalesce(d.bytes, $4 + octet_length(d.id)
        + octet_length(d.workspace) + octet_length(d."user") + octet_length(d.question)
        + octet_length(d.request) + coalesce((SELECT sum(octet_length(e.body)
        + octet_length(e.kind) + octet_length(e.dialog) + $5) FROM {entries} e
        WHERE e.dialog = d.id), 0)) AS bytes
    FROM {dialogs} d
), total AS (SELECT coalesce(sum(bytes), 0) - $2 AS excess FROM sized),
doomed AS (
    SELECT f.id, f.bytes FROM (
        SELECT id, n, bytes, sum(bytes) OVER (ORDER BY n) - bytes AS before
        FROM sized WHERE status <> $1) f, total
    WHERE f.before < total.excess ORDER BY f.n LIMIT $3
), gone AS (
    DELETE FROM {dialogs} WHERE id IN (SELECT id FROM doomed) RETURNING id
)
SELECT count(*)::int, ((SELECT excess FROM total) - coalesce(sum(doomed.bytes), 0))::bigint
FROM gone JOIN doomed USING (id)
"""
_COLUMNS = ("id, workspace, \"user\", question, status, started, updated, due, steps,"
            " tool_calls, in_token, out_token, request, folded")


def _dialog(row: asyncpg.Record) -> Dialog:
    return Dialog(id=row["id"], workspace=row["workspace"], user=row["user"],
                  question=row["question"], status=row["status"], started=row["started"],
                  updated=row["updated"], due=row["due"], steps=row["steps"],
                  tool_calls=row["tool_calls"], in_token=row["in_token"],
                  out_token=row["out_token"],
                  request=unfold(row["question"], json.loads(row["request"]), row["folded"]))


def _entry(row: asyncpg.Record) -> Entry:
    return Entry(seq=row["seq"], at=row["at"], kind=row["kind"], body=json.loads(row["body"]))


class PostgresDialogJournal:
    """A :class:`~toolmesh.dialogs.journal.DialogJournal` in PostgreSQL tables."""

    def __init__(self, url: str, *, keep: int = DEFAULT_KEEP,
                 max_age_days: float = DEFAULT_MAX_AGE_DAYS,
                 max_bytes: int = DEFAULT_MAX_BYTES, pool_size: int = 4,
                 connect_timeout: float = 10.0) -> None:
        try:
            self._dsn, self.schema = split_schema(url)
        except ConfigError as e:  # the config store's URL rules, said of the journal
            raise JournalError(e.message.replace("config store", "dialog journal")) from None
        self.url = mask_url(url)
        self._secrets = url_passwords(url)
        self.keep = keep
        self.max_age_days = max_age_days
        self.max_bytes = max_bytes
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self._pool: asyncpg.Pool | None = None
        s = quote_ident(self.schema)
        self._dialogs = f"{s}.toolmesh_dialogs"
        self._entries = f"{s}.toolmesh_dialog_entries"
        self._finished = 0
        #: bytes this replica wrote since its last sweep began
        self._grown = 0
        self._sweep_due = False
        self._sweeping: asyncio.Task[None] | None = None
        #: the last sweep left running dialogs alone over the budget (warned once)
        self._over = False

    def __repr__(self) -> str:
        return f"PostgresDialogJournal({self.url!r})"

    def _error(self, e: BaseException) -> JournalError:
        message = f"the dialog journal at {self.url}: {e}"
        for secret in self._secrets:
            message = message.replace(secret, "***")
        return JournalError(message)

    async def open(self) -> None:
        if self._pool is not None:
            return
        try:
            pool = await asyncpg.create_pool(self._dsn, min_size=1, max_size=self.pool_size,
                                             timeout=self.connect_timeout)
        except (*_DB_ERRORS, ValueError) as e:
            raise self._error(e) from None
        try:
            async with pool.acquire() as conn, conn.transaction():
                if await conn.fetchval("SELECT to_regclass($1) IS NULL OR to_regclass($2) IS "
                                       "NULL", self._dialogs, self._entries):
                    await conn.execute(DDL_LOCK)
                    await conn.execute(
                        f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.schema)}")
                    await conn.execute(f"""
                        CREATE TABLE IF NOT EXISTS {self._dialogs} (
                            id         text PRIMARY KEY,
                            n          bigint GENERATED ALWAYS AS IDENTITY,
                            workspace  text NOT NULL,
                            "user"     text NOT NULL,
                            question   text NOT NULL,
                            status     text NOT NULL,
                            started    timestamptz NOT NULL DEFAULT clock_timestamp(),
                            updated    timestamptz NOT NULL DEFAULT clock_timestamp(),
                            due        timestamptz,
                            steps      integer NOT NULL DEFAULT 0,
                            tool_calls integer NOT NULL DEFAULT 0,
                            in_token   bigint,
                            out_token  bigint,
                            request    text NOT NULL,
                            bytes      bigint,
                            folded     boolean NOT NULL DEFAULT false
                        );
                        CREATE INDEX IF NOT EXISTS toolmesh_dialogs_started
                            ON {self._dialogs} (started);
                        CREATE INDEX IF NOT EXISTS toolmesh_dialogs_status
                            ON {self._dialogs} (status, started);
                        CREATE TABLE IF NOT EXISTS {self._entries} (
                            dialog text NOT NULL REFERENCES {self._dialogs} (id)
                                ON DELETE CASCADE,
                            seq    integer NOT NULL,
                            at     timestamptz NOT NULL DEFAULT clock_timestamp(),
                            kind   text NOT NULL,
                            body   text NOT NULL,
                            PRIMARY KEY (dialog, seq)
                        );
                    """)
                if not await conn.fetchval(
                        "SELECT count(*) = 2 FROM pg_attribute WHERE attrelid = to_regclass($1)"
                        " AND attname IN ('bytes', 'folded') AND NOT attisdropped",
                        self._dialogs):
                    # a journal written before questions were stored once and dialogs sized:
                    # its rows read as they are (no default rewrites them)
                    await conn.execute(DDL_LOCK)
                    await conn.execute(
                        f"ALTER TABLE {self._dialogs} ADD COLUMN IF NOT EXISTS bytes bigint,"
                        " ADD COLUMN IF NOT EXISTS folded boolean NOT NULL DEFAULT false")
        except BaseException as e:
            await pool.close()
            if isinstance(e, _DB_ERRORS):
                raise self._error(e) from None
            raise
        self._pool = pool

    async def close(self) -> None:
        if self._pool is not None and self._sweep_due:  # one fell due while one ran
            self._sweep()
        while self._sweeping is not None:
            await asyncio.wait([self._sweeping])
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _require(self) -> asyncpg.Pool:
        if self._pool is None:
            raise JournalError(f"the dialog journal at {self.url} is not open")
        return self._pool

    # --- writes --------------------------------------------------------------------------

    async def begin(self, id: str, *, workspace: str, user: str, question: str,
                    request: dict[str, Any], timeout: float | None) -> Begun:
        stored, folded = fold(question, request)
        try:
            async with self._require().acquire() as conn, conn.transaction():
                row = await conn.fetchrow(
                    f"{_INSERT.format(dialogs=self._dialogs)}"
                    f" RETURNING {_COLUMNS}, {_REMAINING}, bytes", id, workspace, user,
                    question, RUNNING, _json(stored), timeout, folded, _DIALOG_ROW)
                if row is not None:
                    self._grew(row["bytes"])
                    return Begun(dialog=_dialog(row), entries=[], fresh=True, expired=False,
                                 remaining=row["remaining"])
                # FOR UPDATE: two deliveries of one request taking it up at once are ordered
                row = await conn.fetchrow(
                    f"SELECT {_COLUMNS}, {_REMAINING},"
                    " (status = $2 AND due < clock_timestamp()) AS expired"
                    f" FROM {self._dialogs} WHERE id = $1 FOR UPDATE", id, RUNNING)
                remaining = row["remaining"]
                if row["expired"]:
                    row = await conn.fetchrow(
                        f"UPDATE {self._dialogs} SET status = $2, updated = clock_timestamp()"
                        f" WHERE id = $1 RETURNING {_COLUMNS}", id, ABANDONED)
                    expired = True
                else:
                    expired = False
                entries = await conn.fetch(
                    f"SELECT seq, at, kind, body FROM {self._entries} WHERE dialog = $1"
                    " ORDER BY seq", id)
                return Begun(dialog=_dialog(row), entries=[_entry(r) for r in entries],
                             fresh=False, expired=expired, remaining=remaining)
        except _DB_ERRORS as e:
            raise self._error(e) from None

    async def begin_with(self, id: str, *, workspace: str, user: str, question: str,
                         request: dict[str, Any], timeout: float | None,
                         entries: Sequence[tuple[str, dict[str, Any]]],
                         steps: int | None = None, tool_calls: int | None = None,
                         end: tuple[str, int | None, int | None] | None = None) -> bool:
        check_entries(entries)
        stored, folded = fold(question, request)
        first = (workspace, user, question, _json(stored), folded, timeout)
        begun = await self._write(id, entries, steps, tool_calls, end, first=first)
        if begun and end is not None:
            self._ended()
        return begun

    async def append(self, id: str, entries: Sequence[tuple[str, dict[str, Any]]], *,
                     steps: int | None = None, tool_calls: int | None = None) -> None:
        check_entries(entries)
        await self._write(id, entries, steps, tool_calls, None)

    async def finish(self, id: str, *, status: str,
                     entries: Sequence[tuple[str, dict[str, Any]]] = (),
                     steps: int | None = None, tool_calls: int | None = None,
                     in_token: int | None = None, out_token: int | None = None) -> None:
        check_entries(entries)
        await self._write(id, entries, steps, tool_calls, (status, in_token, out_token))
        self._ended()

    async def _write(self, id: str, entries: Sequence[tuple[str, dict[str, Any]]],
                     steps: int | None, tool_calls: int | None,
                     end: tuple[str, int | None, int | None] | None, *,
                     first: tuple[str, str, str, str, bool, float | None] | None = None,
                     ) -> bool:
        """Write; with ``first``, begin the dialog too (``False``: it was begun before)."""
        bodies = [_json(body) for _, body in entries]
        grown = sum(len(text.encode("utf-8", "surrogatepass")) + len(kind) + _ENTRY_ROW
                    for text, (kind, _) in zip(bodies, entries, strict=True))
        grown += len(id.encode("utf-8", "surrogatepass")) * len(entries)
        size = 0  # the dialog's row, when this write begins it
        try:
            async with self._require().acquire() as conn, conn.transaction():
                last = 0
                if first is not None:
                    workspace, user, question, request, folded, timeout = first
                    inserted = await conn.fetchval(
                        f"{_INSERT.format(dialogs=self._dialogs)} RETURNING bytes", id,
                        workspace, user, question, RUNNING, request, timeout, folded,
                        _DIALOG_ROW)
                    if inserted is None:
                        return False
                    size = inserted
                elif entries:
                    # the dialog's row locked first: writers of one dialog (the agent, and an
                    # approvals service recording an answer) take their turns
                    await conn.execute(f"SELECT 1 FROM {self._dialogs} WHERE id = $1 FOR UPDATE",
                                       id)
                    last = await conn.fetchval(
                        f"SELECT coalesce(max(seq), 0) FROM {self._entries} WHERE dialog = $1",
                        id)
                if entries:
                    await conn.executemany(
                        f"INSERT INTO {self._entries} (dialog, seq, kind, body)"
                        " VALUES ($1, $2, $3, $4)",
                        [(id, last + i, kind, text)
                         for i, ((kind, _), text) in enumerate(zip(entries, bodies, strict=True),
                                                               1)])
                status, in_token, out_token = end if end is not None else (None, None, None)
                # a dialog of a journal written before it was sized keeps no size (NULL): the
                # sweep counts its text
                await conn.execute(
                    f"UPDATE {self._dialogs} SET updated = clock_timestamp(),"
                    " steps = coalesce($2, steps), tool_calls = coalesce($3, tool_calls),"
                    " status = coalesce($4, status),"
                    " in_token = CASE WHEN $4::text IS NULL THEN in_token ELSE $5 END,"
                    " out_token = CASE WHEN $4::text IS NULL THEN out_token ELSE $6 END,"
                    " bytes = bytes + $7"
                    " WHERE id = $1", id, steps, tool_calls, status, in_token, out_token,
                    grown)
        except _DB_ERRORS as e:
            raise self._error(e) from None
        self._grew(size + grown)
        return True

    # --- retention, off the writes -------------------------------------------------------

    def _ended(self) -> None:
        self._finished += 1
        if self._finished % _SWEEP_EVERY == 1:
            self._sweep_due = True
            self._sweep()

    def _grew(self, size: int) -> None:
        """This replica wrote ``size`` bytes (as the sweep counts them)."""
        if not self.max_bytes:
            return
        self._grown += size
        if self._grown >= self.max_bytes * SWEEP_SHARE:
            self._grown = 0
            self._sweep_due = True
            self._sweep()

    def _sweep(self) -> None:
        """Start the sweep that is due, unless one runs (then it starts when that ends)."""
        if self._sweeping is not None or not self._sweep_due or self._pool is None:
            return
        self._sweep_due = False
        task = asyncio.get_running_loop().create_task(self._sweep_now())

        def done(_: asyncio.Task[None]) -> None:
            self._sweeping = None
            self._sweep()

        task.add_done_callback(done)
        self._sweeping = task

    async def _sweep_now(self) -> None:
        """Drop the finished dialogs older than ``max_age_days``, those but the newest
        ``keep``, then the oldest ones until the rest take less than ``KEEP_SHARE`` of
        ``max_bytes``: each statement a transaction of its own, the last in batches."""
        try:
            async with self._require().acquire() as conn:
                await conn.execute(
                    f"DELETE FROM {self._dialogs} WHERE status <> $1 AND started <"
                    " clock_timestamp() - make_interval(secs => $2)",
                    RUNNING, self.max_age_days * 86400)
                # the newest ``keep`` dialogs stay, finished or not (as in SQLite's)
                await conn.execute(
                    f"DELETE FROM {self._dialogs} WHERE status <> $1 AND n <="
                    f" (SELECT max(n) FROM {self._dialogs}) - $2", RUNNING, self.keep)
                if not self.max_bytes:
                    return
                trim = _TRIM.format(dialogs=self._dialogs, entries=self._entries)
                target = int(self.max_bytes * KEEP_SHARE)
                excess: int | None = None
                while True:
                    dropped, excess = await conn.fetchrow(trim, RUNNING, target, _TRIM_BATCH,
                                                          _DIALOG_ROW, _ENTRY_ROW)
                    if dropped < _TRIM_BATCH:
                        break
        except (*_DB_ERRORS, JournalError) as e:
            message = e.message if isinstance(e, JournalError) else self._error(e).message
            log.warning("%s: retention sweep failed: %s", self, message)
            return
        over = excess is not None and excess > 0
        if over and not self._over:
            log.warning("dialog journal at %s: %.1f MB over %d%% of --dialogs-max-bytes (%.1f MB)"
                        " with every finished dialog dropped: what is left is running dialogs, "
                        "never dropped for size", self.url, excess / 1e6,
                        round(KEEP_SHARE * 100), self.max_bytes / 1e6)
        self._over = over

    # --- reads ---------------------------------------------------------------------------

    async def get(self, id: str, *, workspaces: Collection[str] | None = None,
                  ) -> tuple[Dialog, list[Entry]] | None:
        try:
            async with self._require().acquire() as conn:
                row = await conn.fetchrow(
                    f"SELECT {_COLUMNS} FROM {self._dialogs} WHERE id = $1"
                    " AND ($2::text[] IS NULL OR workspace = ANY($2))", id,
                    None if workspaces is None else list(workspaces))
                if row is None:
                    return None
                entries = await conn.fetch(
                    f"SELECT seq, at, kind, body FROM {self._entries} WHERE dialog = $1"
                    " ORDER BY seq", id)
        except _DB_ERRORS as e:
            raise self._error(e) from None
        return _dialog(row), [_entry(r) for r in entries]

    async def recent(self, *, workspaces: Collection[str] | None = None,
                   status: str | None = None, limit: int = 100) -> list[Dialog]:
        limit = check_limit(limit)
        try:
            rows = await self._require().fetch(
                f"SELECT {_COLUMNS} FROM {self._dialogs}"
                " WHERE ($1::text[] IS NULL OR workspace = ANY($1))"
                " AND ($2::text IS NULL OR status = $2) ORDER BY started DESC, n DESC LIMIT $3",
                None if workspaces is None else list(workspaces), status, limit)
        except _DB_ERRORS as e:
            raise self._error(e) from None
        return [_dialog(r) for r in rows]

    async def unfinished(self) -> list[Dialog]:
        try:
            rows = await self._require().fetch(
                f"SELECT {_COLUMNS} FROM {self._dialogs} WHERE status = $1"
                " ORDER BY started, n", RUNNING)
        except _DB_ERRORS as e:
            raise self._error(e) from None
        return [_dialog(r) for r in rows]
