"""Whose ``tg-*`` command runs: toolmesh's, or another package's of the same name.

toolmesh installs 12 ``tg-*`` console scripts with the seed's forms (``tg-put-config-item
TYPE/KEY < file``); trustgraph-cli installs scripts of the same names with only TrustGraph's
(``--type T --key K --stdin``). Installed into one environment, the later install overwrites
the earlier's files without a word; installed apart, whichever bin directory comes first on
PATH wins. This module finds out which, by reading files only (no subprocess: ``toolmesh
serve`` asks it at start-up):

- toolmesh's own scripts and their targets come from the installed distribution's entry
  points (``importlib.metadata``), never from a list kept here;
- a script file's target is its ``from MODULE import ATTR`` line (what pip, uv and pipx write);
- its owner is the distribution, in the environment of the script's interpreter (its ``#!``
  line), whose entry point of that name has that target.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

DISTRIBUTION = "toolmesh"

#: ``from trustgraph.cli.put_config_item import main`` → module, attribute
_IMPORT = re.compile(r"^from\s+([\w.]+)\s+import\s+(\w+)\s*$", re.MULTILINE)
#: a pyenv shim: it runs the command of the active pyenv version, whose file is checked apart
_PYENV_SHIM = re.compile(r'exec\s+"[^"]*pyenv"\s+exec\b')
#: enough of a console script for its #! line and its import line
_HEAD = 2048

#: what to run when another package's tg-X shadows toolmesh's: the TrustGraph form that works
#: with both, and toolmesh's own command (advice only — which scripts exist is read from the
#: distribution's entry points)
FORMS: dict[str, str] = {
    "tg-put-config-item": "tg-put-config-item --type T --key K --stdin < FILE "
                          "(not TYPE/KEY < FILE), or toolmesh config put T/K FILE",
    "tg-get-config-item": "tg-get-config-item --type T --key K, or toolmesh config get T/K",
    "tg-list-config-items": "tg-list-config-items --type T, or toolmesh config list T",
    "tg-delete-config-item": "tg-delete-config-item --type T --key K, or "
                             "toolmesh config delete T/K",
    "tg-show-config": "toolmesh config show",
    "tg-set-tool": "toolmesh config put tool/NAME FILE (TrustGraph's takes arguments as "
                   "NAME:TYPE:DESCRIPTION only)",
    "tg-show-tools": "toolmesh tools (TrustGraph's tg-show-tools has no status row)",
    "tg-delete-tool": "tg-delete-tool --id NAME, or toolmesh config delete tool/NAME",
    "tg-set-mcp-tool": "toolmesh mcp set ID ... (--transport stdio, --oauth and "
                       "--auth-token-file are toolmesh's)",
    "tg-show-mcp-tools": "toolmesh mcp show",
    "tg-delete-mcp-tool": "toolmesh mcp delete",
    "tg-invoke-mcp-tool": "tg-invoke-mcp-tool -n NAME -P JSON (not --param K=V), or "
                          "toolmesh mcp invoke NAME --param K=V",
}

KEEP_BOTH = ("keep trustgraph-cli in an environment of its own (`pipx install trustgraph-cli`, "
             "or `python -m venv ~/.venvs/trustgraph && ~/.venvs/trustgraph/bin/pip install "
             "trustgraph-cli`) and put toolmesh's bin directory first on PATH")


@dataclass(frozen=True)
class Script:
    """One ``tg-*`` file: where it is, what it runs, and which distribution installed it."""

    name: str
    path: Path
    #: ``module:attr`` from its import line; ``None`` when it is not a console script
    target: str | None
    #: the distribution whose entry point it is (``None``: not found)
    owner: str | None
    #: it is a pyenv shim (it runs the active version's script, checked apart)
    shim: bool = False

    def describe(self) -> str:
        """``trustgraph-cli's (trustgraph.cli.put_config_item:main)``, or what it is."""
        if self.shim:
            return "a pyenv shim"
        if self.target is None:
            return "not a Python console script"
        return f"{self.owner or 'an unknown package'}'s ({self.target})"


@dataclass(frozen=True)
class Shadow:
    """A toolmesh script that another file stands in for: in toolmesh's own bin directory
    (overwritten by a later install into the same environment) or first on PATH."""

    name: str
    #: ``module:attr`` of toolmesh's entry point
    ours: str
    where: str  # "bin" (toolmesh's own bin directory) or "path" (first on PATH)
    #: the file found instead (``None``: toolmesh's own is missing)
    found: Script | None

    def message(self) -> str:
        """One line: what is there instead of toolmesh's script, and where."""
        if self.found is None:
            return f"{self.name}: missing from toolmesh's bin directory"
        if self.where == "bin":
            return (f"{self.name}: toolmesh's {self.found.path} was replaced by "
                    f"{self.found.describe()}")
        return f"{self.name}: PATH runs {self.found.path}, {self.found.describe()}"


def toolmesh_scripts() -> dict[str, str]:
    """toolmesh's ``tg-*`` console scripts, name → ``module:attr``, from the installed
    distribution's entry points (empty when toolmesh is not installed as a distribution)."""
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return {}
    return {e.name: e.value for e in dist.entry_points
            if e.group == "console_scripts" and e.name.startswith("tg-")}


def toolmesh_bin_dir() -> Path:
    """Where toolmesh's console scripts were installed: the ``toolmesh`` script's folder in the
    distribution's RECORD (a ``--user`` install puts them apart from the interpreter), else the
    interpreter's scripts folder."""
    import importlib.metadata
    import sysconfig

    try:
        files = importlib.metadata.distribution(DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if f.name == "toolmesh" and f.parent.name in ("bin", "Scripts"):
            return Path(os.path.normpath(str(f.locate()))).parent
    return Path(sysconfig.get_path("scripts"))


def read_script(path: Path, name: str) -> Script:
    """What the console script at ``path`` runs, and whose entry point ``name`` it is."""
    try:
        real = path.resolve()  # pipx links ~/.local/bin/tg-X into its venv's bin
        with open(real, "rb") as f:
            head = f.read(_HEAD).decode("utf-8", "replace")
    except OSError:
        return Script(name, path, None, None)
    if _PYENV_SHIM.search(head):
        return Script(name, path, None, None, shim=True)
    m = _IMPORT.search(head)
    if m is None:
        return Script(name, path, None, None)
    target = f"{m.group(1)}:{m.group(2)}"
    return Script(name, path, target, owner_of(name, target, interpreter(head, real)))


def interpreter(head: str, script: Path) -> Path | None:
    """The Python of a script's ``#!`` line (``None``: none, or ``/usr/bin/env python``)."""
    first = head.split("\n", 1)[0]
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if not words or words[0].endswith("/env"):
        return None
    return Path(words[0])


def site_packages(python: Path) -> list[str]:
    """The site-packages folders of the environment ``python`` belongs to (a venv's, or an
    installation's), found from the files alone."""
    root = python.parent.parent
    found = sorted(root.glob("lib/python3*/site-packages")) + sorted(
        root.glob("Lib/site-packages"))
    return [str(p) for p in found]


def owner_of(name: str, target: str, python: Path | None) -> str | None:
    """The distribution with entry point ``name = target``: looked for in the environment of
    ``python`` (the script's own), else in this one's."""
    paths = tuple(site_packages(python)) if python is not None else ()
    owner = _console_scripts(paths).get((name, target))
    # not found through its interpreter: the top-level package is the next best name
    return owner if owner is not None or paths else target.split(".", 1)[0]


@functools.lru_cache(maxsize=8)
def _console_scripts(paths: tuple[str, ...]) -> dict[tuple[str, str], str]:
    """(name, target) → distribution, for every console script of the environment at
    ``paths`` (this one's when empty): read once for the 12 scripts that ask."""
    import importlib.metadata

    found: dict[tuple[str, str], str] = {}
    for dist in importlib.metadata.distributions(**({"path": list(paths)} if paths else {})):
        for e in dist.entry_points:
            if e.group == "console_scripts":
                found.setdefault((e.name, e.value), str(dist.metadata["Name"]))
    return found


def first_on_path(name: str, path: str | None = None) -> Path | None:
    """The file ``name`` runs from PATH (``path``: instead of ``$PATH``)."""
    found = shutil.which(name, path=path)
    return Path(found) if found else None


def shadows(*, scripts: dict[str, str] | None = None, bin_dir: Path | None = None,
            path: str | None = None) -> tuple[list[Shadow], list[Script]]:
    """toolmesh's scripts that something else stands in for, and the pyenv shims found first
    on PATH (their target is the active version's file, checked as its bin directory's when
    that is toolmesh's). ``scripts``, ``bin_dir`` and ``path`` default to the installation's
    and ``$PATH``."""
    scripts = toolmesh_scripts() if scripts is None else scripts
    bin_dir = toolmesh_bin_dir() if bin_dir is None else bin_dir
    found: list[Shadow] = []
    shims: list[Script] = []
    for name, ours in sorted(scripts.items()):
        own = bin_dir / name
        if not own.exists():
            found.append(Shadow(name, ours, "bin", None))
        elif (script := read_script(own, name)).target != ours:
            found.append(Shadow(name, ours, "bin", script))
        first = first_on_path(name, path)
        if first is None or _same(first, own):
            continue
        script = read_script(first, name)
        if script.shim:
            shims.append(script)
        elif script.target != ours:
            found.append(Shadow(name, ours, "path", script))
    return found, shims


def _same(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def summary(found: list[Shadow]) -> str | None:
    """One log line for ``toolmesh serve``'s start-up when some scripts are shadowed."""
    if not found:
        return None
    whose = sorted({f"{s.found.owner or 'another package'}'s" if s.found else "missing"
                    for s in found})
    names = sorted({s.name for s in found})
    return (f"{len(names)} of toolmesh's tg-* commands are {' or '.join(whose)} here, not "
            "toolmesh's "
            f"({', '.join(names)}): their forms differ (tg-put-config-item TYPE/KEY < FILE fails)"
            " — run `toolmesh doctor` for what to use and how to keep both")


def notice(logger: logging.Logger) -> None:
    """Log :func:`summary` as a warning when toolmesh's scripts are shadowed here (reading
    files only: a few tens of milliseconds). A check that cannot run says so at debug level:
    it must never stop ``toolmesh serve``."""
    try:
        line = summary(shadows()[0])
    except Exception as e:  # an odd PATH entry or an unreadable RECORD: not worth a start-up
        logger.debug("could not check the tg-* commands: %s", e)
        return
    if line is not None:
        logger.warning(line)
