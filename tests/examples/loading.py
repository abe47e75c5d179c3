"""Import the modules of ``examples/`` (they are not a package) as a user's folder would."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_module(folder: str, name: str) -> ModuleType:
    """``examples/<folder>/<name>.py``, imported under its own name."""
    path = EXAMPLES / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"examples_{folder}_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
