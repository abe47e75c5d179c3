"""The dedupe stores' contract (toolmesh.tools.dedupe), the same for the memory store and for
PostgreSQL (the real server, a schema of each test's own), plus what only one of them does:
the memory store's bounds, PostgreSQL's replicas, leases and sweep."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from urllib.parse import quote

import asyncpg
import pytest

from toolmesh.tools.dedupe import (
    Claimed,
    DedupeError,
    DedupeStore,
    Kept,
    Limits,
    MemoryDedupe,
    Reused,
    open_dedupe,
)
from toolmesh.tools.dedupe.postgres import PostgresDedupe, _row_key
from toolmesh.tools.dedupe.store import entry_key, fingerprint

POSTGRES_URL = os.environ.get("TOOLMESH_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test")

ANSWER = ({"error": None, "response": "sent", "end_of_stream": True},)


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Stores:
    """Opens stores of the backend under test: :meth:`open` a new one, :meth:`replica` one
    another replica would use (PostgreSQL: another store on the same schema; memory: the
    same store, as replicas of one process are)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.schema = f'TmDedupe-{uuid.uuid4().hex[:10]}"q'  # quoted everywhere, or this fails
        self.opened: list[DedupeStore] = []

    async def open(self, limits: Limits | None = None, **options: object) -> DedupeStore:
        if self.kind == "memory":
            store: DedupeStore = MemoryDedupe(limits=limits)
        else:
            store = PostgresDedupe(f"{POSTGRES_URL}?schema={quote(self.schema)}",
                                   limits=limits, **options)  # type: ignore[arg-type]
        await store.open()
        self.opened.append(store)
        return store

    async def replica(self, store: DedupeStore) -> DedupeStore:
        return store if self.kind == "memory" else await self.open(store.limits)


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[Stores]:
    async with _stores(request.param) as s:
        yield s


@pytest.fixture
async def postgres_stores() -> AsyncIterator[Stores]:
    async with _stores("postgres") as s:
        yield s


@contextlib.asynccontextmanager
async def _stores(kind: str) -> AsyncIterator[Stores]:
    s = Stores(kind)
    yield s
    for store in s.opened:
        await store.close()
    if s.kind == "postgres":
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            await conn.execute(f"DROP SCHEMA IF EXISTS {_qi(s.schema)} CASCADE")
        finally:
            await conn.close()


KEY = entry_key("mailer", "default", "d1/1/c1")
CALL = fingerprint("alice", {}, {"to": "bob"})


async def test_a_key_runs_once_and_its_repeat_gets_the_kept_responses(stores: Stores) -> None:
    store = await stores.open()
    claim = await store.claim(KEY, CALL, lease=30)
    assert isinstance(claim, Claimed)
    await store.complete(claim, ANSWER, size=60)
    again = await store.claim(KEY, CALL, lease=30)
    assert again == Kept(ANSWER, 60)


async def test_a_repeat_waits_for_the_run_that_holds_the_key(stores: Stores) -> None:
    first = await stores.open()
    second = await stores.replica(first)  # another replica's (PostgreSQL)
    claim = await first.claim(KEY, CALL, lease=30)
    assert isinstance(claim, Claimed)
    repeat = asyncio.ensure_future(second.claim(KEY, CALL, lease=30))
    await asyncio.sleep(0.2)
    assert not repeat.done()  # waiting, not running beside it
    await first.complete(claim, ANSWER, size=60)
    async with asyncio.timeout(5):  # woken by the completion, not by the lease's end
        assert await repeat == Kept(ANSWER, 60)


async def test_a_released_key_is_claimed_by_the_repeat_that_waited(stores: Stores) -> None:
    first = await stores.open()
    second = await stores.replica(first)
    claim = await first.claim(KEY, CALL, lease=30)
    assert isinstance(claim, Claimed)
    repeat = asyncio.ensure_future(second.claim(KEY, CALL, lease=30))
    await asyncio.sleep(0.2)
    await first.release(claim)  # the run failed: nothing kept
    async with asyncio.timeout(5):
        assert isinstance(await repeat, Claimed)


async def test_a_waiting_repeat_cancelled_leaves_the_others_waiting(stores: Stores) -> None:
    store = await stores.open()
    claim = await store.claim(KEY, CALL, lease=30)
    assert isinstance(claim, Claimed)
    impatient = asyncio.ensure_future(store.claim(KEY, CALL, lease=30))
    patient = asyncio.ensure_future(store.claim(KEY, CALL, lease=30))
    await asyncio.sleep(0.1)
    impatient.cancel()  # its caller's deadline passed
    await asyncio.gather(impatient, return_exceptions=True)
    await store.complete(claim, ANSWER, size=60)
    async with asyncio.timeout(5):
        assert await patient == Kept(ANSWER, 60)


async def test_a_key_sent_with_another_call_is_refused(stores: Stores) -> None:
    store = await stores.open()
    other = fingerprint("mallory", {}, {"to": "bob"})
    claim = await store.claim(KEY, CALL, lease=30)
    assert isinstance(claim, Claimed)
    assert await store.claim(KEY, other, lease=30) == Reused()  # while it runs
    await store.complete(claim, ANSWER, size=60)
    assert await store.claim(KEY, other, lease=30) == Reused()  # and once it is done


async def test_a_result_too_big_to_keep_is_remembered_as_run(stores: Stores) -> None:
    store = await stores.open(Limits(max_result=100, max_bytes=1000))
    claim = await store.claim(KEY, CALL, lease=30)
    assert isinstance(claim, Claimed)
    await store.complete(claim, ANSWER, size=101)
    assert await store.claim(KEY, CALL, lease=30) == Kept(None, 101)


async def test_a_kept_call_expires_after_its_ttl(stores: Stores) -> None:
    store = await stores.open(Limits(ttl=0.3))
    claim = await store.claim(KEY, CALL, lease=30)
    assert isinstance(claim, Claimed)
    await store.complete(claim, ANSWER, size=60)
    assert isinstance(await store.claim(KEY, CALL, lease=30), Kept)
    await asyncio.sleep(0.5)
    assert isinstance(await store.claim(KEY, CALL, lease=30), Claimed)


async def test_keys_of_other_services_and_workspaces_are_apart(stores: Stores) -> None:
    store = await stores.open()
    keys = {entry_key("mailer", "default", "k"), entry_key("mailer", "other", "k"),
            entry_key("billing", "default", "k")}
    assert len(keys) == 3
    for key in keys:
        assert isinstance(await store.claim(key, CALL, lease=30), Claimed)


async def test_a_closed_store_ends_its_waiting_claims(stores: Stores) -> None:
    store = await stores.open()
    assert isinstance(await store.claim(KEY, CALL, lease=30), Claimed)
    waiting = asyncio.ensure_future(store.claim(KEY, CALL, lease=30))
    await asyncio.sleep(0.1)
    await store.close()
    with pytest.raises(DedupeError, match="closed|not open"):
        async with asyncio.timeout(5):
            await waiting


# --- the memory store's bounds ----------------------------------------------------------


async def test_the_memory_store_keeps_at_most_its_entries_least_recently_used_first() -> None:
    store = MemoryDedupe(limits=Limits(entries=3))
    for n in range(3):
        claim = await store.claim(f"k{n}", CALL, lease=30)
        assert isinstance(claim, Claimed)
        await store.complete(claim, ANSWER, size=60)
    assert isinstance(await store.claim("k0", CALL, lease=30), Kept)  # k0 used: k1 is oldest
    claim = await store.claim("k3", CALL, lease=30)
    assert isinstance(claim, Claimed)
    await store.complete(claim, ANSWER, size=60)
    assert len(store) == 3
    assert isinstance(await store.claim("k1", CALL, lease=30), Claimed)  # forgotten
    assert isinstance(await store.claim("k0", CALL, lease=30), Kept)


async def test_the_memory_store_keeps_at_most_its_bytes() -> None:
    store = MemoryDedupe(limits=Limits(max_result=400, max_bytes=1000))
    for n in range(10):
        claim = await store.claim(f"k{n}", CALL, lease=30)
        assert isinstance(claim, Claimed)
        await store.complete(claim, ANSWER, size=300)
    assert store.kept_bytes <= 1000 and len(store) == 3
    assert isinstance(await store.claim("k9", CALL, lease=30), Kept)
    assert isinstance(await store.claim("k0", CALL, lease=30), Claimed)


def test_limits_that_make_no_sense_are_refused() -> None:
    for bad in ({"entries": 0}, {"ttl": 0}, {"ttl": float("inf")}, {"max_result": -1},
                {"max_result": 2000, "max_bytes": 1000}, {"entries": True}):
        with pytest.raises(ValueError, match="dedupe"):
            Limits(**bad)  # type: ignore[arg-type]


# --- PostgreSQL: replicas, leases, the sweep --------------------------------------------


@pytest.mark.postgres
async def test_a_key_whose_holder_vanished_is_taken_once_its_lease_runs_out() -> None:
    schema = f"tm_dedupe_{uuid.uuid4().hex[:10]}"
    url = f"{POSTGRES_URL}?schema={schema}"
    dead, alive = PostgresDedupe(url), PostgresDedupe(url)
    try:
        await dead.open()
        await alive.open()
        assert isinstance(await dead.claim(KEY, CALL, lease=0.5), Claimed)
        await dead.close()  # killed: never completed, never released
        async with asyncio.timeout(5):
            assert isinstance(await alive.claim(KEY, CALL, lease=30), Claimed)
    finally:
        await alive.close()
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        finally:
            await conn.close()


@pytest.mark.postgres
async def test_the_sweep_keeps_the_newest_entries_within_the_budgets(
        postgres_stores: Stores) -> None:
    store = await postgres_stores.open(Limits(entries=3, max_result=400, max_bytes=100_000),
                             sweep_every=5)
    assert isinstance(store, PostgresDedupe)
    for n in range(6):  # the 6th completion sweeps
        claim = await store.claim(f"k{n}", CALL, lease=30)
        assert isinstance(claim, Claimed)
        await store.complete(claim, ANSWER, size=60)
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        kept = await conn.fetch(f"SELECT key FROM {_qi(store.schema)}.toolmesh_tool_calls "
                                "ORDER BY done_at")
    finally:
        await conn.close()
    assert [r["key"] for r in kept] == [_row_key(f"k{n}") for n in (3, 4, 5)]


async def test_open_dedupe_names_its_stores_and_refuses_others() -> None:
    assert await open_dedupe("off") is None
    assert isinstance(await open_dedupe("memory"), MemoryDedupe)
    with pytest.raises(DedupeError, match="unsupported dedupe store 'redis://x:\\*\\*\\*@h'"):
        await open_dedupe("redis://x:secret@h")


@pytest.mark.postgres
async def test_an_unreachable_database_is_a_dedupe_error_with_the_password_masked() -> None:
    with pytest.raises(DedupeError) as e:
        await open_dedupe("postgresql://root:hunter2@127.0.0.1:1/test")
    assert "hunter2" not in str(e.value) and "dedupe store" in str(e.value)
