"""How fast the command-line tools start and finish, beside a floor measured in the same run:
the interpreter starting and doing nothing (``python -c pass``).

Runs each command as its console script (the ``toolmesh`` / ``tg-*`` next to this Python),
one after the other in rounds, and prints the median wall time and CPU time (user + system,
of the process) of each, and their ratios to the floor's:

* ``toolmesh --version`` — building the whole command tree, and reading the installed version;
* ``toolmesh config list tool`` — a command that makes one call to the gateway;
* ``tg-show-config`` — the same for a TrustGraph-named script.

The calls go to a ``toolmesh serve`` the bench starts (its own process, embedded bus,
SQLite store, one ``tool`` item loaded); with ``--no-serve`` they go to a port nothing
listens on (the commands then exit 1 after their one-line error).

Compiled bytecode is cached (in a temporary folder, not in the source tree), as it is for
anyone whose Python writes ``__pycache__``; with ``--no-cache`` every run compiles
toolmesh's modules it imports again (``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` in
the source tree: an editable install where that is set, as the test suite's runs may be).
``--src DIR`` runs the commands on the toolmesh package under ``DIR`` instead of the installed
one; to compare with an earlier commit:

    mkdir /tmp/before && git archive REV src | tar -x -C /tmp/before
    python bench/cli_startup.py --src /tmp/before/src

    python bench/cli_startup.py [--runs N] [--no-serve] [--no-cache] [--src DIR] [--quick]
                                [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from report import Figure, add_arguments, emit

TOOL = json.dumps({"type": "tool-service", "name": "tell-joke", "description": "Tell a joke",
                   "service": "joke-service", "arguments": [
                       {"name": "topic", "type": "string", "description": "The topic"}]})


def script(name: str) -> str:
    """The console script ``name`` of this interpreter's environment (not a pyenv shim)."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        sys.exit(f"no {name} script: install toolmesh (pip install -e .) first")
    return found


def start_server(data: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolmesh.cli.main", "serve", "--port", "0",
         "--config-store", str(data / "config.db")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if m := re.search(r"gateway listening on (\S+)", line):
            # keep reading its log so a full pipe can never stall the server
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, m.group(1)
    raise RuntimeError("toolmesh serve exited before it listened")


def closed_port() -> str:
    """A URL on a local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/"


def once(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system) and exit status of one run of ``argv``."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=None,
                        help="runs of each (default 10; --quick 4)")
    parser.add_argument("--no-serve", action="store_true",
                        help="call a port nothing listens on instead of a toolmesh serve")
    parser.add_argument("--no-cache", action="store_true",
                        help="no bytecode cache: every run compiles what it imports")
    parser.add_argument("--src", type=Path, default=None,
                        help="run the toolmesh package under this folder, not the installed one")
    add_arguments(parser)
    args = parser.parse_args()
    args.runs = args.runs or (4 if args.quick else 10)
    commands = {
        "floor: python -c pass": [sys.executable, "-c", "pass"],
        "toolmesh --version": [script("toolmesh"), "--version"],
        "toolmesh config list tool": [script("toolmesh"), "config", "list", "tool"],
        "tg-show-config": [script("tg-show-config")],
    }
    with tempfile.TemporaryDirectory() as tmp:
        server = None
        if args.no_serve:
            url = closed_port()
        else:
            server, url = start_server(Path(tmp))
            request = urllib.request.Request(
                url + "api/v1/config", method="POST", headers={
                    "Content-Type": "application/json"}, data=json.dumps({
                        "operation": "put",
                        "values": [{"type": "tool", "key": "tell-joke", "value": TOOL}]}).encode())
            with urllib.request.urlopen(request) as r:
                assert "error" not in json.loads(r.read())
        env = {k: v for k, v in os.environ.items()
               if k not in ("TOOLMESH_TOKEN", "TRUSTGRAPH_TOKEN", "TOOLMESH_GATEWAY_TOKEN",
                            "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
        env.update(TOOLMESH_URL=url, TRUSTGRAPH_URL=url)
        if args.no_cache:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        if args.src is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(args.src.resolve()), env.get("PYTHONPATH")) if p)
        package = subprocess.run(
            [sys.executable, "-c", "import toolmesh; print(toolmesh.__file__)"], env=env,
            capture_output=True, text=True, check=True).stdout.strip()
        try:
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
            statuses: dict[str, set[int]] = {name: set() for name in commands}
            for round in range(args.runs + 1):  # round 0 warms the file cache, not counted
                for name, argv in commands.items():
                    wall, cpu, status = once(argv, env)
                    statuses[name].add(status)
                    if round:
                        samples[name].append((wall, cpu))
        finally:
            if server is not None:
                server.terminate()
                server.wait()
    medians = {name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
               for name, runs in samples.items()}
    floor_name = "floor: python -c pass"
    floor_wall, floor_cpu = medians[floor_name]
    target = "a port nothing listens on" if args.no_serve else "a toolmesh serve"
    cache = "none (every run compiles)" if args.no_cache else "cached"
    print(f"toolmesh: {Path(package).parent}; bytecode: {cache}")
    print(f"median of {args.runs} runs each, calls to {target}")
    bench = "cli_startup"
    setting = f"median of {args.runs}; bytecode {cache}"
    figures = [Figure(bench=bench, path="floor: python -c pass: start to exit, wall",
                      value=floor_wall * 1e3, unit="ms",
                      note=f"{setting}; CPU {floor_cpu * 1e3:.0f} ms")]
    for name, (wall, cpu) in medians.items():
        if name == floor_name:
            continue
        exits = ",".join(map(str, sorted(statuses[name])))
        calls = f"; calls to {target}" if "config" in name else ""
        figures += [
            Figure(bench=bench, path=f"{name}: start to exit, wall", value=wall * 1e3,
                   unit="ms", floor=floor_wall * 1e3, floor_what="python -c pass",
                   note=f"{setting}{calls}; exit {exits}"),
            Figure(bench=bench, path=f"{name}: start to exit, CPU", value=cpu * 1e3, unit="ms",
                   floor=floor_cpu * 1e3, floor_what="python -c pass",
                   note="user + system of the process"),
        ]
    emit(figures, args)


if __name__ == "__main__":
    main()
