"""The SQLite journal's rows as the journal's objects, and its objects as the rows' text."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any

from toolmesh import json_codec
from toolmesh.dialogs.journal import Dialog, Entry, check_entries, unfold
from toolmesh.dialogs.sqlite_schema import HEAD, WRITES


def to_json(value: Any) -> str:
    """JSON text of an entry or request: orjson, and text that cannot be UTF-8 (a lone
    surrogate a tool's answer held) escaped rather than refused by the database."""
    return json_codec.dumps(value).decode()


def entries_text(entries: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The text of a write's entries (refusing an entry of an unknown kind)."""
    check_entries(entries)
    return to_json([[kind, body] for kind, body in entries])


def _time(text: str | None) -> datetime | None:
    if text is None:
        return None
    return datetime.fromisoformat(text).astimezone(UTC)


def dialog(row: sqlite3.Row | tuple[Any, ...]) -> Dialog:
    """A :data:`~toolmesh.dialogs.sqlite_schema.SUMMARY` row (after its number)."""
    (id, workspace, user, question, status, started, updated, due, steps, tool_calls,
     in_token, out_token, request, folded) = row
    started_at = _time(started)
    updated_at = _time(updated)
    assert started_at is not None and updated_at is not None
    return Dialog(id=id, workspace=workspace, user=user, question=question, status=status,
                  started=started_at, updated=updated_at, due=_time(due), steps=steps,
                  tool_calls=tool_calls, in_token=in_token, out_token=out_token,
                  request=unfold(question, json.loads(request), bool(folded)))


def read_entries(db: sqlite3.Connection, n: int) -> list[Entry]:
    """The entries of the dialog numbered ``n``: its head's, then its writes', numbered."""
    started, head = db.execute(HEAD, (n,)).fetchone()
    found: list[Entry] = []
    for first, at, text in ((1, started, head), *db.execute(WRITES, (n,))):
        when = _time(at)
        assert when is not None
        found += (Entry(seq=seq, at=when, kind=kind, body=body)
                  for seq, (kind, body) in enumerate(json.loads(text), first))
    return found


def where_in(column: str, values: Collection[str] | None) -> tuple[str, list[Any]]:
    """A ``column IN (...)`` condition (always true for ``None``; never for none)."""
    if values is None:
        return "1", []
    values = list(values)
    if not values:
        return "0", []
    return f"{column} IN ({', '.join('?' * len(values))})", values
