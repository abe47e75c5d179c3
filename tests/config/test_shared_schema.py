"""Stores that share a PostgreSQL schema create it together: a deployment's parts start at once
(the config service, agents with their dialog journal, tool services with their dedupe store,
the gateway with its sign-in grants), each opening its store on the same fresh schema. Each
must open; none may fail because another created the schema first (``CREATE SCHEMA IF NOT
EXISTS`` is not safe against a concurrent create: one of two fails with a unique violation of
``pg_namespace``, as an e2e cluster once showed)."""

from __future__ import annotations

import asyncio
import os
import uuid

import asyncpg
import pytest

from toolmesh.config.store.postgres import PostgresConfigStore
from toolmesh.dialogs.postgres import PostgresDialogJournal
from toolmesh.mcp_oauth.grants.postgres import PostgresGrants
from toolmesh.tools.dedupe.postgres import PostgresDedupe

POSTGRES = os.environ.get("TOOLMESH_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test")

pytestmark = pytest.mark.postgres


async def test_every_store_opens_when_all_create_one_schema_at_once() -> None:
    schemas = [f"tm_shared_{uuid.uuid4().hex[:8]}" for _ in range(8)]
    try:
        for schema in schemas:
            url = f"{POSTGRES}?schema={schema}"
            # two of each, as two replicas of each part would
            stores = [kind(url) for kind in (PostgresConfigStore, PostgresDialogJournal,
                                             PostgresDedupe, PostgresGrants) for _ in range(2)]
            try:
                opened = await asyncio.gather(*(s.open() for s in stores),
                                              return_exceptions=True)
                assert [o for o in opened if o is not None] == [], schema
            finally:
                await asyncio.gather(*(s.close() for s in stores), return_exceptions=True)
    finally:
        conn = await asyncpg.connect(POSTGRES)
        try:
            for schema in schemas:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()
