"""The grant stores' contract (toolmesh.mcp_oauth.grants), the same for memory, SQLite (a file
in the test's tmp_path) and PostgreSQL (the real server, a schema of each test's own, dropped
after); then what only one of them does, and the stores as :func:`open_grants` opens them:
sealed, with no secret in clear on disk or in the database."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import stat
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import asyncpg
import pytest
from cryptography.fernet import Fernet

from toolmesh.mcp_oauth.errors import GrantStoreError
from toolmesh.mcp_oauth.grants import (
    GrantStore,
    MemoryGrants,
    SealedGrants,
    StoredGrant,
    StoredPending,
    open_grants,
)
from toolmesh.mcp_oauth.grants.postgres import PostgresGrants
from toolmesh.mcp_oauth.grants.sqlite import SqliteGrants, sqlite_path
from toolmesh.secrets.crypto import KEY_ENV, KEY_FILE_ENV, PREFIX

POSTGRES_URL = os.environ.get("TOOLMESH_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test")

#: a secret whose plaintext must never be found where a sealed store keeps it
SECRET = "rt-PLAINTEXT-refresh-token-7c1e"


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _pg_url(schema: str) -> str:
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{sep}schema={quote(schema)}"


async def _drop_schema(schema: str) -> None:
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {_qi(schema)} CASCADE")
    finally:
        await conn.close()


class Stores:
    """Opens stores of the backend under test: :meth:`open` one, :meth:`replica` one another
    process would use on the same data (SQLite: another connection to the file; PostgreSQL:
    another pool on the schema; memory: the same store, as one process shares it)."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.path = tmp_path / "state" / "grants.db"
        self.schema = f'TmGrants-{uuid.uuid4().hex[:10]}"q'  # quoted everywhere, or this fails
        self.opened: list[GrantStore] = []

    async def open(self, **options: int) -> GrantStore:
        store: GrantStore
        if self.kind == "memory":
            store = MemoryGrants(**options)
        elif self.kind == "sqlite":
            store = SqliteGrants(self.path, **options)
        else:
            store = PostgresGrants(_pg_url(self.schema), **options)
        await store.open()
        self.opened.append(store)
        return store

    async def replica(self, store: GrantStore) -> GrantStore:
        return store if self.kind == "memory" else await self.open()

    async def count_pending(self) -> int:
        """The pending rows the database holds (not for memory)."""
        if self.kind == "sqlite":
            with contextlib.closing(sqlite3.connect(self.path)) as db:
                return db.execute("SELECT count(*) FROM toolmesh_mcp_pending").fetchone()[0]
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            return await conn.fetchval(
                f"SELECT count(*) FROM {_qi(self.schema)}.toolmesh_mcp_pending")
        finally:
            await conn.close()


@contextlib.asynccontextmanager
async def _stores(kind: str, tmp_path: Path) -> AsyncIterator[Stores]:
    s = Stores(kind, tmp_path)
    try:
        yield s
    finally:
        for store in s.opened:
            await store.close()
        if kind == "postgres":
            await _drop_schema(s.schema)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    async with _stores(request.param, tmp_path) as s:
        yield s


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db_stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    """The stores that keep their data in a database."""
    async with _stores(request.param, tmp_path) as s:
        yield s


@pytest.fixture
async def pg_schema() -> AsyncIterator[str]:
    """A schema name of the test's own, dropped after."""
    schema = f'TmGrants-{uuid.uuid4().hex[:10]}"q'
    yield schema
    await _drop_schema(schema)


def grant(resource: str = "https://mcp.example/a", *, workspace: str = "default",
          principal: str = "user:alice", secret: str = SECRET, **more: object) -> StoredGrant:
    fields: dict = {"issuer": "https://auth.example", "scope": "read write",
                    "expires_at": 1_900_000_000.25, "obtained": 1_800_000_000.5}
    fields.update(more)
    return StoredGrant(workspace=workspace, principal=principal, resource=resource,
                       secret=secret, **fields)


def pending(state: str, *, expires_in: float = 600.0, principal: str = "user:alice"
            ) -> StoredPending:
    return StoredPending(state=state, workspace="default", principal=principal,
                         expires_at=time.time() + expires_in, secret=f"verifier-of-{state}")


# --- the contract: every store -----------------------------------------------------------

async def test_a_grant_is_kept_read_back_and_replaced(stores: Stores) -> None:
    store = await stores.open()
    assert await store.get("default", "user:alice", "https://mcp.example/a") is None
    first = grant()
    await store.put(first)
    assert await store.get("default", "user:alice", "https://mcp.example/a") == first

    refreshed = grant(issuer="https://other-auth.example", scope=None, expires_at=None,
                      obtained=1_800_000_900.75, secret="rt-new")
    await store.put(refreshed)
    assert await store.get("default", "user:alice", "https://mcp.example/a") == refreshed
    assert await store.list("default") == [refreshed]
    # each part of the key tells grants apart
    assert await store.get("other", "user:alice", "https://mcp.example/a") is None
    assert await store.get("default", "user:bob", "https://mcp.example/a") is None
    assert await store.get("default", "user:alice", "https://mcp.example/b") is None


async def test_delete_forgets_one_grant_or_all_of_a_principal_and_no_one_elses(
        stores: Stores) -> None:
    store = await stores.open()
    kept = [grant("https://mcp.example/a", principal="user:bob"),
            grant("https://mcp.example/a", principal="workspace"),
            grant("https://mcp.example/a", workspace="other"),
            grant("https://mcp.example/b", workspace="other")]
    for g in [grant("https://mcp.example/a"), grant("https://mcp.example/b"),
              grant("https://mcp.example/c"), *kept]:
        await store.put(g)

    assert await store.delete("default", "user:alice", "https://mcp.example/a") == 1
    assert await store.delete("default", "user:alice", "https://mcp.example/a") == 0
    assert await store.get("default", "user:alice", "https://mcp.example/a") is None
    assert await store.get("default", "user:alice", "https://mcp.example/b") is not None

    assert await store.delete("default", "user:alice") == 2
    assert await store.delete("default", "user:alice") == 0
    assert await store.list("default", "user:alice") == []
    everyone = await store.list("default") + await store.list("other")
    assert sorted(everyone, key=repr) == sorted(kept, key=repr)


async def test_list_is_by_resource_then_principal_and_filters(stores: Stores) -> None:
    store = await stores.open()
    # case, accents and punctuation: the order is code points' whatever the collation
    resources = ["https://b.example/mcp", "https://B.example/mcp", "https://a.example/mcp",
                 "https://é.example/mcp", "https://a.example/mcp-2", "https://a.example/m_p"]
    made = [grant(r, principal=p) for r in resources for p in ("user:zoe", "user:Al", "workspace")]
    for g in reversed(made):
        await store.put(g)
    await store.put(grant("https://a.example/mcp", workspace="other"))

    assert await store.list("default") == sorted(made, key=lambda g: (g.resource, g.principal))
    assert await store.list("default", "user:Al") == sorted(
        (g for g in made if g.principal == "user:Al"), key=lambda g: g.resource)
    assert await store.list("default", "user:nobody") == []
    assert await store.list("nowhere") == []
    assert [g.workspace for g in await store.list("other")] == ["other"]


async def test_a_pending_login_is_taken_once(stores: Stores) -> None:
    store = await stores.open()
    login = pending("s1")
    await store.put_pending(login)
    await store.put_pending(pending("s2"))
    assert await store.take_pending("s1", now=time.time()) == login
    assert await store.take_pending("s1", now=time.time()) is None
    assert await store.take_pending("never", now=time.time()) is None
    second = await store.take_pending("s2", now=time.time())
    assert second is not None and second.state == "s2"


async def test_a_pending_login_put_again_is_replaced(stores: Stores) -> None:
    store = await stores.open()
    await store.put_pending(pending("s1"))
    again = pending("s1", expires_in=900, principal="user:bob")
    await store.put_pending(again)
    assert await store.take_pending("s1", now=time.time()) == again


async def test_two_takes_of_one_state_at_once_get_it_once(stores: Stores) -> None:
    store = await stores.open()
    other = await stores.replica(store)
    states = [f"race-{i}" for i in range(20)]
    for s in states:
        await store.put_pending(pending(s))
    now = time.time()
    taken = await asyncio.gather(*(s.take_pending(state, now=now)
                                   for state in states for s in (store, other)))
    won = [t.state for t in taken if t is not None]
    assert sorted(won) == sorted(states)  # each state once, none lost


async def test_an_expired_pending_login_is_none_and_gone(stores: Stores) -> None:
    store = await stores.open()
    login = pending("late")
    await store.put_pending(login)
    assert await store.take_pending("late", now=login.expires_at + 1) is None
    # taken even so: a second try in time finds nothing either
    assert await store.take_pending("late", now=login.expires_at - 1) is None
    # the last moment still counts
    await store.put_pending(login)
    assert await store.take_pending("late", now=login.expires_at) == login


async def test_pending_logins_are_capped_by_dropping_the_soonest_to_expire(
        stores: Stores) -> None:
    store = await stores.open(max_pending=3)
    for state, expires_in in [("b", 200), ("a", 100), ("c", 300)]:
        await store.put_pending(pending(state, expires_in=expires_in))
    # replacing one at the cap takes no one else's room
    await store.put_pending(pending("c", expires_in=400))
    now = time.time()
    assert [s for s in "abc" if await store.take_pending(s, now=now)] == ["a", "b", "c"]

    for state, expires_in in [("b", 200), ("a", 100), ("c", 300), ("d", 50)]:
        await store.put_pending(pending(state, expires_in=expires_in))
    # "a" expired soonest of those there before "d"; "d" itself is kept though sooner still
    assert [s for s in "abcd" if await store.take_pending(s, now=now)] == ["b", "c", "d"]


async def test_client_registrations_are_kept_and_replaced(stores: Stores) -> None:
    store = await stores.open()
    assert await store.get_client("https://auth.example", "https://tm.example/cb") is None
    await store.put_client("https://auth.example", "https://tm.example/cb", '{"id": "c1"}')
    await store.put_client("https://auth.example", "https://tm.example/cb2", '{"id": "c2"}')
    await store.put_client("https://auth2.example", "https://tm.example/cb", '{"id": "c3"}')
    await store.put_client("https://auth.example", "https://tm.example/cb", '{"id": "c4"}')
    assert await store.get_client("https://auth.example", "https://tm.example/cb") == \
        '{"id": "c4"}'
    assert await store.get_client("https://auth.example", "https://tm.example/cb2") == \
        '{"id": "c2"}'
    assert await store.get_client("https://auth2.example", "https://tm.example/cb") == \
        '{"id": "c3"}'


async def test_a_replica_sees_what_another_kept(stores: Stores) -> None:
    store = await stores.open()
    other = await stores.replica(store)
    await store.put(grant())
    await store.put_client("https://auth.example", "https://tm.example/cb", "c")
    await store.put_pending(pending("s1"))
    assert await other.get("default", "user:alice", "https://mcp.example/a") == grant()
    assert await other.get_client("https://auth.example", "https://tm.example/cb") == "c"
    assert await other.take_pending("s1", now=time.time()) is not None


# --- the stores in a database ------------------------------------------------------------

async def test_starting_a_login_drops_the_expired_ones(db_stores: Stores) -> None:
    store = await db_stores.open()
    await store.put_pending(pending("old-1", expires_in=-5))
    await store.put_pending(pending("old-2", expires_in=-1))
    await store.put_pending(pending("live", expires_in=60))
    assert await db_stores.count_pending() == 1
    assert await store.take_pending("live", now=time.time()) is not None


async def test_a_closed_store_says_so(db_stores: Stores) -> None:
    store = await db_stores.open()
    await store.close()
    with pytest.raises(GrantStoreError, match="not open"):
        await store.get("default", "user:alice", "https://mcp.example/a")


async def test_a_sqlite_file_reopened_keeps_its_grants(tmp_path: Path) -> None:
    path = tmp_path / "grants.db"
    store = SqliteGrants(path)
    await store.open()
    await store.put(grant())
    await store.put_client("https://auth.example", "https://tm.example/cb", "c")
    await store.close()
    await store.close()  # twice: nothing

    again = SqliteGrants(path)
    await again.open()
    try:
        assert await again.list("default") == [grant()]
        assert await again.get_client("https://auth.example", "https://tm.example/cb") == "c"
    finally:
        await again.close()


async def test_a_sqlite_file_is_made_owner_only_in_a_folder_made_for_it(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "grants.db"
    store = SqliteGrants(path)
    await store.open()
    try:
        await store.put(grant())
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        for side in ("-wal", "-shm"):
            assert stat.S_IMODE(Path(f"{path}{side}").stat().st_mode) == 0o600
        with contextlib.closing(sqlite3.connect(path)) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        await store.close()


async def test_a_sqlite_store_that_cannot_be_opened_says_where(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(GrantStoreError, match="cannot open the MCP login store .*a-file"):
        await SqliteGrants(blocker / "grants.db").open()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database, just some bytes " * 200)
    with pytest.raises(GrantStoreError, match="garbage.db"):
        await SqliteGrants(garbage).open()


@pytest.mark.parametrize(("name", "expected"), [
    ("grants.db", Path("grants.db")),
    ("  /var/tm/grants.db ", Path("/var/tm/grants.db")),
    ("sqlite:///var/tm/grants.db", Path("/var/tm/grants.db")),
    ("SQLITE:///var/tm/my%20grants.db", Path("/var/tm/my grants.db")),
    ("sqlite:state/grants.db", Path("state/grants.db")),
    ("sqlite:~/grants.db", Path("~/grants.db").expanduser()),
    ("~/tm/grants.db", Path("~/tm/grants.db").expanduser()),
    ("./odd:name.db", Path("odd:name.db")),
])
def test_sqlite_path_reads_the_forms_of_a_file_name(name: str, expected: Path) -> None:
    assert sqlite_path(name) == expected


@pytest.mark.parametrize(("name", "reason"), [
    ("http://u:hunter2@example.com/grants", "http: is not a SQLite file"),
    ("redis://example.com/0", "redis: is not a SQLite file"),
    ("mysql:grants", "mysql: is not a SQLite file"),
    ("sqlite://host/grants.db", "three slashes"),
    ("sqlite:///grants.db?mode=ro", "no options"),
    ("sqlite:", "no file named"),
    ("sqlite:///", "no file named"),
    ("  ", "no file named"),
])
def test_sqlite_path_refuses_what_is_not_a_file_and_says_why(name: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as e:
        sqlite_path(name)
    assert "hunter2" not in str(e.value)


@pytest.mark.postgres
async def test_replicas_starting_together_both_open_a_new_schema(pg_schema: str) -> None:
    stores = [PostgresGrants(_pg_url(pg_schema)) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        await stores[0].put(grant())
        assert [await s.get("default", "user:alice", "https://mcp.example/a")
                for s in stores] == [grant()] * 4
    finally:
        for s in stores:
            await s.close()


@pytest.mark.postgres
async def test_a_postgres_store_that_cannot_be_reached_keeps_the_password_out() -> None:
    store = PostgresGrants("postgresql://root:hunter2@127.0.0.1:1/test?password=hunter3",
                           connect_timeout=5)
    with pytest.raises(GrantStoreError) as e:
        await store.open()
    message = e.value.message
    assert "cannot open the MCP login store at postgresql://root:***@127.0.0.1:1/test" in message
    assert "check that PostgreSQL runs there" in message
    assert "hunter2" not in message and "hunter3" not in message


def test_a_postgres_url_naming_two_schemas_is_refused() -> None:
    with pytest.raises(GrantStoreError, match="MCP login store URL .* more than one schema"):
        PostgresGrants("postgresql://root:hunter2@h/db?schema=a&schema=b")


# --- as open_grants opens them: sealed -----------------------------------------------------

@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    made = Fernet.generate_key().decode()
    monkeypatch.setenv(KEY_ENV, made)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    return made


async def _keep_secrets(store: GrantStore) -> None:
    await store.put(grant(secret=SECRET))
    await store.put_pending(StoredPending(state="s1", workspace="default",
                                          principal="user:alice",
                                          expires_at=time.time() + 600,
                                          secret=f"verifier-{SECRET}"))
    await store.put_client("https://auth.example", "https://tm.example/cb", f"client-{SECRET}")


@pytest.mark.usefixtures("no_key")
async def test_open_grants_sqlite_keeps_no_secret_in_clear_and_makes_a_private_key(
        tmp_path: Path) -> None:
    folder = tmp_path / "data"
    store = await open_grants(f"sqlite://{folder / 'grants.db'}")
    try:
        assert isinstance(store, SealedGrants) and isinstance(store.inner, SqliteGrants)
        await _keep_secrets(store)
        opened = await store.get("default", "user:alice", "https://mcp.example/a")
        assert opened is not None and opened.secret == SECRET
        # the database and its WAL, while open
        on_disk = {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix != ".key"}
        assert "grants.db-wal" in on_disk
        assert all(SECRET.encode() not in data for data in on_disk.values())
    finally:
        await store.close()
    on_disk = {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix != ".key"}
    assert on_disk["grants.db"] and all(SECRET.encode() not in d for d in on_disk.values())
    with contextlib.closing(sqlite3.connect(folder / "grants.db")) as db:
        assert db.execute("SELECT secret FROM toolmesh_mcp_grants").fetchone()[0] \
            .startswith(PREFIX)

    key_file = folder / "grants.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    # the same key next time: what was kept is read back
    again = await open_grants(str(folder / "grants.db"))
    try:
        login = await again.take_pending("s1", now=time.time())
        assert login is not None and login.secret == f"verifier-{SECRET}"
        assert await again.get_client("https://auth.example", "https://tm.example/cb") \
            == f"client-{SECRET}"
    finally:
        await again.close()


@pytest.mark.usefixtures("no_key")
async def test_open_grants_refuses_postgres_without_the_deployments_key() -> None:
    with pytest.raises(GrantStoreError, match=f"{KEY_ENV} is not set") as e:
        await open_grants("postgresql://root:hunter2@127.0.0.1:5432/test?schema=never_made")
    assert "postgresql://root:***@127.0.0.1:5432/test" in e.value.message
    assert "hunter2" not in e.value.message


@pytest.mark.postgres
@pytest.mark.usefixtures("key")
async def test_open_grants_postgres_keeps_ciphertext_in_the_database(pg_schema: str) -> None:
    store = await open_grants(_pg_url(pg_schema))
    try:
        assert isinstance(store, SealedGrants) and isinstance(store.inner, PostgresGrants)
        await _keep_secrets(store)
        opened = await store.get("default", "user:alice", "https://mcp.example/a")
        assert opened is not None and opened.secret == SECRET
    finally:
        await store.close()
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        s = _qi(pg_schema)
        kept = [await conn.fetchval(f"SELECT secret FROM {s}.{table}")
                for table in ("toolmesh_mcp_grants", "toolmesh_mcp_pending",
                              "toolmesh_mcp_clients")]
    finally:
        await conn.close()
    assert all(k.startswith(PREFIX) and SECRET not in k for k in kept), kept


@pytest.mark.parametrize("url", ["http://u:s3cr3tpw@example.com/grants", "redis://h:6379/0",
                                 "sqlite://somehost/grants.db", "ftp:grants"])
async def test_open_grants_refuses_an_unknown_store(url: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # were it taken for a file, it would be made here
    with pytest.raises(GrantStoreError, match="unsupported MCP login store") as e:
        await open_grants(url)
    assert "s3cr3tpw" not in e.value.message
    assert list(tmp_path.iterdir()) == []


async def test_open_grants_memory_is_a_memory_store() -> None:
    store = await open_grants("memory")
    assert isinstance(store, MemoryGrants)
