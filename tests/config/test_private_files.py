"""The data folder and the SQLite store are private to their owner: created 0700/0600, and
tightened with a log line when they exist with wider modes."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from tests.servers import toolmesh_serve
from toolmesh.config.store import open_store


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_serve_creates_a_private_data_folder_and_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with toolmesh_serve(tmp_path, store=False, extra_env={"TOOLMESH_DATA_DIR": str(data)}):
        files = sorted(p.name for p in data.iterdir())
        modes = {p.name: mode(p) for p in data.iterdir()}
    assert mode(data) == 0o700
    assert "config.db" in files and "config.db-wal" in files
    assert set(modes.values()) == {0o600}, modes


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_existing_files_open_to_others_are_tightened_with_a_log_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    sqlite3.connect(data / "config.db").close()
    (data / "config.db").chmod(0o644)
    async with toolmesh_serve(tmp_path, store=False,
                              extra_env={"TOOLMESH_DATA_DIR": str(data)}) as served:
        pass
    assert mode(data) == 0o700 and mode(data / "config.db") == 0o600
    log = "".join(served.log)
    assert f"made folder {data} private: mode 755 -> 700" in log
    assert f"made file {data / 'config.db'} private: mode 644 -> 600" in log


async def test_a_store_in_a_new_folder_anywhere_is_private_but_an_existing_folder_is_left(
        tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    store = await open_store(str(shared / "new" / "config.db"))
    await store.put("default", [("t", "k", "v")])
    await store.close()
    assert mode(shared) == 0o755  # the user's folder: not ours to change
    assert mode(shared / "new") == 0o700
    assert {mode(p) for p in (shared / "new").iterdir()} == {0o600}
