"""How the ``toolmesh`` commands show a listing: one place, so every command agrees.

* A table (:func:`table`, :func:`print_table`): aligned columns under a header, the last column
  unpadded (it holds the long text: reasons, URLs), nothing wrapped or cut. On a terminal the
  header is bold and cells may carry a style (a status in colour, secondary columns dim);
  anywhere else — a pipe, a file, a test capturing the output — it is the same text without
  a single escape sequence, so a script can rely on it byte for byte.
* JSON (:func:`json_text`, :func:`print_json`) for ``--json``: indented by 2, object keys
  sorted, non-ASCII as is; the same whatever stdout is.

Colour follows, in this order: ``TOOLMESH_COLOR`` (``always``, ``never``; ``auto`` or unset:
decide below), ``NO_COLOR`` (set and not empty: never, see https://no-color.org),
``FORCE_COLOR`` (set, not empty and not ``0``: always), else only when the stream is a
terminal whose ``TERM`` is not ``dumb``.

Cells are made safe to print: control characters (an escape sequence hidden in a config key,
a line break in a reason) are shown escaped (``\\x1b``, ``\\n``), so data cannot move the
cursor, recolour the terminal or break a row in two. Standard library only: the CLI starts
in a fraction of a second and should stay that way.
"""

from __future__ import annotations

import json
import os
import re
import sys
import unicodedata
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

COLOR_ENV = "TOOLMESH_COLOR"

#: SGR codes of the styles a cell may carry
STYLES: Mapping[str, str] = {
    "bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34",
    "magenta": "35", "cyan": "36",
}

#: the style of each status word the commands show (anything else: unstyled)
STATUS_STYLES: Mapping[str, str] = {
    "available": "green", "not offered": "yellow",
    "put": "green", "delete": "red", "token-create": "cyan", "token-revoke": "magenta",
}

_RESET = "\x1b[0m"
# C0 controls, DEL and C1 controls (0x9b is a one-byte CSI on some terminals)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# the same characters raw inside JSON text: json.dumps(ensure_ascii=False) leaves DEL and the
# C1 range unescaped; \uXXXX is what it would write for them with ensure_ascii
_JSON_RAW = re.compile(r"[\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class Cell:
    """A table cell with a style (a key of :data:`STYLES`; ``""``: none)."""

    text: str
    style: str = ""


def color_enabled(stream: TextIO | None = None, *,
                  environ: Mapping[str, str] | None = None) -> bool:
    """Whether output to ``stream`` (default: stdout) should be in colour (see the module
    docstring for the order of the settings)."""
    env = os.environ if environ is None else environ
    stream = sys.stdout if stream is None else stream
    choice = env.get(COLOR_ENV, "").strip().lower()
    if choice in ("always", "never"):
        return choice == "always"
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR", "") not in ("", "0"):
        return True
    if env.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def printable(text: str) -> str:
    """``text`` with each control character escaped (``\\n``, ``\\x1b``...)."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}"), text)


def width(text: str) -> int:
    """The columns ``text`` takes on a terminal: wide (East Asian) characters two, combining
    marks and zero-width characters none."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me", "Cf")
               else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


def styled(text: str, style: str, *, color: bool) -> str:
    """``text`` in ``style`` when ``color``, else as it is (an empty text is never styled:
    padding must stay outside the escape codes)."""
    code = STYLES.get(style)
    if not color or not code or not text:
        return text
    return f"\x1b[{code}m{text}{_RESET}"


def status_cell(word: str) -> Cell:
    """A status word (``available``, ``not offered``, ``put``...) in its colour."""
    return Cell(word, STATUS_STYLES.get(word, ""))


def table(header: Sequence[str], rows: Iterable[Sequence[str | Cell]], *, color: bool,
          right: Collection[int] = ()) -> str:
    """``rows`` under ``header`` as aligned columns, two spaces apart, one line each (no
    trailing newline). ``right``: the indices of right-aligned columns (numbers). The last
    column is not padded unless right-aligned; trailing spaces are removed."""
    cells = [[Cell(printable(c)) if isinstance(c, str) else Cell(printable(c.text), c.style)
              for c in row] for row in rows]
    head = [Cell(printable(h), "bold") for h in header]
    lines = [head, *cells]
    for n, row in enumerate(cells):
        if len(row) != len(head):
            raise ValueError(f"row {n} has {len(row)} cells, the header {len(head)}")
    last = len(head) - 1
    widths = [max(width(row[i].text) for row in lines) for i in range(len(head))]
    out = []
    for row in lines:
        parts = []
        for i, cell in enumerate(row):
            pad = " " * (widths[i] - width(cell.text))
            text = styled(cell.text, cell.style, color=color)
            if i in right:
                parts.append(pad + text)
            else:
                parts.append(text if i == last else text + pad)
        out.append("  ".join(parts).rstrip(" "))
    return "\n".join(out)


def print_table(header: Sequence[str], rows: Iterable[Sequence[str | Cell]], *,
                right: Collection[int] = (), stream: TextIO | None = None) -> None:
    """Print :func:`table` to ``stream`` (default: stdout), in colour if it suits the stream."""
    stream = sys.stdout if stream is None else stream
    print(table(header, rows, color=color_enabled(stream), right=right), file=stream)


def sorted_keys(data: Any) -> Any:
    """``data`` with the keys of every object in it sorted (lists keep their order): for a
    caller that puts some keys first itself and prints with ``sort_keys=False``."""
    if isinstance(data, dict):
        return {k: sorted_keys(data[k]) for k in sorted(data)}
    if isinstance(data, list):
        return [sorted_keys(v) for v in data]
    return data


def json_text(data: Any, *, sort_keys: bool = True) -> str:
    """``data`` as the commands print JSON: indented by 2, keys sorted, non-ASCII as is (but
    DEL and C1 control characters escaped, as a terminal may act on them)."""
    text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=sort_keys)
    # outside strings JSON has no such characters, so this only touches string contents
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def print_json(data: Any, *, sort_keys: bool = True, stream: TextIO | None = None) -> None:
    """Print :func:`json_text` of ``data`` and a newline to ``stream`` (default: stdout)."""
    print(json_text(data, sort_keys=sort_keys), file=sys.stdout if stream is None else stream)


def local_time(text: Any, *, zone: bool = False) -> str:
    """An ISO 8601 time (``2026-05-06T12:03:05.123Z``) as this machine's local time,
    ``2026-05-06 14:03:05`` (``zone``: with the zone's abbreviation, for a line that stands
    alone); anything that is not such a time as it is (``""`` for none)."""
    from datetime import datetime, timezone  # here: most commands show no time

    if not isinstance(text, str) or not text:
        return ""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone().strftime("%Y-%m-%d %H:%M:%S" + (" %Z" if zone else ""))


def counted(n: Any, word: str, plural: str | None = None) -> str:
    """``1 tool call``, ``2 tool calls``, ``0 steps`` (``plural``: when not ``word + "s"``);
    what is not a number shown as it is."""
    if isinstance(n, bool) or not isinstance(n, int):
        return f"{n if n is not None else '?'} {plural or word + 's'}"
    return f"{n} {word if n == 1 else plural or word + 's'}"
