"""What every benchmark reports: figures beside the floor measured in the same run.

The machine is shared and noisy, so a figure alone says little; its ratio to a floor measured
in the same run (an in-process queue RPC, a raw aio-pika RPC, ``GET /api/v1/health``, ...)
says how close toolmesh is to the least that path can cost. Each ``bench/*.py`` script:

* builds a list of :class:`Figure`;
* takes ``--json PATH`` (via :func:`add_arguments`) and calls :func:`emit`, which prints a
  line per figure and, with ``--json``, writes them for ``bench/all.py`` to gather into one
  table (markdown + JSON) that docs/performance.md's table is generated from;
* takes ``--quick`` for a shorter run (``bench/all.py`` passes it unless told otherwise).

Benchmarks stand on the package's public API and shipped helpers only (never ``tests/``), so
they run from an install with no test dependencies.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One measured figure and, when it has one, the floor it is compared with."""

    #: the script it came from (``tool_service_roundtrip``)
    bench: str
    #: what was measured, as a reader names it ("tool-service call, memory bus, sequential")
    path: str
    value: float
    #: ``µs``, ``ms``, ``calls/s``, ``MB``, ...
    unit: str
    #: the floor, in the same unit, measured in the same run
    floor: float | None = None
    #: what the floor is ("in-process queue RPC, orjson")
    floor_what: str | None = None
    #: whether a lower or a higher value is better (latency vs throughput)
    better: Literal["lower", "higher"] = "lower"
    #: the issue's bar for it, as text ("≤ 2× floor"), if it has one
    target: str | None = None
    #: anything a reader needs to read the figure right ("uvloop", "256 in flight")
    note: str | None = None

    @property
    def ratio(self) -> float | None:
        """``value / floor`` (how many floors it costs, or for throughput, how many floors'
        worth it reaches); ``None`` without a floor."""
        if self.floor is None or self.floor == 0 or math.isnan(self.floor):
            return None
        return self.value / self.floor

    def line(self) -> str:
        """The figure as one printed line."""
        text = f"{self.path}: {number(self.value)} {self.unit}"
        if self.floor is not None:
            text += f"; floor {number(self.floor)} {self.unit} ({self.floor_what or 'floor'})"
            if self.ratio is not None:
                text += f"; {self.ratio:.2f}× floor"
        if self.target:
            text += f"; target {self.target}"
        if self.note:
            text += f" [{self.note}]"
        return text


def number(value: float) -> str:
    """``value`` as figures are printed: whole and with thousands separators from 100, one
    decimal from 10, two below."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--json PATH`` and ``--quick``, which every benchmark takes."""
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="also write the figures as JSON to PATH (for bench/all.py)")
    parser.add_argument("--quick", action="store_true",
                        help="a shorter run: fewer calls, same figures")


def emit(figures: list[Figure], args: argparse.Namespace) -> None:
    """Print each figure; write them all to ``args.json`` when given."""
    for figure in figures:
        print(figure.line(), flush=True)
    if getattr(args, "json", None) is not None:
        args.json.write_text(json.dumps([{**asdict(f), "ratio": f.ratio} for f in figures],
                                        indent=2, ensure_ascii=False) + "\n")


def load(path: Path) -> list[Figure]:
    """The figures a benchmark wrote with ``--json``."""
    rows = json.loads(path.read_text())
    return [Figure(**{k: v for k, v in row.items() if k != "ratio"}) for row in rows]
