"""Where MCP logins are kept (the seam: :mod:`.store`; in memory: :mod:`.memory`; on disk:
:mod:`.sqlite`; shared by replicas: :mod:`.postgres`), encrypted at rest (:mod:`.sealed`)."""

from __future__ import annotations

from pathlib import Path

from toolmesh.mcp_oauth.errors import GrantStoreError
from toolmesh.mcp_oauth.grants.memory import MemoryGrants
from toolmesh.mcp_oauth.grants.sealed import SealedGrants
from toolmesh.mcp_oauth.grants.store import GrantStore, StoredGrant, StoredPending
from toolmesh.secrets.crypto import SecretBox

__all__ = ["GrantStore", "MemoryGrants", "SealedGrants", "StoredGrant", "StoredPending",
           "open_grants"]

SUPPORTED = "memory, a SQLite file (PATH or sqlite:///PATH), postgresql://user@host:5432/db"


async def open_grants(url: str, *, key_file: Path | None = None) -> GrantStore:
    """The grant store ``url`` names, opened and sealed.

    Secrets are encrypted with ``TOOLMESH_SECRET_KEY`` (or ``TOOLMESH_SECRET_KEY_FILE``).
    Without one, a SQLite store makes a key of its own in ``key_file`` (default: beside the
    database, readable by its owner only), so a copy of the database alone holds no token; a
    PostgreSQL store, which replicas on other machines share, needs the deployment's key.
    ``memory`` keeps nothing on disk and seals nothing."""
    from toolmesh.secrets.crypto import KEY_ENV, MAKE_KEY
    from toolmesh.urls import mask_url

    name = url.strip() if isinstance(url, str) else ""
    if name.lower() in ("", "memory"):
        return MemoryGrants()
    box = SecretBox.from_environment()
    store: GrantStore
    if name.lower().startswith(("postgresql://", "postgres://")):
        if box is None:
            raise GrantStoreError(
                f"MCP logins kept in PostgreSQL ({mask_url(url)}) must be encrypted, and "
                f"{KEY_ENV} is not set: make a key with {MAKE_KEY} and give every replica "
                "the same one")
        from toolmesh.mcp_oauth.grants.postgres import PostgresGrants

        store = PostgresGrants(url)
    else:
        from toolmesh.mcp_oauth.grants.sqlite import SqliteGrants, sqlite_path

        try:
            path = sqlite_path(name)
        except ValueError as e:
            raise GrantStoreError(f"unsupported MCP login store {mask_url(url)!r} ({e}); "
                                  f"use one of: {SUPPORTED}") from None
        if box is None:
            box = _own_key(key_file or path.with_suffix(".key"))
        store = SqliteGrants(path)
    await store.open()
    return SealedGrants(store, box)


def _own_key(path: Path) -> SecretBox:
    """The key in ``path``, made (owner-only) when there is none yet."""
    import os

    from cryptography.fernet import Fernet

    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # created owner-only in one step: no moment when others could read it; O_EXCL:
            # of two processes starting together, one makes it and both read it
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(Fernet.generate_key().decode() + "\n")
        text = path.read_text().strip()
    except OSError as e:
        raise GrantStoreError(f"cannot read the MCP login key {str(path)!r}: "
                              f"{e.strerror or e}") from None
    return SecretBox([text])
