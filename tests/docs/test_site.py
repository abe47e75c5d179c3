"""The documentation site: ``mkdocs build --strict`` passes (no broken link, no missing page,
no anchor that names no heading), and the generated reference pages hold every command of the
CLI and every route of the OpenAPI document.

The site is built once for the module, into a temporary folder, as .ci/run builds it.
"""

from __future__ import annotations

import functools
import html
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from toolmesh.cli.main import build_parser
from toolmesh.gateway.openapi import document

# one worker runs these tests (with -n N --dist loadgroup), so the site is built once
pytestmark = pytest.mark.xdist_group("docs-site")

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "docs" / "hooks"


@functools.cache
def hook_module(name: str) -> ModuleType:
    """One of docs/hooks' modules, imported as MkDocs imports the hook: registered in
    sys.modules first (dataclasses look their module up), its folder on sys.path (for its
    siblings)."""
    sys.path.insert(0, str(HOOKS))
    try:
        spec = importlib.util.spec_from_file_location(f"docs_hooks_{name}", HOOKS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(HOOKS))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("site")
    # NO_MKDOCS_2_WARNING: Material's notice about its successor, not about these docs
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}{proc.stderr}"
    yield out


def ids(page: Path) -> set[str]:
    """The element ids of a built page (its headings' anchors)."""
    return set(re.findall(r'\sid="([^"]+)"', page.read_text(encoding="utf-8")))


def test_every_cli_command_has_a_section(site: Path) -> None:
    cli = hook_module("reference_cli")
    page = site / "reference" / "cli" / "index.html"
    commands = list(cli.commands(build_parser()))
    names = {c.name for c in commands}
    # the walk finds every top-level command (an alias is said in its command's section)
    top = {f"toolmesh {a.dest}" for a in build_parser().subcommands._choices_actions}
    assert len(top) >= 10 and top <= names
    assert {"toolmesh config put", "toolmesh mcp serve", "toolmesh run gateway"} <= names
    missing = sorted(c.name for c in commands if c.anchor not in ids(page))
    assert not missing, f"no section in the CLI reference for {missing}"


def test_the_cli_reference_shows_every_option(site: Path) -> None:
    text = html.unescape((site / "reference" / "cli" / "index.html").read_text("utf-8"))
    cli = hook_module("reference_cli")
    missing = sorted({option for command in cli.commands(build_parser())
                      for action in command.parser._actions for option in action.option_strings
                      if option not in ("-h", "--help") and action.help != "==SUPPRESS=="
                      and option not in text})
    assert not missing, f"options missing from the CLI reference: {missing}"


def test_every_openapi_route_has_a_section(site: Path) -> None:
    rest = hook_module("reference_rest")
    page = site / "reference" / "rest-api" / "index.html"
    routes = list(rest.operations(document()))
    assert len(routes) >= 30 and ("POST", "/api/v1/config") in {(m, p) for m, p, _ in routes}
    found = ids(page)
    missing = sorted(f"{m} {p}" for m, p, _ in routes if rest.anchor(m, p) not in found)
    assert not missing, f"no section in the REST reference for {missing}"
    schemas = {f"schema-{name.lower()}" for name in document()["components"]["schemas"]}
    assert schemas <= found, f"schemas without a section: {sorted(schemas - found)}"


def test_the_config_reference_is_built(site: Path) -> None:
    found = ids(site / "reference" / "config" / "index.html")
    assert {"tool-service", "tool", "mcp", "flow", "settings", "prompt", "mcp-auth"} <= found


def test_a_generated_page_without_its_marker_fails_the_build() -> None:
    reference = hook_module("reference")
    with pytest.raises(reference.GeneratedPageError, match="lost its marker"):
        reference.expand("# CLI reference\n\nno marker\n", page="reference/cli.md")
    with pytest.raises(reference.GeneratedPageError, match="no generator 'clix'"):
        reference.expand("<!-- generated: clix -->\n", page="index.md")
    assert "## `toolmesh serve`" in reference.expand("<!-- generated: cli -->\n",
                                                      page="reference/cli.md")
