"""The real trustgraph-cli, installed from PyPI into its own virtual environment, once::

    python -m tests.compat.tgcli --install      # what .ci/run calls; prints the venv

The compatibility tests run in several test processes at once: the first to need the venv
builds it under a file lock, the others wait for it and reuse it.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import subprocess
import sys
from pathlib import Path

TRUSTGRAPH_CLI = "trustgraph-cli==2.11.1"
CACHE = Path(os.environ.get("TOOLMESH_TGCLI_VENV")
             or Path.home() / ".cache" / "toolmesh-tests" / "tgcli-2.11.1")


def install(root: Path = CACHE) -> Path:
    """The venv holding trustgraph-cli, built first if it is not complete (a build cut short
    leaves no marker, and the next one starts afresh)."""
    marker = root / ".installed"
    if marker.exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True)
            subprocess.run([str(root / "bin" / "pip"), "install", "-q", TRUSTGRAPH_CLI],
                           check=True, timeout=600)
            marker.write_text(TRUSTGRAPH_CLI)
    return root


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--install", action="store_true", help="install and print the venv")
    args = parser.parse_args(argv)
    if args.install:
        print(install())


if __name__ == "__main__":
    main()
