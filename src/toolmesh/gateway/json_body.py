"""Client JSON, parsed once at the edge into something every later step can handle.

The standard library accepts JSON the rest of the system cannot carry: nesting deep enough to
exhaust the recursion limit when it is encoded again for the bus, and strings holding lone
surrogates (``"\\ud800"``) that no UTF-8 encoder accepts. Both are refused here, with a
``bad-request`` error that says what was wrong, instead of failing somewhere downstream.
"""

from __future__ import annotations

import json
from typing import Any

from toolmesh.errors import ToolmeshError
from toolmesh.schema import json_text
from toolmesh.schema.json_text import MAX_DEPTH

__all__ = ["MAX_DEPTH", "BadJson", "check_json", "parse_json", "top_level_id", "valid_text"]


class BadJson(ToolmeshError):
    """The body or frame is not JSON the gateway accepts; ``value`` is what it decoded to,
    when it could be decoded at all (a WebSocket error frame still wants its ``id``)."""

    type = "bad-request"

    def __init__(self, message: str, *, value: Any = None) -> None:
        super().__init__(message)
        self.value = value


def parse_json(raw: bytes | str, *, max_depth: int = MAX_DEPTH, what: str = "the body") -> Any:
    """``raw`` decoded, or :class:`BadJson` saying why it cannot be (the same rule as JSON
    text inside fields, :mod:`toolmesh.schema.json_text`)."""
    try:
        value = json_text.decode(raw, what=what, max_depth=max_depth)
    except json_text.JsonTextError as e:
        raise BadJson(str(e)) from None
    try:
        check_json(value, max_depth=max_depth, what=what)
    except BadJson as e:
        e.value = value
        raise
    return value


def valid_text(s: str) -> bool:
    """True unless ``s`` holds lone surrogates (from ``\\ud800`` escapes, or the
    ``surrogateescape`` aiohttp decodes non-UTF-8 header bytes with)."""
    return json_text.valid_text(s)


def check_json(value: Any, *, max_depth: int = MAX_DEPTH, what: str = "the body") -> None:
    """Refuse nesting beyond ``max_depth`` and strings that are not valid Unicode."""
    try:
        json_text.check(value, what=what, max_depth=max_depth)
    except json_text.JsonTextError as e:
        raise BadJson(str(e)) from None


def top_level_id(text: str) -> str | int | None:
    """The ``"id"`` member of the JSON object ``text``, found without decoding the rest.

    For frames the gateway refuses to decode (too deep, an integer too long): the error frame
    should still carry the request's id. One pass over the text, tracking strings and depth.
    """
    decoder = json.JSONDecoder()
    depth = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            if depth == 1 and text[i:end + 1] == '"id"':
                j = end + 1
                while j < n and text[j] in " \t\r\n":
                    j += 1
                if j < n and text[j] == ":":
                    try:
                        value, _ = decoder.raw_decode(text, j + 1 + len(text[j + 1:]) -
                                                      len(text[j + 1:].lstrip()))
                    except (ValueError, RecursionError):
                        return None
                    if isinstance(value, bool) or not isinstance(value, (str, int)):
                        return None
                    return value
            i = end + 1
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        i += 1
    return None


