"""``GET /api/metrics/query?query=...``: the part of Prometheus' HTTP API TrustGraph's tools use.

TrustGraph's gateway passes ``/api/metrics/*`` on to the Prometheus that scrapes its
processors; ``tg-verify-system-status`` and ``tg-show-flow-state`` ask it instant queries such
as ``processor_info`` and ``consumer_state{consumer_state="running",flow="default"}``. toolmesh
has no Prometheus in between: the gateway answers such queries from the samples of its own
process (what ``/metrics`` serves), which in ``toolmesh serve`` are every service's.

Only instant vector selectors are understood: a metric name, optionally with label matchers
``=``, ``!=``, ``=~``, ``!~`` (``name{a="x",b!~"y.*"}``). Anything else (functions, operators,
ranges) is answered as Prometheus answers a query it cannot parse: HTTP 400 with
``{"status": "error", "errorType": "bad_data", "error": "..."}``, saying what is understood.
Answers: ``{"status": "success", "data": {"resultType": "vector", "result": [{"metric":
{"__name__": ..., <labels>}, "value": [<unix time>, "<value>"]}]}}``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY

#: where TrustGraph's tools look for it (``{url}api/metrics/query``)
PATH = "/api/metrics/query"
#: the ``job`` label of every sample, as a Prometheus scraping this process would add it
#: (``tg-show-flow-state`` names a consumer by it when it has no ``processor`` label)
JOB = "toolmesh"
#: longest query understood (a selector is short; this bounds the parsing work)
MAX_QUERY = 1000

_NAME = re.compile(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')
_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "=": lambda value, want: value == want,
    "!=": lambda value, want: value != want,
    "=~": lambda value, want: re.fullmatch(want, value) is not None,
    "!~": lambda value, want: re.fullmatch(want, value) is None,
}


class BadQuery(ValueError):
    """A query this endpoint does not understand (the message says what it does)."""


@dataclass(frozen=True, slots=True)
class Selector:
    """An instant vector selector: a metric name and ``(label, operator, value)`` matchers."""

    name: str
    matchers: tuple[tuple[str, str, str], ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        return all(_OPERATORS[op](labels.get(label, ""), want)
                   for label, op, want in self.matchers)


def parse(query: str) -> Selector:
    """The selector ``query`` is, or :class:`BadQuery`."""
    if len(query) > MAX_QUERY:
        raise BadQuery(f"the query is longer than {MAX_QUERY} characters")
    name = _NAME.match(query)
    if name is None:
        raise BadQuery(_understood(query))
    matchers: list[tuple[str, str, str]] = []
    rest = query[name.end():]
    if rest.startswith("{"):
        rest = rest[1:]
        while not rest.lstrip().startswith("}"):
            matcher = _MATCHER.match(rest)
            if matcher is None:
                raise BadQuery(_understood(query))
            label, op, value = matcher.groups()
            value = re.sub(r"\\(.)", r"\1", value)
            if op in ("=~", "!~"):
                try:
                    re.compile(value)
                except re.error as e:
                    raise BadQuery(f"bad regular expression {value!r}: {e}") from None
            matchers.append((label, op, value))
            rest = rest[matcher.end():]
            if rest.startswith(","):
                rest = rest[1:]
        rest = rest.lstrip()[1:]
    if rest.strip():
        raise BadQuery(_understood(query))
    return Selector(name.group(1), tuple(matchers))


def _understood(query: str) -> str:
    return (f"cannot parse {query[:80]!r}: this endpoint answers instant vector selectors "
            "only, e.g. processor_info or consumer_state{consumer_state=\"running\"}")


def evaluate(selector: Selector, *, now: float | None = None) -> list[dict[str, Any]]:
    """The samples of this process' metrics ``selector`` picks, as Prometheus' ``vector``."""
    stamp = time.time() if now is None else now
    found = []
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name != selector.name or not selector.matches(sample.labels):
                continue
            found.append({"metric": {"__name__": sample.name, "job": JOB, **sample.labels},
                          "value": [stamp, _number(sample.value)]})
    return found


def _number(value: float) -> str:
    """``value`` as Prometheus writes it (Go's shortest form): ``1``, not ``1.0``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value == int(value) and abs(value) < 1e15 else repr(value)


def answer(query: str | None) -> tuple[int, dict[str, Any]]:
    """``(HTTP status, body)`` for ``GET /api/metrics/query?query=<query>``."""
    if not query:
        return 400, _bad("the 'query' parameter is missing, e.g. ?query=processor_info")
    try:
        selector = parse(query)
    except BadQuery as e:
        return 400, _bad(str(e))
    return 200, {"status": "success",
                 "data": {"resultType": "vector", "result": evaluate(selector)}}


def _bad(message: str) -> dict[str, Any]:
    return {"status": "error", "errorType": "bad_data", "error": message}
