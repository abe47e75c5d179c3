"""The PostgreSQL dialog journal: what agent replicas on several machines share.

Tables beside the config store's, in the schema the URL names (``?schema=``, default
``public``); asyncpg with a small pool. Times are the server's clock.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import asyncpg

from toolmesh import json_codec
from toolmesh.config.errors import ConfigError
from toolmesh.config.store.postgres import split_schema
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
from toolmesh.urls import mask_url


def _json(value: Any) -> str:
    """JSON text of an entry or request: orjson, and text that cannot be UTF-8 (a lone
    surrogate a tool's answer held) escaped rather than refused by the database."""
    return json_codec.dumps(value).decode()


_DB_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)
_DDL_LOCK = "SELECT pg_advisory_xact_lock(hashtext('toolmesh.dialogs'))"
_SWEEP_EVERY = 100
#: seconds until the dialog's client stops waiting, by the server's clock
_REMAINING = "extract(epoch FROM due - clock_timestamp())::float8 AS remaining"
_COLUMNS = ("id, workspace, \"user\", question, status, started, updated, due, steps,"
            " tool_calls, in_token, out_token, request")


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _dialog(row: asyncpg.Record) -> Dialog:
    return Dialog(id=row["id"], workspace=row["workspace"], user=row["user"],
                  question=row["question"], status=row["status"], started=row["started"],
                  updated=row["updated"], due=row["due"], steps=row["steps"],
                  tool_calls=row["tool_calls"], in_token=row["in_token"],
                  out_token=row["out_token"], request=json.loads(row["request"]))


def _entry(row: asyncpg.Record) -> Entry:
    return Entry(seq=row["seq"], at=row["at"], kind=row["kind"], body=json.loads(row["body"]))


class PostgresDialogJournal:
    """A :class:`~toolmesh.dialogs.journal.DialogJournal` in PostgreSQL tables."""

    def __init__(self, url: str, *, keep: int = DEFAULT_KEEP,
                 max_age_days: float = DEFAULT_MAX_AGE_DAYS, pool_size: int = 4,
                 connect_timeout: float = 10.0) -> None:
        try:
            self._dsn, self.schema = split_schema(url)
        except ConfigError as e:  # the config store's URL rules, said of the journal
            raise JournalError(e.message.replace("config store", "dialog journal")) from None
        self.url = mask_url(url)
        parts = urlsplit(url)
        self._secrets = [p for p in [parts.password, *(v for k, v in parse_qsl(parts.query)
                                                          if k.lower() == "password")] if p]
        self.keep = keep
        self.max_age_days = max_age_days
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self._pool: asyncpg.Pool | None = None
        s = _quote_ident(self.schema)
        self._dialogs = f"{s}.toolmesh_dialogs"
        self._entries = f"{s}.toolmesh_dialog_entries"
        self._finished = 0

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
                    await conn.execute(_DDL_LOCK)
                    await conn.execute(
                        f"CREATE SCHEMA IF NOT EXISTS {_quote_ident(self.schema)}")
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
                            request    text NOT NULL
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
        except BaseException as e:
            await pool.close()
            if isinstance(e, _DB_ERRORS):
                raise self._error(e) from None
            raise
        self._pool = pool

    async def close(self) -> None:
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
        try:
            async with self._require().acquire() as conn, conn.transaction():
                row = await conn.fetchrow(
                    f"INSERT INTO {self._dialogs} (id, workspace, \"user\", question, status,"
                    " request, due) VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp() +"
                    " make_interval(secs => $7)) ON CONFLICT (id) DO NOTHING"
                    f" RETURNING {_COLUMNS}, {_REMAINING}", id, workspace, user, question,
                    RUNNING, _json(request), timeout)
                if row is not None:
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
        sweep = False
        if end is not None:
            self._finished += 1
            sweep = self._finished % _SWEEP_EVERY == 1
        first = (workspace, user, question, _json(request), timeout)
        return await self._write(id, entries, steps, tool_calls, end, sweep=sweep, first=first)

    async def append(self, id: str, entries: Sequence[tuple[str, dict[str, Any]]], *,
                     steps: int | None = None, tool_calls: int | None = None) -> None:
        check_entries(entries)
        await self._write(id, entries, steps, tool_calls, None, sweep=False)

    async def finish(self, id: str, *, status: str,
                     entries: Sequence[tuple[str, dict[str, Any]]] = (),
                     steps: int | None = None, tool_calls: int | None = None,
                     in_token: int | None = None, out_token: int | None = None) -> None:
        check_entries(entries)
        self._finished += 1
        await self._write(id, entries, steps, tool_calls, (status, in_token, out_token),
                          sweep=self._finished % _SWEEP_EVERY == 1)

    async def _write(self, id: str, entries: Sequence[tuple[str, dict[str, Any]]],
                     steps: int | None, tool_calls: int | None,
                     end: tuple[str, int | None, int | None] | None, *, sweep: bool,
                     first: tuple[str, str, str, str, float | None] | None = None) -> bool:
        """Write; with ``first``, begin the dialog too (``False``: it was begun before)."""
        try:
            async with self._require().acquire() as conn, conn.transaction():
                last = 0
                if first is not None:
                    workspace, user, question, request, timeout = first
                    if await conn.fetchval(
                            f"INSERT INTO {self._dialogs} (id, workspace, \"user\", question,"
                            " status, request, due) VALUES ($1, $2, $3, $4, $5, $6,"
                            " clock_timestamp() + make_interval(secs => $7))"
                            " ON CONFLICT (id) DO NOTHING RETURNING 1", id, workspace, user,
                            question, RUNNING, request, timeout) is None:
                        return False
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
                        [(id, last + i, kind, _json(body))
                         for i, (kind, body) in enumerate(entries, 1)])
                status, in_token, out_token = end if end is not None else (None, None, None)
                await conn.execute(
                    f"UPDATE {self._dialogs} SET updated = clock_timestamp(),"
                    " steps = coalesce($2, steps), tool_calls = coalesce($3, tool_calls),"
                    " status = coalesce($4, status),"
                    " in_token = CASE WHEN $4::text IS NULL THEN in_token ELSE $5 END,"
                    " out_token = CASE WHEN $4::text IS NULL THEN out_token ELSE $6 END"
                    " WHERE id = $1", id, steps, tool_calls, status, in_token, out_token)
                if sweep:
                    await conn.execute(
                        f"DELETE FROM {self._dialogs} WHERE status <> $1 AND started <"
                        " clock_timestamp() - make_interval(secs => $2)",
                        RUNNING, self.max_age_days * 86400)
                    # the newest ``keep`` dialogs stay, finished or not (as in SQLite's)
                    await conn.execute(
                        f"DELETE FROM {self._dialogs} WHERE status <> $1 AND n <="
                        f" (SELECT max(n) FROM {self._dialogs}) - $2", RUNNING, self.keep)
        except _DB_ERRORS as e:
            raise self._error(e) from None
        return True

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
