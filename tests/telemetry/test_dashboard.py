"""The Grafana dashboard and the observability guide name only metrics the code exports, so
neither can drift from :mod:`toolmesh.telemetry.metrics` unnoticed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

import toolmesh.telemetry.metrics  # noqa: F401 - registers toolmesh's metrics

DOCS = Path(__file__).resolve().parents[2] / "docs"
DASHBOARD = DOCS / "grafana" / "toolmesh-dashboard.json"
GUIDE = DOCS / "observability.md"

#: the series names each metric type is exposed as (counters as NAME_total, ...)
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
            "summary": ("", "_sum", "_count"), "gauge": ("",), "info": ("_info",),
            "stateset": ("",), "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
            "unknown": ("",)}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                "offset", "and", "or", "unless", "inf", "nan"}


def exposed() -> set[str]:
    """Every series name the default registry serves: toolmesh's and the process' own."""
    names = set()
    for family in REGISTRY.collect():
        names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: what is left once strings, label
    matchers, ranges, grouping clauses, function calls and keywords are taken out."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ",
                  expr)
    expr = re.sub(r"\$\w+", " ", expr)
    names = set()
    for match in re.finditer(r"(?<![\w.:])[A-Za-z_:][\w:]*(?![\w:])(?!\s*\()", expr):
        if match.group().lower() not in PROMQL_WORDS:
            names.add(match.group())
    return names


def load() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and templating query."""
    found = [(f"panel {p['title']!r}", t["expr"]) for p in dashboard["panels"]
             for t in p.get("targets", [])]
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        text = query.get("query", "") if isinstance(query, dict) else query or ""
        # label_values(METRIC, label): the metric is the first argument
        found += [(f"variable {variable['name']!r}", m)
                  for m in re.findall(r"label_values\(\s*([^,)]+)", text)]
    return found


def test_the_expression_reader_finds_the_metrics() -> None:
    assert metric_names('histogram_quantile(0.95, sum by (tool, le) (rate('
                        'toolmesh_tool_call_duration_seconds_bucket{job=~"$job"}'
                        '[$__rate_interval])))') == {"toolmesh_tool_call_duration_seconds_bucket"}
    assert metric_names("sum(rate(a_sum[5m])) / sum without (x) (rate(b_count[5m])) * 60"
                        ) == {"a_sum", "b_count"}
    assert metric_names('rate(x_total{event=~"dropped|by"}[1m]) > bool 0') == {"x_total"}


def test_it_is_an_importable_dashboard() -> None:
    dashboard = load()
    assert dashboard["title"] and dashboard["uid"]
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    # the data source is asked for on import
    assert {"name": "DS_PROMETHEUS", "type": "datasource", "pluginId": "prometheus"}.items() \
        <= dashboard["__inputs"][0].items()
    panels = dashboard["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    graphs = [p for p in panels if p["type"] != "row"]
    assert len(graphs) >= 12
    for panel in graphs:
        where = f"panel {panel.get('title')!r}"
        assert panel["title"] and panel["type"] in {"timeseries", "stat", "gauge", "table",
                                                    "bargauge"}, where
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", where
        box = panel["gridPos"]
        assert 0 <= box["x"] and box["x"] + box["w"] <= 24 and box["h"] > 0, where
        targets = panel["targets"]
        assert targets, f"{where} has no targets"
        assert len({t["refId"] for t in targets}) == len(targets), where
        for target in targets:
            assert target["expr"].strip(), where
            assert target["datasource"]["uid"] == "${DS_PROMETHEUS}", where


def test_every_query_names_metrics_that_exist() -> None:
    names = exposed()
    for where, expr in queries(load()):
        used = metric_names(expr)
        assert used, f"{where}: no metric in {expr!r}"
        unknown = used - names
        assert not unknown, f"{where}: {sorted(unknown)} not exported (in {expr!r})"


def test_the_guide_names_every_metric_and_only_those() -> None:
    named = set(re.findall(r"\btoolmesh_[a-z0-9_]*[a-z0-9]", GUIDE.read_text(encoding="utf-8")))
    families = {f.name: f.type for f in REGISTRY.collect() if f.name.startswith("toolmesh_")}
    # a histogram may be named as itself (its table row) or by its series; a counter only
    # as exposed, with _total
    known = exposed() | {name for name, type in families.items() if type == "histogram"}
    unknown = named - known
    assert not unknown, f"docs/observability.md names metrics that do not exist: {unknown}"
    missing = {name for name in families
               if not any(n == name or n.startswith(name + "_") for n in named & known)}
    assert not missing, f"docs/observability.md does not list: {sorted(missing)}"
