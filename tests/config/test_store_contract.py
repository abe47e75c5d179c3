"""The config-store contract: written once, run against SQLite and PostgreSQL.

PostgreSQL tests use the server at ``TOOLMESH_TEST_POSTGRES`` (default
``postgresql://root@127.0.0.1:5432/test``), each in a schema of its own that is dropped after.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import asyncpg
import pytest

from toolmesh.config.errors import ConfigError
from toolmesh.config.store import ConfigStore, open_store
from toolmesh.config.store.base import Unchanged
from toolmesh.config.store.postgres import PostgresConfigStore
from toolmesh.config.store.sqlite import SQLiteConfigStore
from toolmesh.postgres import quote_ident

POSTGRES_URL = os.environ.get("TOOLMESH_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test")

#: a value the "refuse" trigger (installed by some tests) makes the database reject
REFUSED = "refused-by-test-trigger"

WS = "default"


@dataclass
class Backend:
    """One store backend under test: open stores on it (as separate processes would)."""

    name: str
    url: str
    path: Path | None = None  # SQLite only
    schema: str | None = None  # PostgreSQL only
    stores: list[ConfigStore] = field(default_factory=list)

    async def open(self, **options: Any) -> ConfigStore:
        """A store on this backend; ``options`` go to the backend's constructor."""
        store: ConfigStore
        if not options:
            store = await open_store(self.url)
        else:
            store = (SQLiteConfigStore(self.path, **options) if self.path is not None
                     else PostgresConfigStore(self.url, **options))
            await store.open()
        self.stores.append(store)
        return store

    async def sql(self, statement: str) -> list[tuple[Any, ...]]:
        """Run ``statement`` on the backend's database itself; ``{s}`` is the schema prefix."""
        if self.path is not None:
            with contextlib.closing(sqlite3.connect(self.path)) as db:
                rows = db.execute(statement.format(s="")).fetchall()
                db.commit()
                return rows
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            rows = await conn.fetch(statement.format(s=f"{quote_ident(self.schema or '')}."))
        finally:
            await conn.close()
        return [tuple(r) for r in rows]

    async def applied(self) -> dict[str, int]:
        """The recorded ``request id -> version``, as the database holds them."""
        rows = await self.sql("SELECT request_id, version FROM {s}toolmesh_config_applied")
        return {r: int(v) for r, v in rows}

    async def refuse_request_record(self) -> None:
        """Make the database reject recording the request id ``REFUSED``: a failure after the
        data is written, inside the same transaction."""
        if self.path is not None:
            await self.sql("CREATE TRIGGER refuse_record BEFORE INSERT ON toolmesh_config_applied"
                           f" WHEN NEW.request_id = '{REFUSED}'"
                           " BEGIN SELECT RAISE(ABORT, 'record refused by the test trigger'); END")
            return
        s = quote_ident(self.schema or "")
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            await conn.execute(f"""
                CREATE FUNCTION {s}.refuse_record() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF NEW.request_id = '{REFUSED}' THEN
                        RAISE EXCEPTION 'record refused by the test trigger';
                    END IF;
                    RETURN NEW;
                END $$;
                CREATE TRIGGER refuse_record BEFORE INSERT ON {s}.toolmesh_config_applied
                    FOR EACH ROW EXECUTE FUNCTION {s}.refuse_record();
            """)
        finally:
            await conn.close()

    async def refuse_value(self) -> None:
        """Make the database itself reject any row whose value is ``REFUSED``.

        A real failure inside the store's transaction, provoked from outside as an operator's
        constraint would, without touching the store's code.
        """
        if self.path is not None:
            with contextlib.closing(sqlite3.connect(self.path)) as db:
                for event in ("INSERT", "UPDATE"):
                    db.execute(f"CREATE TRIGGER refuse_{event} BEFORE {event} ON toolmesh_config"
                               f" WHEN NEW.value = '{REFUSED}'"
                               " BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END")
                db.commit()
        else:
            s = quote_ident(self.schema or "")
            conn = await asyncpg.connect(POSTGRES_URL)
            try:
                await conn.execute(f"""
                    CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        IF NEW.value = '{REFUSED}' THEN
                            RAISE EXCEPTION 'refused by the test trigger';
                        END IF;
                        RETURN NEW;
                    END $$;
                    CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON {s}.toolmesh_config
                        FOR EACH ROW EXECUTE FUNCTION {s}.refuse();
                """)
            finally:
                await conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Each test using this fixture runs once per store backend."""
    if request.param == "sqlite":
        path = tmp_path / "state" / "config.db"  # the directory does not exist yet
        b = Backend("sqlite", f"sqlite://{path}", path=path)
    else:
        # capitals, a dash and a quote: proves every statement quotes the schema
        schema = f'TmCfg-{uuid.uuid4().hex[:12]}"q'
        sep = "&" if "?" in POSTGRES_URL else "?"
        b = Backend("postgres", f"{POSTGRES_URL}{sep}schema={quote(schema)}", schema=schema)
    try:
        yield b
    finally:
        for store in b.stores:
            await store.close()
        if b.schema is not None:
            conn = await asyncpg.connect(POSTGRES_URL)
            try:
                await conn.execute(f"DROP SCHEMA IF EXISTS {quote_ident(b.schema)} CASCADE")
            finally:
                await conn.close()


@pytest.fixture
async def store(backend: Backend) -> ConfigStore:
    """An opened store on the backend under test."""
    return await backend.open()


# --- the contract --------------------------------------------------------------------------


async def test_an_empty_store_has_version_0_and_nothing_in_it(store: ConfigStore) -> None:
    assert isinstance(store, ConfigStore)
    assert await store.version() == 0
    assert await store.get(WS, [("tool", "a")]) == [None]
    assert await store.keys(WS, "tool") == []
    assert await store.values(WS, "tool") == {}
    assert await store.dump(WS) == {}
    assert await store.workspaces() == []


async def test_put_then_read_back_through_every_read(store: ConfigStore) -> None:
    v = await store.put(WS, [("tool", "b", '{"n": 2}'), ("tool", "a", '{"n": 1}'),
                             ("mcp", "m", "{}")])
    assert v == 1
    assert await store.version() == 1
    assert await store.get(WS, [("tool", "a"), ("mcp", "m"), ("tool", "b")]) == [
        '{"n": 1}', "{}", '{"n": 2}']
    assert await store.keys(WS, "tool") == ["a", "b"]
    assert await store.values(WS, "tool") == {"a": '{"n": 1}', "b": '{"n": 2}'}
    assert await store.dump(WS) == {"tool": {"a": '{"n": 1}', "b": '{"n": 2}'},
                                    "mcp": {"m": "{}"}}
    assert await store.workspaces() == [WS]


async def test_get_answers_each_key_in_order_with_none_for_missing(store: ConfigStore) -> None:
    await store.put(WS, [("tool", "a", "A"), ("tool", "b", "B")])
    assert await store.get(WS, [("tool", "b"), ("tool", "nope"), ("other", "a"), ("tool", "a"),
                                ("tool", "b")]) == ["B", None, None, "A", "B"]
    assert await store.get(WS, []) == []


async def test_keys_are_sorted_by_code_point(store: ConfigStore) -> None:
    names = ["b", "a", "B", "é", "10", "9", "_", "Z", "日本"]
    await store.put(WS, [("t", n, n) for n in names])
    assert await store.keys(WS, "t") == sorted(names)


async def test_workspaces_are_isolated(store: ConfigStore) -> None:
    await store.put("alice", [("tool", "k", "alice's")])
    await store.put("bob", [("tool", "k", "bob's"), ("tool", "only-bob", "x")])
    assert await store.get("alice", [("tool", "k"), ("tool", "only-bob")]) == ["alice's", None]
    assert await store.get("bob", [("tool", "k")]) == ["bob's"]
    assert await store.keys("alice", "tool") == ["k"]
    assert await store.dump("alice") == {"tool": {"k": "alice's"}}
    await store.delete("alice", [("tool", "k")])
    assert await store.get("bob", [("tool", "k")]) == ["bob's"]
    assert await store.workspaces() == ["bob"]


async def test_the_version_goes_up_by_one_per_put_and_delete_across_workspaces(
        store: ConfigStore) -> None:
    seen = [
        await store.put("w1", [("t", "a", "1"), ("t", "b", "2"), ("t", "c", "3")]),
        await store.put("w2", [("t", "a", "1")]),
        await store.delete("w1", [("t", "a"), ("t", "b")]),
        await store.delete("w2", [("t", "a"), ("t", "never-existed")]),  # one is enough
        await store.put("w1", []),
        await store.put("w1", [("t", "c", "3")]),  # same value again: still a change call
    ]
    assert seen == [1, 2, 3, 4, 5, 6]
    assert await store.version() == 6


async def test_a_delete_that_finds_nothing_makes_no_version_and_answers_the_current_one(
        store: ConfigStore) -> None:
    await store.put("w1", [("t", "a", "1")])
    await store.put("w2", [("t", "gone", "1")])
    await store.delete("w2", [("t", "gone")])
    for keys in ([("t", "never-existed")], [("t", "gone")], [("t", "a")], []):
        # ("t", "a") exists, but in another workspace
        answer = await store.delete("w2", keys, actor="someone")
        assert answer == 3 and isinstance(answer, Unchanged), keys
    assert await store.version() == 3
    assert await store.dump("w1") == {"t": {"a": "1"}}
    assert [(e.operation, e.key, e.version) for e in await store.history()] == [
        ("delete", "gone", 3), ("put", "gone", 2), ("put", "a", 1)]  # nothing audited
    # a delete that removes something answers a plain new version
    removed = await store.delete("w1", [("t", "a")])
    assert removed == 4 and not isinstance(removed, Unchanged)


async def test_a_delete_audits_only_the_items_it_removed(store: ConfigStore) -> None:
    await store.put(WS, [("t", "a", "1"), ("t", "b", "2")])
    assert await store.delete(WS, [("t", "missing"), ("t", "b"), ("u", "x"), ("t", "a")],
                              actor="me") == 2
    assert [(e.actor, e.operation, e.type, e.key, e.version)
            for e in await store.history(limit=2)] == [
        ("me", "delete", "t", "a", 2), ("me", "delete", "t", "b", 2)]


async def test_overwrite_replaces_the_value(store: ConfigStore) -> None:
    await store.put(WS, [("tool", "k", "old"), ("tool", "other", "kept")])
    assert await store.put(WS, [("tool", "k", "new")]) == 2
    assert await store.values(WS, "tool") == {"k": "new", "other": "kept"}


async def test_a_key_repeated_in_one_put_keeps_the_last_value(store: ConfigStore) -> None:
    assert await store.put(WS, [("t", "k", "first"), ("t", "j", "j"), ("t", "k", "last")]) == 1
    assert await store.values(WS, "t") == {"k": "last", "j": "j"}


async def test_delete_removes_only_the_named_keys(store: ConfigStore) -> None:
    await store.put(WS, [("tool", "a", "1"), ("tool", "b", "2"), ("mcp", "a", "3")])
    v = await store.delete(WS, [("tool", "a"), ("tool", "missing"), ("tool", "a")])
    assert v == 2
    assert await store.get(WS, [("tool", "a"), ("tool", "b"), ("mcp", "a")]) == [None, "2", "3"]
    await store.delete(WS, [("tool", "b"), ("mcp", "a")])
    assert await store.dump(WS) == {}
    assert await store.workspaces() == []  # a workspace exists while it holds items


@pytest.mark.parametrize("bad", [
    pytest.param(("tool", "b", 42), id="int-value"),
    pytest.param(("tool", "b", None), id="none-value"),
    pytest.param(("tool", "b", b"bytes"), id="bytes-value"),
    pytest.param(("tool", 7, "v"), id="int-key"),
    pytest.param(("tool", "", "v"), id="empty-key"),
    pytest.param(("", "b", "v"), id="empty-type"),
    pytest.param(("tool", "b", "nul\x00inside"), id="nul-in-value"),
    pytest.param(("tool", "b", "lone \ud800 surrogate"), id="surrogate-value"),
    pytest.param(("tool", "b"), id="pair-not-triple"),
    pytest.param("tbv", id="string-not-triple"),
])
async def test_an_invalid_item_anywhere_in_a_put_writes_nothing(store: ConfigStore,
                                                               bad: Any) -> None:
    await store.put(WS, [("tool", "a", "before")])
    with pytest.raises(ConfigError) as e:
        await store.put(WS, [("tool", "a", "after"), bad, ("tool", "c", "3")])
    assert e.value.type == "config-error"
    assert "values[1]" in e.value.message  # says which item is wrong
    assert await store.version() == 1
    assert await store.dump(WS) == {"tool": {"a": "before"}}


@pytest.mark.parametrize("call", [
    pytest.param(lambda s: s.put("", [("t", "k", "v")]), id="put-empty-workspace"),
    pytest.param(lambda s: s.put(None, [("t", "k", "v")]), id="put-none-workspace"),
    pytest.param(lambda s: s.put(WS, "tkv"), id="put-a-string"),
    pytest.param(lambda s: s.put(WS, {("t", "k", "v")}), id="put-a-set"),
    pytest.param(lambda s: s.delete(WS, [("t", "k"), ("t", 1)]), id="delete-int-key"),
    pytest.param(lambda s: s.delete(WS, "tk"), id="delete-a-string"),
    pytest.param(lambda s: s.get(WS, [("t",)]), id="get-short-key"),
    pytest.param(lambda s: s.keys(WS, 3), id="keys-int-type"),
    pytest.param(lambda s: s.values("", "t"), id="values-empty-workspace"),
    pytest.param(lambda s: s.dump(None), id="dump-none-workspace"),
    pytest.param(lambda s: s.put(WS, [("t", "k", "w")], request_id=""), id="put-empty-request-id"),
    pytest.param(lambda s: s.put(WS, [("t", "k", "w")], request_id="a\x00b"),
                 id="put-nul-in-request-id"),
    pytest.param(lambda s: s.delete(WS, [("t", "k")], request_id=7), id="delete-int-request-id"),
])
async def test_invalid_arguments_raise_config_error_and_change_nothing(store: ConfigStore,
                                                                      call: Any) -> None:
    await store.put(WS, [("t", "k", "v")])
    with pytest.raises(ConfigError):
        await call(store)
    assert await store.version() == 1
    assert await store.dump(WS) == {"t": {"k": "v"}}


async def test_a_failure_inside_the_transaction_rolls_back_the_whole_put(
        backend: Backend, store: ConfigStore) -> None:
    await store.put(WS, [("tool", "a", "old a")])
    await backend.refuse_value()
    # the database accepts the first row, then rejects the second: genuinely half-way through
    with pytest.raises(ConfigError) as e:
        await store.put(WS, [("tool", "a", "new a"), ("tool", "b", REFUSED), ("tool", "c", "c")])
    assert "refused by the test trigger" in e.value.message
    assert "nothing was written" in e.value.message
    assert await store.version() == 1
    assert await store.dump(WS) == {"tool": {"a": "old a"}}
    # the store is still usable, and the failed put did not burn a version number
    assert await store.put(WS, [("tool", "b", "fine")]) == 2
    assert await store.dump(WS) == {"tool": {"a": "old a", "b": "fine"}}


# --- idempotency by request id ------------------------------------------------------------


async def test_a_repeated_request_id_writes_nothing_and_answers_the_first_version(
        backend: Backend, store: ConfigStore) -> None:
    other = await backend.open()  # a second process, as after a crash and a redelivery
    assert await store.put(WS, [("t", "a", "1")], request_id="r1") == 1
    assert await store.put(WS, [("t", "a", "1")], request_id="r1") == 1
    assert await other.put(WS, [("t", "a", "1")], request_id="r1") == 1
    # an id stands for one request: a repeat is not applied whatever it carries
    assert await store.put(WS, [("t", "a", "changed"), ("t", "b", "2")], request_id="r1") == 1
    assert await store.version() == 1
    assert await store.dump(WS) == {"t": {"a": "1"}}

    assert await store.delete(WS, [("t", "a")], request_id="r2") == 2
    await store.put(WS, [("t", "a", "back")])  # 3, no request id
    assert await other.delete(WS, [("t", "a")], request_id="r2") == 2
    assert await store.put(WS, [("t", "c", "3")], request_id="r2") == 2
    assert await store.version() == 3
    assert await store.dump(WS) == {"t": {"a": "back"}}
    assert await backend.applied() == {"r1": 1, "r2": 2}


async def test_a_delete_that_found_nothing_is_recorded_and_its_copies_get_its_answer(
        backend: Backend, store: ConfigStore) -> None:
    other = await backend.open()  # a second process, as after a crash and a redelivery
    await store.put(WS, [("t", "x", "1")])  # 1
    first = await store.delete(WS, [("t", "k")], request_id="r")
    assert first == 1 and isinstance(first, Unchanged)
    assert await backend.applied() == {"r": 1}
    # the item appears after the request was answered: a copy of the request must not
    # delete it, nor make a version; it gets the first answer
    assert await store.put(WS, [("t", "k", "new")]) == 2
    assert await store.delete(WS, [("t", "k")], request_id="r") == 1
    assert await other.delete(WS, [("t", "k")], request_id="r") == 1
    assert await store.version() == 2
    assert await store.dump(WS) == {"t": {"x": "1", "k": "new"}}
    assert await backend.applied() == {"r": 1}


async def test_different_request_ids_and_no_request_id_are_separate_writes(
        store: ConfigStore) -> None:
    seen = [await store.put(WS, [("t", "k", "v")], request_id=r) for r in ("a", "A", "a ")]
    seen += [await store.put(WS, [("t", "k", "v")]), await store.put(WS, [("t", "k", "v")])]
    seen += [await store.delete(WS, [("t", "k")], request_id="b"),
             await store.put(WS, [("t", "k", "v")]),
             await store.delete(WS, [("t", "k")])]
    assert seen == [1, 2, 3, 4, 5, 6, 7, 8]
    assert await store.version() == 8


async def test_copies_of_one_request_written_at_once_are_applied_once(
        backend: Backend, store: ConfigStore) -> None:
    other = await backend.open()  # two processes handling copies of the same request at once
    stores = [store, other]

    async def write(i: int) -> int:
        if i % 2:
            return await stores[i % 4 // 2].put(WS, [("t", "same", str(i))], request_id="same")
        return await stores[i % 4 // 2].put(WS, [("t", f"k{i}", "v")], request_id=f"other-{i}")

    versions = await asyncio.gather(*(write(i) for i in range(40)))
    same = {v for i, v in enumerate(versions) if i % 2}
    others = [v for i, v in enumerate(versions) if not i % 2]
    assert len(same) == 1
    assert sorted([*same, *others]) == list(range(1, 22))  # 21 writes, gapless
    assert await store.version() == 21
    assert (await backend.applied())["same"] == same.pop()


async def test_request_ids_are_remembered_for_the_last_n_versions(backend: Backend) -> None:
    store = await backend.open(remembered_requests=5)
    for i in range(12):
        assert await store.put(WS, [("t", f"k{i}", "v")], request_id=f"r{i}") == i + 1
        assert len(await backend.applied()) <= 5
    # each write recording an id keeps those of the last 5 versions, its own included
    assert await backend.applied() == {f"r{i}": i + 1 for i in range(7, 12)}
    await store.put(WS, [("t", "x", "v")])  # 13: no id, no record
    assert await store.put(WS, [("t", "k7", "v")], request_id="r7") == 8  # still known
    # r3 was forgotten: a copy this late is applied again (the bound's price)
    assert await store.put(WS, [("t", "k3", "v")], request_id="r3") == 14
    assert await backend.applied() == {"r9": 10, "r10": 11, "r11": 12, "r3": 14}
    assert await store.version() == 14


async def test_the_request_record_and_the_write_are_one_transaction(
        backend: Backend, store: ConfigStore) -> None:
    await backend.refuse_value()
    await backend.refuse_request_record()
    # the data fails: the id is not recorded, so the request can still be applied
    with pytest.raises(ConfigError, match="nothing was written"):
        await store.put(WS, [("t", "k", REFUSED)], request_id="r")
    assert await store.put(WS, [("t", "k", "fine")], request_id="r") == 1
    # the record fails after the data went in: the data goes too
    with pytest.raises(ConfigError, match="record refused by the test trigger"):
        await store.put(WS, [("t", "k", "lost"), ("t", "j", "lost")], request_id=REFUSED)
    with pytest.raises(ConfigError, match="record refused by the test trigger"):
        await store.delete(WS, [("t", "k")], request_id=REFUSED)
    assert await store.version() == 1
    assert await store.dump(WS) == {"t": {"k": "fine"}}
    assert await backend.applied() == {"r": 1}


async def test_a_store_made_before_request_ids_gets_their_table_on_open(
        backend: Backend) -> None:
    # the tables as they were before toolmesh_config_applied, with data at version 3
    if backend.path is not None:
        backend.path.parent.mkdir(mode=0o700)
    else:
        await backend.sql(f"CREATE SCHEMA {quote_ident(backend.schema or '')}")
    await backend.sql("CREATE TABLE {s}toolmesh_config (workspace text NOT NULL, type text NOT"
                      " NULL, key text NOT NULL, value text NOT NULL,"
                      " PRIMARY KEY (workspace, type, key))")
    await backend.sql("CREATE TABLE {s}toolmesh_config_version (id integer PRIMARY KEY"
                      " CHECK (id = 1), version bigint NOT NULL)")
    await backend.sql("INSERT INTO {s}toolmesh_config_version VALUES (1, 3)")
    await backend.sql("INSERT INTO {s}toolmesh_config VALUES ('default', 't', 'old', 'kept')")
    store = await backend.open()
    assert await store.put(WS, [("t", "new", "v")], request_id="r") == 4
    assert await store.put(WS, [("t", "new", "v")], request_id="r") == 4
    assert await store.dump(WS) == {"t": {"old": "kept", "new": "v"}}
    assert await backend.applied() == {"r": 4}


@pytest.mark.parametrize("count", [0, -1, 1.5, True, None])
async def test_remembered_requests_must_be_a_positive_int(tmp_path: Path, count: Any) -> None:
    with pytest.raises(ConfigError, match="remembered_requests"):
        SQLiteConfigStore(tmp_path / "c.db", remembered_requests=count)
    with pytest.raises(ConfigError, match="remembered_requests"):
        PostgresConfigStore(POSTGRES_URL, remembered_requests=count)


async def test_unicode_and_odd_strings_are_stored_exactly(store: ConfigStore) -> None:
    ws = "wörkspace-日本-🙂"
    items = [
        ("tööl", "🔧 ключ", "значение — 值 — قيمة — 🙂👍🏽 — e\u0301 (combining)"),
        ("tööl", "whitespace", "  padded\n\ttabs\r\nCRLF  "),
        ("tööl", "empty", ""),
        ("tööl", "json", '{"a": "\\u0000 escaped, \\"quoted\\"", "b": [1, 2.5, null]}'),
        ("tööl", "quotes", "it's \"quoted\"; DROP TABLE x; --"),
        ("tööl", "spaces in key", "v"),
    ]
    await store.put(ws, items)
    assert await store.get(ws, [(t, k) for t, k, _ in items]) == [v for _, _, v in items]
    assert await store.dump(ws) == {"tööl": {k: v for _, k, v in items}}
    assert await store.workspaces() == [ws]


async def test_a_1_mib_value_round_trips(store: ConfigStore) -> None:
    big = ("abc✓日本🙂\n" * (1 << 20))[: 1 << 20]
    assert len(big) == 1 << 20
    await store.put(WS, [("blob", "big", big), ("blob", "small", "s")])
    assert await store.get(WS, [("blob", "big")]) == [big]
    assert await store.values(WS, "blob") == {"big": big, "small": "s"}


async def test_concurrent_writes_from_many_tasks_get_distinct_gapless_versions(
        backend: Backend, store: ConfigStore) -> None:
    other = await backend.open()  # a second store object: like a second process or machine
    n = 60

    for i in range(0, n, 5):  # what the deletes below remove
        await store.put(f"w{i % 3}", [("t", f"gone-{i}", "x")])
    start = await store.version()

    async def write(i: int) -> int:
        s = store if i % 2 else other
        if i % 5 == 0:
            return await s.delete(f"w{i % 3}", [("t", f"gone-{i}")])
        return await s.put(f"w{i % 3}", [("t", f"k{i}", str(i)), ("u", f"k{i}", str(i))])

    versions = await asyncio.gather(*(write(i) for i in range(n)))
    assert sorted(versions) == list(range(start + 1, start + n + 1))
    assert await store.version() == await other.version() == start + n
    for i in range(n):
        expect = [None, None] if i % 5 == 0 else [str(i), str(i)]
        assert await other.get(f"w{i % 3}", [("t", f"k{i}"), ("u", f"k{i}")]) == expect


async def test_a_second_store_on_the_same_storage_sees_the_data(backend: Backend,
                                                                store: ConfigStore) -> None:
    other = await backend.open()
    await store.put("w1", [("tool", "a", "1")])
    assert await other.get("w1", [("tool", "a")]) == ["1"]
    assert await other.put("w2", [("tool", "b", "2")]) == 2
    assert await store.version() == 2
    assert await store.dump("w2") == {"tool": {"b": "2"}}


async def test_data_and_version_survive_closing_and_reopening(backend: Backend,
                                                              store: ConfigStore) -> None:
    await store.put("w1", [("tool", "a", "1"), ("tool", "b", "2")])
    await store.put("w2", [("mcp", "m", "3")])
    await store.delete("w1", [("tool", "b")])
    await store.close()
    await store.close()  # twice is fine
    with pytest.raises(ConfigError, match="not open"):
        await store.version()

    reopened = await backend.open()
    assert await reopened.version() == 3
    assert await reopened.dump("w1") == {"tool": {"a": "1"}}
    assert await reopened.dump("w2") == {"mcp": {"m": "3"}}
    assert await reopened.workspaces() == ["w1", "w2"]
    assert await reopened.put("w1", [("tool", "c", "4")]) == 4  # the counter carries on
