"""docs/security.md lists every bound with its default: each flag that bounds a store, a queue,
a connection, a wait or a size appears in its Limits section, with the default the code has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolmesh.cli import once_options, options

SECURITY = Path(__file__).resolve().parents[2] / "docs" / "security.md"
BOUNDS = [*options.GATEWAY_BOUNDS, *options.AGENT_BOUNDS, *options.PROMPT_BOUNDS,
          *options.STREAM_BOUNDS, *once_options.DEDUPE_BOUNDS, once_options.MAX_DELIVERIES]
#: bounds that are not Bound objects (their own argparse types)
OTHER_FLAGS = ["--dialogs-max-bytes", "--dialogs-keep", "--dialogs-days", "--dedupe"]


def limits() -> str:
    text = SECURITY.read_text()
    return text[text.index("## Limits"):]


@pytest.mark.parametrize("flag", [b.flag for b in BOUNDS] + OTHER_FLAGS)
def test_each_bound_is_in_the_limits_section(flag: str) -> None:
    assert f"`{flag}`" in limits(), f"docs/security.md's Limits section does not list {flag}"


def _written(value: float) -> set[str]:
    """The ways the docs may write ``value``: 1,024 / 1024, 16 MiB, 1/16, 0.01."""
    ways = {f"{value:g}", f"{value:,g}", f"{int(value):,}" if value == int(value) else ""}
    for unit, size in (("KiB", 1024), ("MiB", 1024 ** 2)):
        if value >= size and value % size == 0:
            ways.add(f"{int(value // size)} {unit}")
    if 0 < value < 1 and (1 / value) == int(1 / value):
        ways.add(f"1/{int(1 / value)}")
    return ways - {""}


@pytest.mark.parametrize("bound", BOUNDS, ids=lambda b: b.flag)
def test_each_bounds_row_has_its_default(bound: options.Bound) -> None:
    rows = [line for line in limits().splitlines()
            if line.startswith("|") and f"`{bound.flag}`" in line]
    assert rows, bound.flag
    cells = " ".join(rows)
    found = [w for w in _written(bound.default) if re.search(rf"(?<![\d.,]){re.escape(w)}", cells)]
    assert found, (f"the row of {bound.flag} does not say its default "
                   f"({bound.default}): {rows[0]}")
