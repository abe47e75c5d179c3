"""Rewrite the test modules' asserts once, in the pytest-xdist controller, for every worker.

pytest rewrites each test module's ``assert`` statements as it imports it, and keeps the result
as a ``.pyc`` beside it — unless ``PYTHONDONTWRITEBYTECODE`` is set, as on the CI machine. Then
every worker rewrites every test module again at each run: 4.5 CPU-seconds of a worker's 11 to
collect the suite, three workers at once on two cores, before the first test starts. Here the
controller writes those files first (pytest reads them whatever the flag says), in two forked
processes, so each worker only reads them.

It uses pytest's own rewriting functions, which are not public: if they are not there (another
pytest), nothing is written and the workers rewrite as before.
"""

from __future__ import annotations

import fnmatch
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest


def rewrite_test_modules(config: pytest.Config, folder: Path, *, processes: int = 2) -> int:
    """Write the rewritten ``.pyc`` of each test module and ``conftest.py`` under ``folder``
    that has none up to date; the number written."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return 0
    needed = ("_rewrite_test", "_write_pyc", "_read_pyc", "get_cache_dir", "PYC_TAIL",
              "assertstate_key", "try_makedirs")
    state = config.stash.get(getattr(rewrite, "assertstate_key", object()), None)
    if state is None or not all(hasattr(rewrite, name) for name in needed):
        return 0  # --assert=plain, or a pytest without these
    patterns = config.getini("python_files")
    todo = []
    for fn in sorted(folder.rglob("*.py")):
        if fn.name != "conftest.py" and not any(fnmatch.fnmatch(fn.name, p) for p in patterns):
            continue
        pyc = rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(fn, pyc) is None:
            todo.append((fn, pyc))

    def write(chunk: Sequence[tuple[Path, Path]]) -> None:
        for fn, pyc in chunk:
            try:
                source_stat, code = rewrite._rewrite_test(fn, config)
            except SyntaxError:
                continue  # the worker's import reports it, as it would have
            if rewrite.try_makedirs(pyc.parent):
                rewrite._write_pyc(state, code, source_stat, pyc)

    if threading.active_count() > 1:  # a fork would copy a thread's locks: do it here
        write(todo)
        return len(todo)
    children = []
    for i in range(processes):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                write(todo[i::processes])
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    return len(todo)
