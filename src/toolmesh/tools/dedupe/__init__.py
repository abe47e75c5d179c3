"""Each call of a tool service once: the dedupe store a
:class:`~toolmesh.tools.DynamicToolService` keeps by idempotency key (the seam:
:mod:`.store`; in memory: :mod:`.memory`; shared by replicas: :mod:`.postgres`)."""

from __future__ import annotations

from toolmesh.tools.dedupe.memory import MemoryDedupe
from toolmesh.tools.dedupe.store import (
    DEFAULT_ENTRIES,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_RESULT,
    DEFAULT_TTL,
    Claim,
    Claimed,
    DedupeError,
    DedupeStore,
    Kept,
    Limits,
    Reused,
)

__all__ = ["DEFAULT_ENTRIES", "DEFAULT_MAX_BYTES", "DEFAULT_MAX_RESULT", "DEFAULT_TTL",
           "Claim", "Claimed", "DedupeError", "DedupeStore", "Kept", "Limits", "MemoryDedupe",
           "Reused", "open_dedupe"]

SUPPORTED = "memory, off, postgresql://user@host:5432/db[?schema=NAME]"


async def open_dedupe(url: str, *, limits: Limits | None = None) -> DedupeStore | None:
    """The store ``url`` names, opened: ``memory`` (this process's), ``off`` (``None``: no
    dedupe), or ``postgresql://...`` (shared by replicas). :class:`DedupeError` for anything
    else, or a database that cannot be opened."""
    from toolmesh.urls import mask_url

    name = url.strip().lower() if isinstance(url, str) else ""
    if name == "off":
        return None
    if name in ("", "memory"):
        return MemoryDedupe(limits=limits)
    if name.startswith(("postgresql://", "postgres://")):
        from toolmesh.tools.dedupe.postgres import PostgresDedupe

        store = PostgresDedupe(url, limits=limits)
        await store.open()
        return store
    raise DedupeError(f"unsupported dedupe store {mask_url(url)!r}; use one of: {SUPPORTED}")
