"""Decoding a field that carries a JSON object either as an object or as its JSON text.

TrustGraph's wire sends ``config``, ``arguments`` and ``parameters`` as JSON-encoded strings,
while toolmesh's own callers (and config values) may hand over the object itself; every
receiver accepts both, with the same messages. Either way the object is checked with
:func:`toolmesh.schema.json_text.check` (nesting, lone surrogates), so a value that would fail
when it is encoded again is refused here, naming the field.
"""

from __future__ import annotations

from typing import Any

from toolmesh.schema.json_text import check, loads


def json_object(value: Any, *, name: str, empty_ok: bool = True) -> dict[str, Any]:
    """``value`` as a dict; ``None``/``""`` give ``{}`` when ``empty_ok``.

    Raises :class:`ValueError` (a :class:`~toolmesh.schema.json_text.JsonTextError` for text
    that does not decode, or an object nested too deep or holding lone surrogates) with a
    message naming ``name``; the caller turns it into its boundary's error type.
    """
    if type(value) is str and value:  # the usual case first: the JSON text of an object
        value = loads(value, what=name)
    elif empty_ok and (value is None or value == ""):
        return {}
    elif isinstance(value, str):
        value = loads(value, what=name)
    elif isinstance(value, dict):
        check(value, what=name)
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object, not {type(value).__name__}")
    return value
