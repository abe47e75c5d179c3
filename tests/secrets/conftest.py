"""The store backends of the store contract tests (SQLite, PostgreSQL), for the sealed store."""

from tests.config.test_store_contract import backend  # noqa: F401  (a fixture)
