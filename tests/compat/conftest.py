"""The real trustgraph-cli, installed from PyPI into its own virtual environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compat.tgcli import install


@pytest.fixture(scope="session")
def tg_bin() -> Path:
    """The bin/ folder of a venv holding trustgraph-cli (built once, then reused)."""
    return install() / "bin"
