"""Secrets encrypted at rest, on SQLite and PostgreSQL: the database holds no clear secret,
every reader above the store sees the real value."""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3

import asyncpg
import pytest
from cryptography.fernet import Fernet

from tests.config.test_store_contract import POSTGRES_URL, Backend
from toolmesh.postgres import quote_ident
from toolmesh.secrets import SealedStore, SecretBox, SecretKeyError

WS = "default"
TOKEN, ENV_KEY, URL_PW = "tok-SEALED-1", "env-SEALED-2", "pw-SEALED-3"
MCP = json.dumps({"url": f"http://bob:{URL_PW}@h.example/mcp", "auth-token": TOKEN})
STDIO = json.dumps({"transport": "stdio", "command": "uvx", "args": ["x"],
                    "env": {"API_KEY": ENV_KEY}})
PLAIN = json.dumps({"type": "tool-service", "name": "n", "description": "d", "service": "s"})


async def raw_values(backend: Backend) -> list[str]:
    """Every value as the database itself holds it."""
    if backend.path is not None:
        with contextlib.closing(sqlite3.connect(backend.path)) as db:
            return [v for (v,) in db.execute("SELECT value FROM toolmesh_config")]
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        rows = await conn.fetch(f"SELECT value FROM {quote_ident(backend.schema or '')}.toolmesh_config")
    finally:
        await conn.close()
    return [r["value"] for r in rows]


def box(*keys: bytes) -> SecretBox:
    return SecretBox([k.decode() for k in keys])


async def test_secrets_are_encrypted_in_the_database_and_clear_above_it(backend: Backend) -> None:
    store = SealedStore(await backend.open(), box(Fernet.generate_key()))
    await store.survey()
    await store.put(WS, [("mcp", "w", MCP), ("mcp", "c", STDIO), ("tool", "t", PLAIN)])
    raw = "\n".join(await raw_values(backend))
    for secret in (TOKEN, ENV_KEY, URL_PW):
        assert secret not in raw
    assert "enc:v1:" in raw and PLAIN in raw  # values without secrets are stored as given
    assert await store.get(WS, [("mcp", "w"), ("mcp", "c")]) == [MCP, STDIO]
    assert (await store.values(WS, "mcp"))["w"] == MCP
    assert (await store.dump(WS))["mcp"] == {"w": MCP, "c": STDIO}


async def test_secrets_stored_before_the_key_was_set_are_encrypted_at_open(
        backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    plain = await backend.open()
    await plain.put(WS, [("mcp", "w", MCP)])
    assert TOKEN in "".join(await raw_values(backend))
    store = SealedStore(plain, box(Fernet.generate_key()))
    with caplog.at_level(logging.INFO, "toolmesh.secrets"):
        await store.survey()
    assert "encrypted the secrets of 1 config item(s)" in caplog.text
    assert TOKEN not in "".join(await raw_values(backend))
    assert await store.get(WS, [("mcp", "w")]) == [MCP]


async def test_a_rotated_key_still_reads_what_the_old_one_wrote(backend: Backend) -> None:
    old, new = Fernet.generate_key(), Fernet.generate_key()
    inner = await backend.open()
    await SealedStore(inner, box(old)).put(WS, [("mcp", "w", MCP)])
    assert await SealedStore(inner, box(new, old)).get(WS, [("mcp", "w")]) == [MCP]


async def test_without_the_key_encrypted_values_stay_encrypted_and_it_says_so(
        backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    inner = await backend.open()
    await SealedStore(inner, box(Fernet.generate_key())).put(WS, [("mcp", "w", MCP)])
    with caplog.at_level(logging.WARNING, "toolmesh.secrets"):
        await SealedStore(inner, None).survey()
    assert "encrypted secrets, but TOOLMESH_SECRET_KEY is not set" in caplog.text
    caplog.clear()
    wrong = SealedStore(inner, box(Fernet.generate_key()))
    with caplog.at_level(logging.ERROR, "toolmesh.secrets"):
        [value] = await wrong.get(WS, [("mcp", "w")])
    assert TOKEN not in value and "enc:v1:" in value
    assert "cannot be decrypted" in caplog.text


def test_a_bad_key_is_refused_with_how_to_make_one() -> None:
    with pytest.raises(SecretKeyError, match="not a Fernet key.*generate_key"):
        SecretBox.from_environment({"TOOLMESH_SECRET_KEY": "hunter2"})
    assert SecretBox.from_environment({}) is None


@pytest.mark.parametrize("keyed", [True, False], ids=["key", "no-key"])
async def test_request_ids_go_through_to_the_wrapped_store(backend: Backend, keyed: bool) -> None:
    store = SealedStore(await backend.open(), box(Fernet.generate_key()) if keyed else None)
    assert await store.put(WS, [("mcp", "w", MCP)], request_id="r1") == 1
    assert await store.put(WS, [("mcp", "w", MCP)], request_id="r1") == 1  # a redelivery
    assert await store.delete(WS, [("mcp", "w")], request_id="r2") == 2
    assert await store.delete(WS, [("mcp", "w")], request_id="r2") == 2
    assert await store.version() == 2
    assert await backend.applied() == {"r1": 1, "r2": 2}


async def test_a_value_too_deep_to_decode_is_sealed_whole(backend: Backend) -> None:
    deep = "[" * 5000 + f'"http://bob:{URL_PW}@h.example/x"' + "]" * 5000
    store = SealedStore(await backend.open(), box(Fernet.generate_key()))
    await store.survey()
    await store.put(WS, [("notes", "deep", deep)])
    assert URL_PW not in "\n".join(await raw_values(backend))
    assert await store.get(WS, [("notes", "deep")]) == [deep]
