"""The commands run on uvloop when it is installed, on asyncio's loop when told so with
``TOOLMESH_LOOP=asyncio``, and refuse a ``TOOLMESH_LOOP`` they cannot honour.

Each runs the installed console script: ``toolmesh run MODULE:CLASS`` serves a tool service
from the test's folder whose ``start()`` reports the loop it runs on, so the loop checked is
the one the command really made.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolmesh.cli import loop
from toolmesh.cli.http import CliError

TOOLMESH = shutil.which("toolmesh")
pytestmark = pytest.mark.skipif(TOOLMESH is None, reason="toolmesh is not installed")

LOOPREPORT = textwrap.dedent("""\
    import asyncio
    import sys

    from toolmesh import DynamicToolService


    class LoopReport(DynamicToolService):
        async def start(self):
            print("loop:", type(asyncio.get_running_loop()).__module__, file=sys.stderr,
                  flush=True)
            await super().start()

        async def invoke(self, user, config, arguments):
            return ""
""")


async def loop_of_run(folder: Path, env: dict[str, str]) -> str:
    """The module of the loop class ``toolmesh run`` serves a tool service on."""
    assert TOOLMESH is not None
    (folder / "loopreport.py").write_text(LOOPREPORT)
    proc = await asyncio.create_subprocess_exec(
        TOOLMESH, "run", "loopreport:LoopReport", "--topic", "loopreport", cwd=folder,
        env={**os.environ, "TOOLMESH_BUS": "memory://", **env}, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(30):
            while not (lines and lines[-1].startswith("loop:")):
                raw = await proc.stderr.readline()
                assert raw, "".join(lines)
                lines.append(raw.decode())
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 20)
    return lines[-1].split()[1]


async def test_the_commands_run_on_uvloop_when_it_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("uvloop")
    assert await loop_of_run(tmp_path, {loop.ENV: ""}) == "uvloop"


async def test_toolmesh_loop_asyncio_keeps_asyncios_loop(tmp_path: Path) -> None:
    assert await loop_of_run(tmp_path, {loop.ENV: "asyncio"}) == "asyncio.unix_events"


def test_a_loop_the_command_cannot_run_on_is_refused_in_one_line(tmp_path: Path) -> None:
    assert TOOLMESH is not None
    done = subprocess.run([TOOLMESH, "run", "joke"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, loop.ENV: "trio"})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        "toolmesh: error: TOOLMESH_LOOP='trio': use one of asyncio, uvloop"]


def test_uvloop_asked_for_but_missing_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the import fails as it does where uvloop is not installed
    monkeypatch.setitem(sys.modules, "uvloop", None)
    with pytest.raises(CliError, match=r"uvloop is not installed: pip install 'toolmesh\[fast\]'"):
        loop.loop_factory({loop.ENV: "uvloop"})
    assert loop.loop_factory({}) is None  # unasked: asyncio's loop, quietly
