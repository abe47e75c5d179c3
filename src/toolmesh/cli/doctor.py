"""``toolmesh doctor``: checks the environment toolmesh runs in, says what is wrong and how to
fix it, and exits 1 when something is.

What it checks, each cheap: whether the ``tg-*`` commands that run are toolmesh's (another
package's of the same name — trustgraph-cli's — takes their place when installed into the same
environment, or when its bin directory comes first on PATH; :mod:`script_shadows`), whether
the gateway answers at the URL the CLI uses and takes its token, and whether this machine's
Node runs the MCP Inspector version the docs name.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from typing import Any

from toolmesh.cli import script_shadows
from toolmesh.cli.http import CliError, GatewayClient, default_token

#: the MCP Inspector version the docs and tests use: the newest wants Node >= 22.19, and npx on
#: an older Node picks 0.15.0 instead, which has no --header
INSPECTOR = "2.12.0"
INSPECTOR_NODE = (22, 19)


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "doctor", help="check this environment: tg-* commands, the gateway, Node",
        description="Check that the tg-* commands on PATH are toolmesh's (not trustgraph-cli's "
                    "of the same names), that the gateway answers and takes the token, and "
                    "which MCP Inspector this machine's Node runs. Exits 1 when something is "
                    "wrong, saying how to fix it.")
    p.add_argument("-u", "--url", default=None,
                   help="gateway URL (env TOOLMESH_URL; default http://localhost:8888/)")
    p.add_argument("-t", "--token", default=None, help="bearer token (env TOOLMESH_TOKEN)")
    p.add_argument("--no-gateway", action="store_true",
                   help="skip the gateway check (no gateway is running yet)")
    p.set_defaults(run=run, sync=True)


class Report:
    """Lines of ``ok``/``FAIL``/``note`` with indented advice; remembers whether any failed."""

    def __init__(self) -> None:
        self.failed = False

    def line(self, status: str, text: str, *advice: str) -> None:
        self.failed |= status == "FAIL"
        print(f"{status:<5} {text}")
        for a in advice:
            print(f"      {a}")


def check_scripts(report: Report) -> None:
    """toolmesh's tg-* scripts: present in its bin directory, and the ones PATH finds."""
    scripts = script_shadows.toolmesh_scripts()
    if not scripts:
        report.line("FAIL", "toolmesh is not installed as a distribution: no tg-* scripts",
                    "install it: pip install toolmesh (from a checkout: pip install -e .)")
        return
    bin_dir = script_shadows.toolmesh_bin_dir()
    found, shims = script_shadows.shadows(scripts=scripts, bin_dir=bin_dir)
    if not found:
        report.line("ok", f"tg-* commands: toolmesh's {len(scripts)} in {bin_dir} are the ones "
                          "PATH runs")
    for shadow in found:
        form = script_shadows.FORMS.get(shadow.name) if shadow.found is not None else None
        report.line("FAIL", shadow.message(), *([f"use: {form}"] if form else []))
    reinstall = ("pip install --force-reinstall --no-deps toolmesh (a checkout: pip install "
                 "--no-deps -e .)")
    if any(s.where == "bin" and s.found is not None for s in found):
        report.line("note", "another package installed into toolmesh's environment replaced "
                            "its tg-* scripts (pip overwrites scripts of the same name)",
                    f"to get toolmesh's back: pip uninstall trustgraph-cli, then {reinstall}",
                    f"to keep both: {script_shadows.KEEP_BOTH}")
    elif any(s.where == "bin" for s in found):
        report.line("note", "toolmesh's tg-* scripts were removed (uninstalling a package that "
                            "had overwritten them removes them too)",
                    f"to get them back: {reinstall}")
    elif found:
        report.line("note", f"toolmesh's own are in {bin_dir}: run them by that path, or put "
                            "that directory first on PATH",
                    f"to keep both: {script_shadows.KEEP_BOTH}")
    if shims:
        report.line("note", f"{len(shims)} tg-* commands are pyenv shims on PATH: they run the "
                            "active pyenv version's scripts (checked above when it is "
                            "toolmesh's)")


def check_gateway(report: Report, *, url: str | None, token: str | None) -> None:
    """The gateway answers at ``url`` and accepts ``token`` (its ``iam whoami``)."""
    client = GatewayClient(url, token=token if token is not None else default_token(),
                           timeout=5)
    try:
        user = client.post("api/v1/iam", {"operation": "whoami"}).get("user") or {}
    except CliError as e:
        if "(401)" in e.message or "(403)" in e.message:
            advice = ("give a token the gateway accepts: --token or TOOLMESH_TOKEN (`toolmesh "
                      "token create` makes one)")
        else:
            advice = "no gateway running yet? --no-gateway skips this check"
        report.line("FAIL", f"gateway: {e.message}", advice)
        return
    roles = ", ".join(user.get("roles") or ()) or "none"
    who = user.get("name") or user.get("id") or "?"
    report.line("ok", f"gateway {client.url}: answers; the token is accepted ({who}: {roles})"
                if client.token else f"gateway {client.url}: answers, with no token")


def node_version() -> tuple[int, ...] | None:
    """``node --version`` as numbers; ``None`` when node is not on PATH or says nothing."""
    node = shutil.which("node")
    if node is None:
        return None
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"v?(\d+)\.(\d+)", out.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def check_node(report: Report) -> None:
    """Which MCP Inspector ``npx`` gives this Node: advice, never a failure."""
    pinned = f"npx -y @modelcontextprotocol/inspector@{INSPECTOR}"
    version = node_version()
    if version is None:
        report.line("note", "node: not found (only the MCP Inspector needs it)")
    elif version < INSPECTOR_NODE:
        report.line("note", f"node v{version[0]}.{version[1]}: the newest MCP Inspector wants "
                            f"Node >= {INSPECTOR_NODE[0]}.{INSPECTOR_NODE[1]}, so an unpinned npx "
                            "picks 0.15.0, which has no --header",
                    f"pin it: {pinned} --cli ... (works on this Node)")
    else:
        report.line("ok", f"node v{version[0]}.{version[1]}: runs {pinned}")


def run(args: argparse.Namespace) -> int:
    """Print each check's line; 1 when any failed."""
    report = Report()
    check_scripts(report)
    if not args.no_gateway:
        check_gateway(report, url=args.url, token=args.token)
    check_node(report)
    return 1 if report.failed else 0
