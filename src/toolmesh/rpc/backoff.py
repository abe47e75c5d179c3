"""The pauses between attempts while waiting for something only a remote party knows (a
consumer appearing on the broker): short at first, so a part that starts a moment later is
served at once, then longer, so a long wait costs little."""

from __future__ import annotations

from collections.abc import Iterator

#: first and longest pause between attempts
FIRST, LONGEST = 0.05, 1.0


def pauses(first: float = FIRST, longest: float = LONGEST) -> Iterator[float]:
    """``first``, twice that, ... up to ``longest``, forever."""
    pause = first
    while True:
        yield pause
        pause = min(pause * 2, longest)
