"""Config persistence: one interface (:class:`ConfigStore`), a backend per database, by URL."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from toolmesh.config.errors import ConfigError
from toolmesh.config.store.base import ConfigStore
from toolmesh.urls import mask_url

__all__ = ["ConfigError", "ConfigStore", "open_store"]

SUPPORTED = "sqlite:///path/to/file.db, a plain file path, postgresql://user@host:5432/db"


async def open_store(url: str) -> ConfigStore:
    """Open (creating if missing) the config store at ``url``.

    * ``sqlite:///abs/path/config.db`` or a plain path (``config.db``, ``~/tm/config.db``) —
      a SQLite file, for one machine;
    * ``postgresql://user:password@host:5432/db?schema=NAME`` (or ``postgres://``) —
      PostgreSQL, shareable by many machines; ``schema`` defaults to ``public``.

    Raises :class:`ConfigError` for an unsupported URL or a store that cannot be opened.
    """
    store = _store_for(url)
    await store.open()
    return store


def _store_for(url: str) -> ConfigStore:
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"no config store URL given; use one of: {SUPPORTED}")
    if "://" not in url:
        if url.lower().startswith("sqlite:"):
            raise ConfigError(f"config store URL {url!r} is not sqlite:///path/to/file.db")
        from toolmesh.config.store.sqlite import SQLiteConfigStore

        return SQLiteConfigStore(Path(url).expanduser())
    scheme = url.split("://", 1)[0].lower()
    if scheme in ("postgresql", "postgres"):
        from toolmesh.config.store.postgres import PostgresConfigStore

        return PostgresConfigStore(url)
    if scheme == "sqlite":
        return _sqlite_store(url)
    raise ConfigError(f"unsupported config store URL {mask_url(url)!r}; use one of: {SUPPORTED}")


def _sqlite_store(url: str) -> ConfigStore:
    from toolmesh.config.store.sqlite import SQLiteConfigStore

    parts = urlsplit(url)
    if parts.netloc or parts.query or parts.fragment or parts.path in ("", "/"):
        # a host or options would be silently ignored: say what the form is instead
        raise ConfigError(f"config store URL {mask_url(url)!r} is not sqlite:///path/to/file.db"
                          " (three slashes, then an absolute path; no host, no options)")
    return SQLiteConfigStore(Path(unquote(parts.path)))
