"""The real trustgraph-cli, installed from PyPI into its own virtual environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TRUSTGRAPH_CLI = "trustgraph-cli==2.11.1"


@pytest.fixture(scope="session")
def tg_bin() -> Path:
    """The bin/ folder of a venv holding trustgraph-cli (built once, then reused)."""
    venv = Path(os.environ.get("TOOLMESH_TGCLI_VENV")
                or Path.home() / ".cache" / "toolmesh-tests" / "tgcli-2.11.1")
    marker = venv / ".installed"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", TRUSTGRAPH_CLI],
                       check=True, timeout=600)
        marker.write_text(TRUSTGRAPH_CLI)
    return venv / "bin"
