"""What toolmesh's PostgreSQL stores share when they make their schema and tables.

The config store, the dialog journal, the tool-call dedupe store and the MCP sign-in grants may
all live in one schema (``?schema=NAME`` on each URL), and a deployment's parts start at once:
the config service, agents, tool services and the gateway each make the schema and tables they
need if they are missing. ``CREATE SCHEMA IF NOT EXISTS`` is not safe against a concurrent
create (one of two fails with a unique violation of ``pg_namespace``), so every store takes the
same lock first.
"""

from __future__ import annotations

#: taken for the transaction in which a store makes its schema and tables: one lock for every
#: store, since they may share a schema (a lock of each store's own let a config service and an
#: agent starting together race on it)
DDL_LOCK = "SELECT pg_advisory_xact_lock(hashtext('toolmesh.ddl'))"


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
