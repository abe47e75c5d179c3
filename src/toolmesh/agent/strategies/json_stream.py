"""Following a ``json`` step's reply as it streams: the thought and the final answer are told
as they are written, before the object is complete.

:class:`JsonStepStream` reads the reply one character at a time, once: it tracks nesting and
strings, and passes on the decoded text of the top-level ``"thought"`` and ``"final_answer"``
strings (escapes included, even one split across chunks). Anything else — the action, the
arguments, a reply that is not JSON at all — it only skips over; :func:`parse_step` reads the
whole reply at the end.
"""

from __future__ import annotations

import json
from typing import Any

#: the top-level keys whose string values are told as they stream
TOLD = ("thought", "final_answer")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
            "t": "\t"}


class JsonStepStream:
    """Feeds on a reply's chunks; :meth:`feed` returns ``(thought, answer)`` text decoded from
    them (module docstring)."""

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._escape = ""  # an escape begun in one chunk, ended in the next ("\\", "\\u00")
        self._key: list[str] | None = None  # the top-level key being read
        self._last_key = ""
        self._expect_key = False  # the next top-level string is a key
        self._telling: str | None = None  # which of TOLD is being read
        self._pending_high: str = ""  # a high surrogate waiting for its low half
        #: the top-level string value being told was not finished (the reply was cut)
        self.open: str | None = None

    def feed(self, chunk: str) -> tuple[str, str]:
        out: dict[str, list[str]] = {"thought": [], "final_answer": []}
        for c in chunk:
            if self._in_string:
                self._string_char(c, out)
            elif c == '"':
                self._in_string = True
                if self._depth == 1 and self._expect_key:
                    self._key = []
                elif self._depth == 1 and self._last_key in TOLD:
                    self._telling = self._last_key
                    self.open = self._telling
            elif c in "{[":
                self._depth += 1
                if self._depth == 1:
                    self._expect_key = True
            elif c in "}]":
                self._depth -= 1
            elif c == "," and self._depth == 1:
                self._expect_key = True
            elif c == ":" and self._depth == 1:
                self._expect_key = False
        return "".join(out["thought"]), "".join(out["final_answer"])

    def _string_char(self, c: str, out: dict[str, list[str]]) -> None:
        if self._escape:
            self._escape += c
            text = self._decode_escape()
            if text is None:
                return
            self._escape = ""
            self._emit(text, out)
            return
        if c == "\\":
            self._escape = c
            return
        if c == '"':
            self._in_string = False
            if self._key is not None:
                self._last_key = "".join(self._key)
                self._key = None
            elif self._telling is not None:
                self._telling = None
                self.open = None
            return
        self._emit(c, out)

    def _decode_escape(self) -> str | None:
        """The text of the escape read so far, ``None`` while it is incomplete."""
        kind = self._escape[1]
        if kind != "u":
            return _ESCAPES.get(kind, kind)
        if len(self._escape) < 6:
            return None
        try:
            code = int(self._escape[2:6], 16)
        except ValueError:
            return ""
        if 0xD800 <= code < 0xDC00:  # the first half of a pair: wait for the second
            self._pending_high = chr(code)
            return ""
        if 0xDC00 <= code < 0xE000 and self._pending_high:
            pair = (self._pending_high + chr(code)).encode("utf-16", "surrogatepass")
            self._pending_high = ""
            return pair.decode("utf-16")
        return chr(code)

    def _emit(self, text: str, out: dict[str, list[str]]) -> None:
        if self._key is not None:
            self._key.append(text)
        elif self._telling is not None and text:
            out[self._telling].append(text)


def parse_step(text: str) -> dict[str, Any] | None:
    """The reply as one JSON object — the first one in it, so that fences or words around it
    (a server that ignored the schema) do no harm — or ``None``. Control characters inside
    strings are accepted: grammar-constrained servers let raw newlines through."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder(strict=False).raw_decode(text[start:])
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
