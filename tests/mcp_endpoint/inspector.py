"""``@modelcontextprotocol/inspector``, the MCP project's own debugging client, from npm: its
CLI mode (``--cli``) as a client toolmesh did not write, installed on demand into a cache
directory.

    python -m tests.mcp_endpoint.inspector --install     # what .ci/run calls; prints the directory

The tests (tests/mcp_endpoint/test_stdio_bridge.py) point it at the gateway's ``/mcp`` over
streamable HTTP and at ``toolmesh mcp serve --stdio``, which it starts as a child process. Its
package asks for Node >= 22.19; the CLI mode runs on Debian's Node 20 as well (npm only warns
``EBADENGINE`` at install). Each run gets a home directory of its own: the inspector keeps a
catalog and a secret store under ``~/.mcp-inspector``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.mcp.everything import executable, npm_install

PACKAGE = "@modelcontextprotocol/inspector"
VERSION = "2.12.0"
CACHE = Path.home() / ".cache" / "toolmesh-tests" / f"npm-inspector-{VERSION}"
#: the launcher its ``mcp-inspector`` command runs (``--cli`` picks the CLI client)
LAUNCHER = Path("node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher",
                "build", "index.js")


def install(root: Path = CACHE) -> Path:
    """The launcher script; installed first if it is not there (:func:`npm_install`)."""
    npm_install(root, f"{PACKAGE}@{VERSION}", marker=LAUNCHER)
    return root / LAUNCHER


@dataclass
class Run:
    """One finished ``--cli`` run: its exit code, and what it wrote."""

    code: int
    stdout: str
    stderr: str

    def result(self) -> Any:
        """The method's result (``--format json`` prints ``{"result": ...}`` on stdout)."""
        assert self.code == 0, f"the inspector failed ({self.code}):\n{self.stderr}"
        return json.loads(self.stdout)["result"]

    def error(self) -> str:
        """The error message of a failed run (its JSON error envelope on stderr)."""
        assert self.code != 0, f"the inspector succeeded:\n{self.stdout}"
        for line in reversed(self.stderr.splitlines()):
            if line.startswith('{"error"'):
                return str(json.loads(line)["error"]["message"])
        raise AssertionError(f"no error envelope on the inspector's stderr:\n{self.stderr}")


async def inspector_cli(*args: str, home: Path, timeout: float = 60) -> Run:
    """``mcp-inspector --cli --format json ARGS``, with ``home`` as its home directory."""
    launcher = await asyncio.to_thread(install)
    process = await asyncio.create_subprocess_exec(
        executable("node"), str(launcher), "--cli", "--format", "json", *args,
        env={**os.environ, "HOME": str(home)}, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


def main() -> None:
    parser = argparse.ArgumentParser(description=f"{PACKAGE} {VERSION} for the tests")
    parser.add_argument("--install", action="store_true",
                        help=f"install it into {CACHE} if it is not there; print the directory")
    args = parser.parse_args()
    if not args.install:
        parser.error("nothing to do (try --install)")
    try:
        print(install().parents[len(LAUNCHER.parts) - 1])
    except RuntimeError as e:  # NodeMissing too
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
