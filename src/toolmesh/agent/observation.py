"""The size limit of an observation: what a tool returns goes into every later prompt of the
dialog, so a long result is cut, with a note saying how much is missing."""

from __future__ import annotations

#: the default limit, in bytes of UTF-8 (a few thousand tokens: enough for an answer,
#: small enough that one result cannot crowd the question out of the LLM's context)
DEFAULT_MAX_OBSERVATION = 32 * 1024


def cut(text: str, *, limit: int) -> str:
    """``text`` if it fits ``limit`` bytes of UTF-8; else its start and a note of the cut.

    Bytes, not characters, because that is what a context window and a message limit count
    more nearly; the cut never splits a character.
    """
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode(errors="ignore")  # drops a character split at the edge
    cut_bytes = len(data) - len(kept.encode())
    return (f"{kept}\n[... {cut_bytes:,} of {len(data):,} bytes cut: the observation limit is "
            f"{_size(limit)}. Ask the tool for less, e.g. a smaller range or page.]")


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n:,} bytes"
