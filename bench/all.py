"""Every benchmark, one after the other, into one table: ``bench/results.md`` and
``bench/results.json``, and with ``--page`` the table of docs/performance.md.

Each ``bench/*.py`` (but the helpers ``all``, ``report``, ``processes`` and ``services``) runs
as its own process — ``python bench/NAME.py --quick --json TMP`` (``--full``: without
``--quick``) — under a timeout, in a process group of its own so that whatever it started
goes with it. A benchmark that exits non-zero, times out or writes no figures is a failed row
of the table; the others still run, and ``all.py`` exits 1 at the end.

* ``bench/results.json``: the machine (CPUs, Python, event loops, date, commit), then per
  benchmark its status, seconds, and every figure with its ratio to its floor;
* ``bench/results.md``: one markdown table, ``bench | what | value | floor | ratio | target``;
* ``--page`` (or its earlier name ``--readme``): the same text replaces what is between
  ``<!-- bench:begin -->`` and ``<!-- bench:end -->`` in docs/performance.md, the docs site's
  Performance page; the rest of the page is left as it is.

``--only``/``--skip`` choose benchmarks by name; ``--merge`` keeps the benchmarks of the last
``results.json`` that this run did not run (to rerun one that failed, say).

    python bench/all.py [--full] [--only NAME ...] [--skip NAME ...] [--timeout SECONDS]
                        [--merge] [--page] [--logs DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from report import Figure, load, number  # noqa: E402

#: scripts in bench/ that are not benchmarks
HELPERS = frozenset({"all", "report", "processes", "services"})
#: the page whose marked section --page rewrites: the docs site's Performance page
PAGE = ROOT / "docs" / "performance.md"
BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
#: seconds a benchmark may take before it is stopped (--timeout overrides)
TIMEOUT = {"quick": 300.0, "full": 1800.0}
#: output lines kept of a failed benchmark
TAIL = 12


def benchmarks(folder: Path = HERE) -> list[str]:
    """The benchmarks in ``folder``, by name, in alphabetical order."""
    return sorted(p.stem for p in folder.glob("*.py")
                  if p.stem not in HELPERS and not p.stem.startswith("_"))


# --- running ------------------------------------------------------------------------------

def outcome(name: str, *, returncode: int | None, seconds: float, json_path: Path,
            output: str = "", timeout: float | None = None) -> dict[str, Any]:
    """What one run of benchmark ``name`` gave, as ``results.json`` holds it: ``status``
    ``ok`` with its figures, or ``failed`` with why (``returncode`` ``None``: it was stopped
    after ``timeout`` seconds)."""
    tail = [line for line in output.splitlines() if line.strip()][-TAIL:]
    result: dict[str, Any] = {"name": name, "status": "failed", "seconds": round(seconds, 1),
                              "finished": _now(), "figures": []}
    if returncode is None:
        result["error"] = f"timed out after {timeout:g} s"
    elif returncode != 0:
        last = tail[-1] if tail else ""
        result["error"] = f"exit {returncode}" + (f": {last}" if last else "")
    else:
        try:
            figures = load(json_path)
        except FileNotFoundError:
            result["error"] = "exit 0 but it wrote no figures (no --json support?)"
        except (ValueError, TypeError) as e:  # not JSON, or not a list of figures
            result["error"] = f"exit 0 but its figures do not read: {e}"
        else:
            if figures:
                result["status"] = "ok"
                result["figures"] = [figure_json(f) for f in figures]
            else:
                result["error"] = "exit 0 but it wrote no figures"
    if result["status"] == "failed":
        result["output_tail"] = tail
    return result


def run_one(name: str, *, folder: Path = HERE, quick: bool, timeout: float,
            log: Path) -> dict[str, Any]:
    """Run ``folder/name.py`` as its own process (group), output to ``log``; its outcome."""
    with tempfile.TemporaryDirectory(prefix=f"toolmesh-bench-{name}-") as tmp:
        json_path = Path(tmp) / "figures.json"
        argv = [sys.executable, str(folder / f"{name}.py"), *(["--quick"] if quick else []),
                "--json", str(json_path)]
        start = time.perf_counter()
        with open(log, "w+", encoding="utf-8", errors="replace") as out:
            proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
            try:
                returncode: int | None = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                stop_group(proc)
                returncode = None
            except BaseException:  # Ctrl-C: the benchmark and what it started go too
                stop_group(proc)
                raise
            seconds = time.perf_counter() - start
            strays = stop_group(proc)
            out.seek(0)
            output = out.read()
        result = outcome(name, returncode=returncode, seconds=seconds, json_path=json_path,
                         output=output, timeout=timeout)
        if strays and returncode is not None:
            result["warning"] = "it left processes behind; all.py stopped them"
        result["mode"] = "quick" if quick else "full"
        return result


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; whether anyone was there to get it."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def stop_group(proc: subprocess.Popen[Any], grace: float = 20) -> bool:
    """Stop the benchmark and every process left in its group: SIGTERM (the benchmarks stop
    their children and delete their vhosts on it), SIGKILL after ``grace`` seconds. Whether
    anything was left to stop."""
    if not _signal_group(proc.pid, signal.SIGTERM):
        return False
    deadline = time.monotonic() + grace
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    # the leader has gone (or would not); its children may linger a little longer
    while time.monotonic() < deadline and _signal_group(proc.pid, 0):
        time.sleep(0.1)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


# --- results -------------------------------------------------------------------------------

def figure_json(figure: Figure) -> dict[str, Any]:
    return {**dataclasses.asdict(figure), "ratio": figure.ratio}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    try:
        from toolmesh.cli.loop import loop_factory
        cli_loop = "asyncio" if loop_factory() is None else "uvloop"
    except Exception as e:  # noqa: BLE001  (TOOLMESH_LOOP=uvloop without uvloop, ...)
        cli_loop = f"unknown ({e})"
    if cli_loop == "uvloop":
        import uvloop
        cli_loop = f"uvloop {uvloop.__version__}"
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10, check=False).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    commit = git("rev-parse", "--short", "HEAD")
    try:
        from importlib.metadata import version
        toolmesh = version("toolmesh")
    except Exception:  # noqa: BLE001  (not installed: run from the source tree)
        toolmesh = "not installed"
    return {
        "cpus": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "loop": {"benchmark processes": "asyncio (unless a figure's note says otherwise)",
                 "toolmesh processes they start": cli_loop},
        "date": _now(),
        "toolmesh": toolmesh,
        "commit": commit or None,
        # changes not committed yet (to tracked files, under src/ or bench/; not the
        # results an earlier run wrote)
        "uncommitted": bool(commit and git("status", "--porcelain", "--untracked-files=no",
                                            "--", "src", "bench", ":!bench/results.*")),
    }


def results(benches: Sequence[dict[str, Any]], *, mode: str, seconds: float,
            machine_info: dict[str, Any]) -> dict[str, Any]:
    """The whole of ``results.json``."""
    return {"machine": machine_info, "mode": mode, "seconds": round(seconds, 1),
            "benches": list(benches)}


def merge(previous: dict[str, Any], now: Sequence[dict[str, Any]],
          order: Sequence[str]) -> list[dict[str, Any]]:
    """This run's benchmarks, and those of ``previous`` it did not run, in ``order``."""
    by_name = {b["name"]: b for b in previous.get("benches", [])}
    by_name.update({b["name"]: b for b in now})
    rank = {name: i for i, name in enumerate(order)}
    return sorted(by_name.values(), key=lambda b: (rank.get(b["name"], len(rank)), b["name"]))


# --- markdown ------------------------------------------------------------------------------

def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _minutes(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def row(bench: str, figure: Figure) -> str:
    """One figure as a table row."""
    what = figure.path + (f" — {figure.note}" if figure.note else "")
    space = "" if figure.unit in ("×", "%") else " "
    value = f"{number(figure.value)}{space}{figure.unit}"
    floor = ratio = ""
    if figure.floor is not None:
        floor = f"{number(figure.floor)}{space}{figure.unit}"
        if figure.floor_what:
            floor += f" ({figure.floor_what})"
    if figure.ratio is not None:
        ratio = f"{number(figure.ratio)}×"
        if figure.better == "higher":
            ratio += " ↑"
    cells = [f"`{bench}`", what, value, floor, ratio, figure.target or ""]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def table(benches: Sequence[dict[str, Any]]) -> str:
    """The markdown table of every figure; a failed benchmark is one row saying why."""
    lines = ["| bench | what | value | floor | ratio | target |",
             "|---|---|---|---|---|---|"]
    for bench in benches:
        if bench["status"] != "ok":
            cells = [f"`{bench['name']}`", f"**failed**: {bench.get('error') or 'failed'}",
                     "—", "—", "—", "—"]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
            continue
        for fields in bench["figures"]:
            figure = Figure(**{k: v for k, v in fields.items() if k != "ratio"})
            lines.append(row(bench["name"], figure))
    return "\n".join(lines) + "\n"


def block(result: dict[str, Any]) -> str:
    """What goes between the page's markers and into results.md: a line saying what ran
    where, and the table."""
    m = result["machine"]
    benches = result["benches"]
    failed = [b["name"] for b in benches if b["status"] != "ok"]
    # with --merge, benchmarks of several runs: say which ran in full
    modes = [b.get("mode", result["mode"]) for b in benches]
    full = [b["name"] for b, m in zip(benches, modes) if m == "full"]
    if not full:
        mode = "quick"
    elif len(full) == len(benches):
        mode = "full"
    else:
        mode = f"quick (in full: {', '.join(full)})"
    date = m["date"][:16].replace("T", " ") + " UTC"
    commit = f" at `{m['commit']}`" if m.get("commit") else ""
    if m.get("commit") and m.get("uncommitted"):
        commit += " (with changes not yet committed)"
    loops = m["loop"]
    line = (f"A {mode} run of `python bench/all.py` on {date}{commit}: {m['cpus']} CPUs "
            f"(shared), {m['python']}; benchmarks on asyncio's loop unless noted, the "
            f"`toolmesh` processes they start on {loops['toolmesh processes they start']}. "
            f"{len(benches)} benchmarks in {_minutes(sum(b['seconds'] for b in benches))}"
            + (f", {len(failed)} failed ({', '.join(failed)})." if failed else ".")
            + " Ratio: value ÷ floor, both from the same run; ↑: higher is better.")
    return f"{line}\n\n{table(benches)}"


def results_md(result: dict[str, Any]) -> str:
    return ("# Benchmark results\n\n"
            "Written by `bench/all.py` (do not edit); how each benchmark works: "
            "[docs/performance.md](../docs/performance.md).\n\n" + block(result))


def replace_marked(text: str, inner: str) -> str:
    """``text`` with what lies between :data:`BEGIN` and :data:`END` replaced by ``inner``;
    everything outside the markers as it was. ``ValueError`` without exactly one pair."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"expected one {BEGIN} ... {END} pair, in that order")
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{inner.rstrip(chr(10))}\n{END}{tail}"


# --- main ----------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--full", action="store_true",
                        help="full runs (without --quick): much longer")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these")
    parser.add_argument("--skip", nargs="+", metavar="NAME", default=[], help="do not run these")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="seconds per benchmark (default 300; --full 1800)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the benchmarks of the last results.json not run now")
    parser.add_argument("--page", "--readme", dest="page", action="store_true",
                        help="also replace the table between the bench markers of "
                             "docs/performance.md (--readme: its earlier name)")
    parser.add_argument("--logs", type=Path, default=None, metavar="DIR",
                        help="keep each benchmark's output in DIR/NAME.log")
    parser.add_argument("--out", type=Path, default=HERE, metavar="DIR",
                        help="where results.json and results.md go (default bench/)")
    # for the tests: another page, another folder of benchmarks
    parser.add_argument("--page-path", "--readme-path", dest="page_path", type=Path,
                        default=PAGE, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, default=HERE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    known = benchmarks(args.folder)
    unknown = [n for n in (args.only or []) + args.skip if n not in known]
    if unknown:
        parser.error(f"no benchmark {', '.join(map(repr, unknown))}; there are: "
                     f"{', '.join(known)}")
    chosen = [n for n in (args.only or known) if n not in args.skip]
    mode = "full" if args.full else "quick"
    timeout = args.timeout or TIMEOUT[mode]
    if args.page:  # fail now, not after an hour of benchmarks
        replace_marked(args.page_path.read_text(), "")

    info = machine()
    start = time.perf_counter()
    done: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="toolmesh-bench-logs-") as tmp:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        for i, name in enumerate(chosen, 1):
            print(f"[{i}/{len(chosen)}] {name} ...", end=" ", flush=True)
            result = run_one(name, folder=args.folder, quick=not args.full, timeout=timeout,
                             log=logs / f"{name}.log")
            done.append(result)
            if result["status"] == "ok":
                print(f"{len(result['figures'])} figures in {result['seconds']:.0f} s"
                      + (f" ({result['warning']})" if "warning" in result else ""), flush=True)
            else:
                print(f"FAILED after {result['seconds']:.0f} s: {result['error']}", flush=True)
                for line in result.get("output_tail", []):
                    print(f"    {line}")
    seconds = time.perf_counter() - start
    benches: list[dict[str, Any]] = done
    results_path = args.out / "results.json"
    if args.merge and results_path.exists():
        benches = merge(json.loads(results_path.read_text()), done, known)
    result = results(benches, mode=mode, seconds=seconds, machine_info=info)
    args.out.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    (args.out / "results.md").write_text(results_md(result))
    if args.page:
        page = args.page_path.read_text()
        args.page_path.write_text(replace_marked(page, block(result)))
    failed = [b["name"] for b in done if b["status"] != "ok"]
    print(f"{len(done)} benchmarks in {_minutes(seconds)}; wrote {results_path}, "
          f"{args.out / 'results.md'}" + (f", {args.page_path}" if args.page else "")
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
