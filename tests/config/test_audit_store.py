"""The audit and the token table of the config store, on SQLite and on the real PostgreSQL
(the same contract, written once: see test_store_contract.py for the backends)."""

from __future__ import annotations

import re

import pytest

from tests.config import test_store_contract as contract
from toolmesh.config.errors import ConfigError
from toolmesh.config.store import ConfigStore
from toolmesh.config.store.base import AUDIT_KEPT, HISTORY_LIMIT, StoredToken
from toolmesh.config.tokens import digest, mint

Backend = contract.Backend
# the contract's fixtures: each test runs once per backend
backend = contract.backend
store = contract.store

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def rows(entries: list) -> list[tuple]:
    return [(e.actor, e.workspace, e.operation, e.type, e.key, e.version) for e in entries]


async def test_every_put_and_delete_is_audited_newest_first(store: ConfigStore) -> None:
    await store.put("ws1", [("tool", "a", "1"), ("mcp", "m", "{}")], actor="admin")
    await store.put("ws2", [("tool", "a", "2")], actor="0123456789ab")
    await store.delete("ws1", [("tool", "a")], actor="local")
    await store.put("ws1", [("tool", "b", "3")])  # nobody named: the system
    history = await store.history()
    assert rows(history) == [
        ("system", "ws1", "put", "tool", "b", 4),
        ("local", "ws1", "delete", "tool", "a", 3),
        ("0123456789ab", "ws2", "put", "tool", "a", 2),
        ("admin", "ws1", "put", "mcp", "m", 1),
        ("admin", "ws1", "put", "tool", "a", 1),
    ]
    assert all(ISO.fullmatch(e.at) for e in history)
    assert [e.at for e in history] == sorted((e.at for e in history), reverse=True)
    assert history[0].to_wire() == {"at": history[0].at, "actor": "system", "workspace": "ws1",
                                    "operation": "put", "type": "tool", "key": "b",
                                    "version": 4}


async def test_history_filters_and_limits(store: ConfigStore) -> None:
    for n in range(5):
        await store.put("ws1", [("tool", "a", str(n)), ("tool", "b", str(n))], actor=f"t{n}")
    await store.put("ws2", [("tool", "a", "x")], actor="other")
    assert rows(await store.history(workspace="ws2")) == [("other", "ws2", "put", "tool", "a", 6)]
    only_a = await store.history(workspace="ws1", type="tool", key="a", limit=2)
    assert rows(only_a) == [("t4", "ws1", "put", "tool", "a", 5),
                            ("t3", "ws1", "put", "tool", "a", 4)]
    assert len(await store.history(type="tool")) == 11
    assert await store.history(type="mcp") == []
    assert len(await store.history(limit=HISTORY_LIMIT)) == 11
    for bad in (0, -1, HISTORY_LIMIT + 1, "5", True, 2.0):
        with pytest.raises(ConfigError, match="limit must be a whole number"):
            await store.history(limit=bad)
    with pytest.raises(ConfigError):
        await store.history(workspace="")


async def test_a_replayed_request_and_a_failed_write_audit_nothing(
        store: ConfigStore, backend: Backend) -> None:
    await store.put("w", [("t", "k", "1")], request_id="r1", actor="a")
    assert await store.put("w", [("t", "k", "2")], request_id="r1", actor="b") == 1
    await backend.refuse_value()
    with pytest.raises(ConfigError):
        await store.put("w", [("t", "k", "refused-by-test-trigger")], actor="c")
    assert rows(await store.history()) == [("a", "w", "put", "t", "k", 1)]


async def test_the_audit_keeps_the_newest_entries(backend: Backend) -> None:
    store = await backend.open()
    # made to look like a store near its bound: the bound is what is checked, not the count
    await store.put("w", [("t", "k", "0")], actor="first")
    await backend.sql(f"UPDATE {{s}}toolmesh_config_audit SET seq = seq - {AUDIT_KEPT}")
    await store.put("w", [("t", "k", "1")], actor="second")
    assert rows(await store.history()) == [("second", "w", "put", "t", "k", 2)]


async def test_an_actor_must_be_a_name(store: ConfigStore) -> None:
    for bad in ("", None, 5, "nul\x00"):
        with pytest.raises(ConfigError):
            await store.put("w", [("t", "k", "v")], actor=bad)  # type: ignore[arg-type]
    assert await store.version() == 0


async def test_tokens_are_stored_as_digests_and_their_changes_audited(
        store: ConfigStore, backend: Backend) -> None:
    id, token = mint()
    made = await store.add_token(StoredToken(id=id, digest=digest(token), workspaces=("ws2",),
                                             capabilities=("agent", "config:read"),
                                             name="ci bot"), actor="admin")
    assert ISO.fullmatch(made.created)
    assert await store.tokens() == [made]
    assert made.workspaces == ("ws2",) and made.capabilities == ("agent", "config:read")
    # the token itself is nowhere in the database
    dumped = await backend.sql("SELECT * FROM {s}toolmesh_tokens")
    assert token not in repr(dumped) and made.digest in repr(dumped)
    with pytest.raises(ConfigError, match="exists already"):
        await store.add_token(StoredToken(id=id, digest="other", workspaces=("w",),
                                          capabilities=("agent",)), actor="admin")
    with pytest.raises(ConfigError, match="at least one workspace"):
        await store.add_token(StoredToken(id="x", digest="d", workspaces=(),
                                          capabilities=("agent",)), actor="admin")
    assert await store.remove_token(id, actor="local") is True
    assert await store.remove_token(id, actor="local") is False
    assert await store.tokens() == []
    # token changes belong to no workspace; config versions do not move
    assert rows(await store.history()) == [("local", "*", "token-revoke", "token", id, None),
                                           ("admin", "*", "token-create", "token", id, None)]
    assert await store.history(workspace="ws2") == []
    assert await store.version() == 0


async def test_tables_are_added_to_a_store_made_before_them(backend: Backend) -> None:
    store = await backend.open()
    await store.put("w", [("t", "k", "v")], actor="a")
    await store.close()
    backend.stores.remove(store)
    await backend.sql("DROP TABLE {s}toolmesh_config_audit")
    await backend.sql("DROP TABLE {s}toolmesh_tokens")
    store = await backend.open()
    assert await store.get("w", [("t", "k")]) == ["v"]
    assert await store.history() == [] and await store.tokens() == []
    await store.put("w", [("t", "k", "w")], actor="b")
    assert rows(await store.history()) == [("b", "w", "put", "t", "k", 2)]
