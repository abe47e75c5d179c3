"""bench/all.py: the table, results.md/.json and the marked section of docs/performance.md it
writes from the figures the benchmarks leave, and how it runs them (stand-in scripts, never the real
benchmarks)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_all() -> ModuleType:
    """bench/all.py as a module (it puts bench/ on sys.path for its ``report``)."""
    spec = importlib.util.spec_from_file_location("bench_all", BENCH / "all.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench_all = load_all()
Figure = bench_all.Figure

MACHINE = {"cpus": 2, "python": "CPython 3.11.7", "platform": "Linux",
           "loop": {"benchmark processes": "asyncio",
                    "toolmesh processes they start": "uvloop 0.23.0"},
           "date": "2025-01-02T03:04:05+00:00", "toolmesh": "0.1.0", "commit": "abc1234",
           "uncommitted": False}

PAGE = """# Performance

Intro | with a pipe, and a table of its own:

| a | b |
|---|---|
| 1 | 2 |

## The latest run

Words before.

<!-- bench:begin -->
| old | table |
|---|---|
| 9 | 9 |
<!-- bench:end -->

Words after, [a link](architecture.md).
"""


def write_figures(path: Path, figures: list[Any]) -> Path:
    """As a benchmark's ``--json`` writes them."""
    path.write_text(json.dumps([{**f.__dict__, "ratio": f.ratio} for f in figures]))
    return path


def sample_benches(tmp_path: Path) -> list[dict[str, Any]]:
    alpha = write_figures(tmp_path / "alpha.json", [
        Figure(bench="alpha", path="floor: in-process call", value=50.0, unit="µs"),
        Figure(bench="alpha", path="call, sequential", value=1500.0, unit="µs", floor=500.0,
               floor_what="in-process call", target="≤ 3× floor", note="uvloop"),
        Figure(bench="alpha", path="calls/s, 64 in flight", value=800.0, unit="calls/s",
               floor=1000.0, floor_what="raw client", better="higher"),
        Figure(bench="alpha", path="a | b", value=12.345, unit="ms", floor=4.0),
        Figure(bench="alpha", path="far above", value=5000.0, unit="µs", floor=2.0),
        Figure(bench="alpha", path="1 MB / 100 KB", value=10.16, unit="×",
               target="≈ 10 (linear)"),
    ])
    return [
        bench_all.outcome("alpha", returncode=0, seconds=12.44, json_path=alpha),
        bench_all.outcome("beta", returncode=1, seconds=3.0, json_path=tmp_path / "none",
                          output="starting\nTraceback (most recent call last):\n"
                                 "RuntimeError: broker gone\n\n"),
        bench_all.outcome("gamma", returncode=None, seconds=300.2, json_path=tmp_path / "none",
                          timeout=300),
        bench_all.outcome("delta", returncode=0, seconds=1.0, json_path=tmp_path / "none"),
    ]


def test_table_has_a_row_per_figure_with_its_ratio_and_a_row_per_failed_bench(
        tmp_path: Path) -> None:
    benches = sample_benches(tmp_path)
    assert [b["status"] for b in benches] == ["ok", "failed", "failed", "failed"]
    assert bench_all.table(benches).splitlines() == [
        "| bench | what | value | floor | ratio | target |",
        "|---|---|---|---|---|---|",
        "| `alpha` | floor: in-process call | 50.0 µs |  |  |  |",
        ("| `alpha` | call, sequential — uvloop | 1,500 µs | 500 µs (in-process call) | 3.00× "
         "| ≤ 3× floor |"),
        ("| `alpha` | calls/s, 64 in flight | 800 calls/s | 1,000 calls/s (raw client) "
         "| 0.80× ↑ |  |"),
        "| `alpha` | a \\| b | 12.3 ms | 4.00 ms | 3.09× |  |",
        "| `alpha` | far above | 5,000 µs | 2.00 µs | 2,500× |  |",
        "| `alpha` | 1 MB / 100 KB | 10.2× |  |  | ≈ 10 (linear) |",
        "| `beta` | **failed**: exit 1: RuntimeError: broker gone | — | — | — | — |",
        "| `gamma` | **failed**: timed out after 300 s | — | — | — | — |",
        ("| `delta` | **failed**: exit 0 but it wrote no figures (no --json support?) "
         "| — | — | — | — |"),
    ]


def test_figures_that_do_not_read_fail_the_bench(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"bench": "x", "path": "p", "value": 1, "unit": "ms", "colour": "red"}]')
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert bench_all.outcome("x", returncode=0, seconds=1, json_path=bad)["status"] == "failed"
    result = bench_all.outcome("x", returncode=0, seconds=1, json_path=empty)
    assert result["status"] == "failed"
    assert result["error"] == "exit 0 but it wrote no figures"


def test_results_json_keeps_every_figure_with_its_ratio(tmp_path: Path) -> None:
    result = bench_all.results(sample_benches(tmp_path), mode="quick", seconds=320.5,
                               machine_info=MACHINE)
    back = json.loads(json.dumps(result))
    assert back["machine"]["cpus"] == 2
    alpha = back["benches"][0]
    assert [f["ratio"] for f in alpha["figures"]] == [None, 3.0, 0.8, 12.345 / 4, 2500.0,
                                                       None]
    assert alpha["figures"][1]["floor_what"] == "in-process call"
    assert back["benches"][1]["output_tail"][-1] == "RuntimeError: broker gone"


def test_the_page_gets_the_table_between_its_markers_and_nothing_else_changes(
        tmp_path: Path) -> None:
    result = bench_all.results(sample_benches(tmp_path), mode="quick", seconds=320.5,
                               machine_info=MACHINE)
    block = bench_all.block(result)
    assert block.startswith(
        "A quick run of `python bench/all.py` on 2025-01-02 03:04 UTC at `abc1234`: 2 CPUs "
        "(shared), CPython 3.11.7; benchmarks on asyncio's loop unless noted, the `toolmesh` "
        "processes they start on uvloop 0.23.0. 4 benchmarks in 5 min 17 s, 3 failed "
        "(beta, gamma, delta).")
    assert block.endswith(bench_all.table(result["benches"]))

    page = bench_all.replace_marked(PAGE, block)
    head, _, rest = PAGE.partition("<!-- bench:begin -->")
    _, _, tail = rest.partition("<!-- bench:end -->")
    assert page == f"{head}<!-- bench:begin -->\n{block}<!-- bench:end -->{tail}"
    assert "| old | table |" not in page
    assert bench_all.replace_marked(page, block) == page  # a second run: the same text
    # results.md holds the same table text as the page
    assert block in bench_all.results_md(result)


def test_a_page_without_one_pair_of_markers_is_refused() -> None:
    for text in ("no markers", "<!-- bench:end --> <!-- bench:begin -->",
                 "<!-- bench:begin --> <!-- bench:end --> <!-- bench:begin --> "):
        with pytest.raises(ValueError):
            bench_all.replace_marked(text, "table")


def test_merge_keeps_the_benches_not_run_now_in_order() -> None:
    previous = {"benches": [{"name": "a", "status": "ok"}, {"name": "b", "status": "failed"},
                            {"name": "c", "status": "ok"}]}
    now = [{"name": "b", "status": "ok", "new": True}]
    merged = bench_all.merge(previous, now, ["a", "b", "c"])
    assert [(b["name"], b["status"]) for b in merged] == [("a", "ok"), ("b", "ok"), ("c", "ok")]
    assert merged[1]["new"]


def test_the_helpers_are_not_benchmarks() -> None:
    names = bench_all.benchmarks()
    assert not {"all", "report", "processes", "services"} & set(names)
    assert "agent_step" in names


# --- running stand-in benchmarks -------------------------------------------------------------

GOOD = """
import json, sys
out = sys.argv[sys.argv.index("--json") + 1]
json.dump([{"bench": "good", "path": "a call", "value": 2.0, "unit": "ms", "floor": 1.0,
            "floor_what": "nothing", "note": " ".join(sys.argv[1:2])}], open(out, "w"))
"""
BAD = "import sys; print('something broke'); sys.exit(2)\n"
#: starts a child of its own that sleeps, then sleeps itself far past the timeout
SLOW = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open(sys.argv[-1] + ".pid", "w").write(str(child.pid))
time.sleep(120)
"""


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie until its parent (gone: reparented) is reaped
    status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    return status == "Z"


def test_main_runs_each_bench_past_failures_and_writes_every_output(tmp_path: Path) -> None:
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "good.py").write_text(GOOD)
    (folder / "bad.py").write_text(BAD)
    (folder / "slow.py").write_text(SLOW.replace("sys.argv[-1]", repr(str(tmp_path / "slow"))))
    (folder / "services.py").write_text("raise SystemExit('a helper, never run')\n")
    (folder / "skipped.py").write_text("raise SystemExit('skipped')\n")
    page = tmp_path / "performance.md"
    page.write_text(PAGE)
    out = tmp_path / "out"

    start = time.monotonic()
    code = bench_all.main(["--folder", str(folder), "--out", str(out), "--timeout", "3",
                           "--page", "--page-path", str(page), "--skip", "skipped"])

    assert time.monotonic() - start < 60  # slow.py was stopped, not waited for
    assert code == 1
    result = json.loads((out / "results.json").read_text())
    assert [(b["name"], b["status"]) for b in result["benches"]] == [
        ("bad", "failed"), ("good", "ok"), ("slow", "failed")]
    bad, good, slow = result["benches"]
    assert bad["error"] == "exit 2: something broke"
    assert good["figures"][0]["ratio"] == 2.0
    assert good["figures"][0]["note"] == "--quick"  # quick unless --full
    assert slow["error"] == "timed out after 3 s"
    assert gone(int((tmp_path / "slow.pid").read_text()))  # its whole process group stopped
    assert result["mode"] == "quick" and result["machine"]["cpus"] == os.cpu_count()
    assert result["machine"]["python"].endswith(
        ".".join(map(str, sys.version_info[:3])))
    text = page.read_text()
    assert bench_all.block(result) in (out / "results.md").read_text()
    assert text == bench_all.replace_marked(PAGE, bench_all.block(result))
    assert "| `good` | a call — --quick | 2.00 ms | 1.00 ms (nothing) | 2.00× |  |" in text


def test_main_refuses_unknown_names_and_a_page_without_markers(tmp_path: Path) -> None:
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "good.py").write_text(GOOD)
    with pytest.raises(SystemExit):
        bench_all.main(["--folder", str(folder), "--only", "nosuch", "--out", str(tmp_path)])
    page = tmp_path / "performance.md"
    page.write_text("no markers\n")
    with pytest.raises(ValueError):
        bench_all.main(["--folder", str(folder), "--out", str(tmp_path), "--page",
                        "--page-path", str(page)])
    assert not (tmp_path / "results.json").exists()  # refused before anything ran


def test_readme_is_the_earlier_name_of_page_and_the_page_is_the_docs_performance_page(
        tmp_path: Path) -> None:
    """``--readme`` (and ``--readme-path``) still work, as ``--page``; by default the marked
    table is docs/performance.md's, which holds one pair of markers for it."""
    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "good.py").write_text(GOOD)
    page = tmp_path / "performance.md"
    page.write_text(PAGE)
    code = bench_all.main(["--folder", str(folder), "--out", str(tmp_path / "out"),
                           "--readme", "--readme-path", str(page)])
    assert code == 0
    assert "| `good` | a call — --quick |" in page.read_text()
    assert bench_all.PAGE == BENCH.parent / "docs" / "performance.md"
    bench_all.replace_marked(bench_all.PAGE.read_text(), "")  # one pair, in order
