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
from toolmesh.errors import ToolmeshError

POSTGRES_URL = os.environ.get("TOOLMESH_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test")

#: a value the "refuse" trigger (installed by some tests) makes the database reject
REFUSED = "refused-by-test-trigger"

WS = "default"


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class Backend:
    """One store backend under test: open stores on it (as separate processes would)."""

    name: str
    url: str
    path: Path | None = None  # SQLite only
    schema: str | None = None  # PostgreSQL only
    stores: list[ConfigStore] = field(default_factory=list)

    async def open(self) -> ConfigStore:
        store = await open_store(self.url)
        self.stores.append(store)
        return store

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
            s = _qi(self.schema or "")
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
                await conn.execute(f"DROP SCHEMA IF EXISTS {_qi(b.schema)} CASCADE")
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
        await store.delete("w2", [("t", "never-existed")]),  # changes nothing, still counts
        await store.put("w1", []),
        await store.delete("w3", []),
        await store.put("w1", [("t", "c", "3")]),  # same value again: still a change call
    ]
    assert seen == [1, 2, 3, 4, 5, 6, 7]
    assert await store.version() == 7


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
    start = await store.version()
    n = 60

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


# --- opening: URLs and errors --------------------------------------------------------------


async def test_config_error_is_a_toolmesh_error_with_the_wire_type() -> None:
    e = ConfigError("x")
    assert isinstance(e, ToolmeshError)
    assert e.to_wire() == {"type": "config-error", "message": "x"}


async def test_sqlite_creates_the_file_and_directories_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "config.db"
    store = await open_store(f"sqlite://{path}")
    try:
        await store.put(WS, [("t", "k", "v")])
    finally:
        await store.close()
    assert path.is_file()
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT value FROM toolmesh_config").fetchall() == [("v",)]


async def test_a_plain_path_opens_a_sqlite_store(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = await open_store("sub/config.db")
    try:
        assert await store.put(WS, [("t", "k", "v")]) == 1
    finally:
        await store.close()
    assert (tmp_path / "sub" / "config.db").is_file()


async def test_a_percent_encoded_sqlite_url_is_decoded(tmp_path: Path) -> None:
    store = await open_store(f"sqlite://{tmp_path}/my%20config.db")
    await store.close()
    assert (tmp_path / "my config.db").is_file()


async def test_a_file_that_is_not_a_database_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a sqlite file, just some text " * 100)
    with pytest.raises(ConfigError, match="cannot open the config store at .*junk.db"):
        await open_store(f"sqlite://{path}")


async def test_an_unwritable_location_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(ConfigError, match="cannot open the config store"):
        await open_store(f"sqlite://{blocker}/config.db")


@pytest.mark.parametrize("url", [
    "",
    "mysql://admin:hunter2@db.example/config",
    "redis://:hunter2@127.0.0.1:6379/0",
    "sqlite://somehost/config.db",
    "sqlite:///",
    "sqlite:relative.db",
    "sqlite:///tmp/x.db?mode=ro",
])
async def test_unsupported_urls_are_rejected_without_showing_passwords(url: str) -> None:
    with pytest.raises(ConfigError) as e:
        await open_store(url)
    assert "hunter2" not in e.value.message
    assert "sqlite:///" in e.value.message  # tells the user what would work


async def test_an_unreachable_postgres_is_a_config_error_with_the_password_masked() -> None:
    with pytest.raises(ConfigError) as e:
        await open_store("postgresql://root:hunter2@127.0.0.1:1/test")
    assert "cannot open the config store at postgresql://root:***@127.0.0.1:1/test" in str(e.value)
    assert "hunter2" not in str(e.value)


async def test_a_missing_postgres_database_is_a_config_error() -> None:
    name = f"tm_no_such_db_{uuid.uuid4().hex[:8]}"
    with pytest.raises(ConfigError) as e:
        await open_store(f"postgres://root:hunter2@127.0.0.1:5432/{name}?password=hunter2")
    assert name in e.value.message and "does not exist" in e.value.message
    assert "hunter2" not in e.value.message


@pytest.mark.parametrize("query", ["schema=a&schema=b", "schema=", "schema=" + "x" * 64])
async def test_a_bad_schema_parameter_is_a_config_error(query: str) -> None:
    with pytest.raises(ConfigError, match="schema"):
        await open_store(f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}{query}")
