"""JSON on the wire: orjson's speed with the standard library's answers.

Every message body (and the JSON text TrustGraph's wire carries inside bodies: a tool
service's ``config`` and ``arguments``) is encoded and decoded here. orjson does the work —
several times faster than :mod:`json`, which dominated a call on the in-process bus — and
wherever it would answer differently from :mod:`json`, :mod:`json` answers instead, so no
receiver, peer or test can tell which one ran:

* encoding, orjson refuses lone surrogates (which :func:`dumps` sends escaped), integers
  beyond 64 bits, non-``str`` keys and nesting past 254 levels, and writes NaN and the
  infinities as ``null``: each of these is left to ``json.dumps``, as before (it writes
  ``NaN``, which TrustGraph's Python peers read back);
* decoding, orjson refuses what ``json.loads`` takes (NaN, a byte-order mark, other UTF
  encodings, lone surrogate escapes, nesting past 1024 levels) and turns integers beyond 64
  bits into floats: :func:`fast_loads` raises :class:`Unsure` for all of these, so the caller
  decodes with ``json.loads`` and keeps its own error handling.

It also encodes what ``json.dumps`` refuses and orjson does not (UUIDs, enums other than
``IntEnum``/``StrEnum``); dataclasses and datetimes stay refused (``TypeError``) as before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import orjson

__all__ = ["Unsure", "dumps", "fast_loads"]

#: dataclasses and datetimes are refused, as json.dumps refuses them
_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME

#: maps every digit to "0" and every other byte to " ": a run of 19 zeros in the result is
#: a number orjson might not decode as json.loads does (an integer beyond 64 bits becomes a
#: float); the shortest such integer, -9223372036854775809, has 19 digits
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_NUMBER = b"0" * 19



class Unsure(ValueError):
    """:func:`fast_loads` cannot vouch that its answer would be ``json.loads``'s: decode the
    text with ``json.loads`` instead (which also says what is wrong with it, if anything)."""


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON in UTF-8: what ``json.dumps(value, separators=(",", ":"),
    ensure_ascii=False)`` gives, encoded.

    Text holding a lone surrogate cannot be UTF-8: it is sent escaped instead (ASCII JSON),
    so the sender never fails on it and the receiver refuses it as malformed.
    """
    try:
        body = orjson.dumps(value, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: json.dumps encodes it, or raises as before
        return _json_dumps(value)
    # orjson writes NaN and the infinities as null; only a body with a null can hold one
    # (find, not ``in``: bytes' ``in`` first tries its operand as an int, and costs twice)
    if body.find(b"null") >= 0 and not _finite(value):
        return _json_dumps(value)
    return body


def _json_dumps(value: Any) -> bytes:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()


def _finite(value: Any) -> bool:
    """False if ``value`` holds a NaN or an infinity anywhere. Recursive: orjson has encoded
    it already, so it is at most 254 levels deep."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        items: Iterable[Any] = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        return True
    for item in items:
        kind = type(item)
        # most values are none of the three kinds that can hold a float
        if (kind is str or kind is int or kind is bool or item is None) or _finite(item):
            continue
        return False
    return True


def fast_loads(data: bytes | bytearray | memoryview | str) -> Any:
    """``data`` decoded by orjson, which then is exactly what ``json.loads`` would give and
    holds only valid Unicode (no lone surrogate) nested at most 1024 levels deep; or
    :class:`Unsure` (see the module docstring)."""
    if type(data) is not bytes:
        if isinstance(data, str):
            try:
                data = data.encode()
            except UnicodeEncodeError:  # a lone surrogate in the text itself
                raise Unsure("not UTF-8") from None
        elif isinstance(data, memoryview):
            data = data.tobytes()
    if data.translate(_DIGITS).find(_LONG_NUMBER) >= 0:
        raise Unsure("a number of 19 digits or more")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise Unsure(str(e)) from None
