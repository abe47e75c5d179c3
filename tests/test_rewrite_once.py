"""tests/rewrite_once.py: the controller's rewritten ``.pyc`` files are the ones pytest reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from _pytest.assertion import rewrite

from tests.rewrite_once import rewrite_test_modules


def cached(fn: Path) -> Path:
    return rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)


def test_test_modules_and_conftests_are_written_rewritten_once(
        pytestconfig: pytest.Config, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    sources = {"test_one.py": "def test():\n    x = 1\n    assert x == 2\n",
               "sub/conftest.py": "X = 1\n", "sub/test_two.py": "def test():\n    pass\n",
               "helpers.py": "def f():\n    assert False\n"}
    for name, text in sources.items():
        (tmp_path / name).write_text(text)

    assert rewrite_test_modules(pytestconfig, tmp_path) == 3
    assert not cached(tmp_path / "helpers.py").exists()  # not a test module: not rewritten
    code = rewrite._read_pyc(tmp_path / "test_one.py", cached(tmp_path / "test_one.py"))
    assert code is not None  # what pytest's import finds up to date
    namespace: dict[str, object] = {}
    exec(code, namespace)
    with pytest.raises(AssertionError) as failed:
        namespace["test"]()  # type: ignore[operator]
    assert "assert 1 == 2" in str(failed.value)  # the rewritten assert explains itself
    # up to date: nothing written again; a changed source is written again
    assert rewrite_test_modules(pytestconfig, tmp_path) == 0
    (tmp_path / "sub/test_two.py").write_text("def test():\n    assert True  # changed\n")
    assert rewrite_test_modules(pytestconfig, tmp_path) == 1
