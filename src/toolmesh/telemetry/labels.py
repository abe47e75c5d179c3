"""Bounded label values: a metric's series must not grow with what callers send.

Every label value that is not from a fixed set (tool names, queue names, models) passes
through a :class:`BoundedValues`: the first ``limit`` distinct values are kept as they are,
every later one is counted under :data:`OTHER`. Config and the deployment decide those
values, not callers, so a deployment stays far below the limit; the limit is what keeps a
misbehaving one (a model name that changes per request, thousands of tool services) from
growing the scrape without end.
"""

from __future__ import annotations

import threading

#: the value every label value past the limit is counted under
OTHER = "_other"
#: the longest label value kept; longer ones are cut (a label is a name, not a payload)
MAX_LENGTH = 120


class BoundedValues:
    """Hands out at most ``limit`` distinct values for one label; see the module docstring."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str | None) -> str:
        if not value:
            return ""
        value = value[:MAX_LENGTH]  # first: the cut value is what is remembered
        if value in self._seen:
            return value
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) >= self.limit:
                return OTHER
            self._seen.add(value)
        return value
