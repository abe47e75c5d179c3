"""Decoding a field that carries a JSON object either as an object or as its JSON text.

TrustGraph's wire sends ``config``, ``arguments`` and ``parameters`` as JSON-encoded strings,
while toolmesh's own callers (and config values) may hand over the object itself; every
receiver accepts both, with the same messages.
"""

from __future__ import annotations

import json
from typing import Any


def json_object(value: Any, *, name: str, empty_ok: bool = True) -> dict[str, Any]:
    """``value`` as a dict; ``None``/``""`` give ``{}`` when ``empty_ok``.

    Raises :class:`ValueError` with a message naming ``name`` (the caller turns it into its
    boundary's error type).
    """
    if empty_ok and (value is None or value == ""):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"{name} is not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object, not {type(value).__name__}")
    return value
