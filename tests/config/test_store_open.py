"""Opening a config store: the URLs it takes (SQLite paths and URLs, PostgreSQL with its
``schema``), and the errors it gives for the ones it cannot use — each a
:class:`~toolmesh.config.errors.ConfigError` that names the store without its password."""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from pathlib import Path

import pytest

from tests.config.test_store_contract import POSTGRES_URL, WS
from toolmesh.config.errors import ConfigError
from toolmesh.config.store import open_store
from toolmesh.errors import ToolmeshError


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
