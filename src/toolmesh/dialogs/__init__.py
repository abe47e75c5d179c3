"""Dialogs as durable state: a journal per dialog, kept in a database (docs/dialogs.md).

One way in: :func:`open_journal` gives the :class:`DialogJournal` of a URL — the forms of the
config store's (a SQLite file or ``sqlite:///path``, ``postgresql://...``), and by default the
same database, in tables of their own.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from toolmesh.dialogs.journal import (
    ABANDONED,
    DEFAULT_KEEP,
    DEFAULT_MAX_AGE_DAYS,
    DEFAULT_MAX_BYTES,
    RUNNING,
    Begun,
    Dialog,
    DialogJournal,
    Entry,
    JournalError,
)
from toolmesh.urls import mask_url

__all__ = ["ABANDONED", "DEFAULT_KEEP", "DEFAULT_MAX_AGE_DAYS", "DEFAULT_MAX_BYTES", "RUNNING",
           "Begun", "Dialog", "DialogJournal", "Entry", "JournalError", "open_journal"]

SUPPORTED = "sqlite:///path/to/file.db, a plain file path, postgresql://user@host:5432/db"


async def open_journal(url: str, *, keep: int = DEFAULT_KEEP,
                       max_age_days: float = DEFAULT_MAX_AGE_DAYS,
                       max_bytes: int = DEFAULT_MAX_BYTES) -> DialogJournal:
    """Open (creating the tables if missing) the dialog journal at ``url``; it keeps the
    newest ``keep`` dialogs (and every running one), none that began more than
    ``max_age_days`` ago but those still running, and — the oldest finished dialogs dropped
    first — no more than ``max_bytes`` (0: no bound; docs/dialogs.md).

    Raises :class:`JournalError` for an unsupported URL or a journal that cannot be opened.
    """
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise JournalError(f"the dialogs kept must be a positive whole number, not {keep!r}")
    if not max_age_days > 0:
        raise JournalError(f"the days dialogs are kept must be positive, not {max_age_days!r}")
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
        raise JournalError("the bytes dialogs may take must be a whole number of 0 (no bound) "
                           f"or more, not {max_bytes!r}")
    journal = _journal_for(url, keep=keep, max_age_days=max_age_days, max_bytes=max_bytes)
    await journal.open()
    return journal


def _journal_for(url: str, *, keep: int, max_age_days: float, max_bytes: int) -> DialogJournal:
    if not isinstance(url, str) or not url.strip():
        raise JournalError(f"no dialog journal URL given; use one of: {SUPPORTED}")
    from toolmesh.dialogs.sqlite import SQLiteDialogJournal

    if "://" not in url:
        if url.lower().startswith("sqlite:"):
            raise JournalError(f"dialog journal URL {url!r} is not sqlite:///path/to/file.db")
        return SQLiteDialogJournal(Path(url).expanduser(), keep=keep, max_age_days=max_age_days,
                                   max_bytes=max_bytes)
    scheme = url.split("://", 1)[0].lower()
    if scheme in ("postgresql", "postgres"):
        from toolmesh.dialogs.postgres import PostgresDialogJournal

        return PostgresDialogJournal(url, keep=keep, max_age_days=max_age_days,
                                     max_bytes=max_bytes)
    if scheme == "sqlite":
        parts = urlsplit(url)
        if parts.netloc or parts.query or parts.fragment or parts.path in ("", "/"):
            raise JournalError(f"dialog journal URL {mask_url(url)!r} is not "
                               "sqlite:///path/to/file.db")
        return SQLiteDialogJournal(Path(unquote(parts.path)), keep=keep,
                                   max_age_days=max_age_days, max_bytes=max_bytes)
    raise JournalError(f"unsupported dialog journal URL {mask_url(url)!r}; use one of: "
                       f"{SUPPORTED}")
