"""tests/forkserver.py: a child forked from a template starts, runs and ends as the same
``python -m MODULE`` (or console script) started as a new interpreter does — each case is run both ways and the
two compared (tests/fork_probe.py reports what its process was started with)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest

from tests import forkserver
from tests.forkserver import PIPE, ForkedProcess, spawn, spawn_script
from tests.processes import env

WAYS = ["fork", "exec"]


@pytest.fixture(params=WAYS)
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "exec":
        monkeypatch.setenv("TOOLMESH_TEST_FORK", "0")
    return str(request.param)


async def probe(*args: str, stdin: bytes = b"", cwd: Path | None = None,
                extra: dict[str, str] | None = None) -> tuple[object, int, dict, str, str]:
    proc = await spawn("tests.fork_probe", *args, env={**env(), **(extra or {})}, cwd=cwd,
                       stdin=PIPE, stdout=PIPE, stderr=PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), 30)
    first, _, rest = out.decode().partition("\n")
    return proc, proc.returncode, json.loads(first), rest, err.decode()


async def test_forked_unless_told_not_to(way: str) -> None:
    proc, *_ = await probe()
    assert isinstance(proc, ForkedProcess) == (way == "fork")


async def test_the_child_gets_the_arguments_folder_environment_and_stdin_it_was_given(
        way: str, tmp_path: Path) -> None:
    _, code, seen, rest, _ = await probe("exit 0", "two words", stdin=b"piped in", cwd=tmp_path,
                                         extra={"PROBE": "sent", "TZ": "Asia/Tokyo"})
    assert code == 0
    assert seen["name"] == "__main__"
    assert seen["argv"] == ["exit 0", "two words"]
    assert seen["cwd"] == str(tmp_path)
    assert seen["path"][0] == str(tmp_path)  # `-m` puts the working folder first…
    assert seen["path"][1] == env()["PYTHONPATH"].split(":")[0]  # …then PYTHONPATH
    assert seen["probe"] == "sent" and seen["tz"] == "JST"
    assert seen["stdin"] == "piped in"
    assert not seen["session_leader"] and seen["sigint"]
    assert rest == "atexit ran\n"  # atexit ran, and what it wrote was flushed at the end


async def test_the_standard_streams_are_made_as_a_new_interpreter_makes_them() -> None:
    _, _, forked, _, _ = await probe()
    with pytest.MonkeyPatch.context() as m:
        m.setenv("TOOLMESH_TEST_FORK", "0")
        _, _, started, _, _ = await probe()
    assert forked["stdout"] == started["stdout"] and forked["stderr"] == started["stderr"]


@pytest.mark.parametrize(("how", "code", "said"), [
    ("exit 3", 3, ""),
    ("raise", 1, "RuntimeError: the probe fails"),
    ("interrupt", -signal.SIGINT, "KeyboardInterrupt"),
    (f"signal {int(signal.SIGTERM)}", -signal.SIGTERM, ""),
])
async def test_it_ends_with_the_code_a_new_interpreter_would(way: str, how: str, code: int,
                                                            said: str) -> None:
    _, got, _, _, err = await probe(how)
    assert got == code, err
    assert said in err


async def test_signals_reach_it_and_a_new_session_is_its_own(way: str) -> None:
    proc = await spawn("tests.fork_probe", "wait", env=env(), stdin=PIPE, stdout=PIPE,
                       stderr=PIPE, start_new_session=True)
    assert proc.stdout is not None
    seen = json.loads(await asyncio.wait_for(proc.stdout.readline(), 30))
    assert seen["session_leader"]
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 30) == -signal.SIGTERM
    with pytest.raises(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)


async def test_an_environment_that_changes_the_interpreters_start_gets_a_new_interpreter(
) -> None:
    proc, code, _, _, err = await probe(extra={"PYTHONPROFILEIMPORTTIME": "1"})
    assert not isinstance(proc, ForkedProcess)
    assert code == 0 and "import time:" in err
    assert forkserver.forking()  # the fallback is per start, not for the run


async def test_children_that_end_at_once_each_report_their_own_code() -> None:
    """Two dozen children that end as soon as they start, all running at once: each reports
    its own exit code. (A child can end before its parent has read the template's "pid"
    answer, the "exit" line right behind it; on a loaded machine that once lost the exit line,
    reported as -9, before the answer was read a byte at a time.)"""
    procs = [await spawn("tests.fork_probe", f"exit {n}", env=env(), stdin=forkserver.DEVNULL,
                         stdout=forkserver.DEVNULL, stderr=forkserver.DEVNULL)
             for n in range(24)]
    assert [await asyncio.wait_for(p.wait(), 30) for p in procs] == list(range(24))


def console_script(folder: Path) -> Path:
    """A console script as pip writes one, calling the probe's ``main``."""
    script = folder / "probe-script"
    script.write_text(f"#!{sys.executable}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
                      "from tests.fork_probe import main\nif __name__ == '__main__':\n"
                      "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                      "    sys.exit(main())\n")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("how", ["exit 0", "exit 4", "raise"])
async def test_a_console_script_runs_as_when_executed(way: str, tmp_path: Path,
                                                      how: str) -> None:
    (tmp_path / "bin").mkdir()
    script = console_script(tmp_path / "bin")
    proc = await spawn_script(script, how, "two words", env={**env(), "PROBE": how},
                              cwd=tmp_path, stdin=PIPE, stdout=PIPE, stderr=PIPE)
    out, err = await asyncio.wait_for(proc.communicate(b"piped in"), 30)
    assert isinstance(proc, ForkedProcess) == (way == "fork")
    assert proc.returncode == {"exit 0": 0, "exit 4": 4, "raise": 1}[how], err
    seen = json.loads(out.decode().partition("\n")[0])
    assert seen["name"] == "tests.fork_probe"  # imported by the script, not run as __main__
    assert seen["argv"] == [how, "two words"] and seen["stdin"] == "piped in"
    # the script's package loads again in the child: what it reads then is the child's
    assert seen["probe"] == seen["probe_at_import"] == how
    assert seen["cwd"] == str(tmp_path)
    assert seen["path"][0] == str(script.parent)  # the script's folder first, not the cwd
    assert ("RuntimeError: the probe fails" in err.decode()) == (how == "raise")


async def test_a_script_that_is_not_a_python_console_script_is_executed(tmp_path: Path) -> None:
    script = tmp_path / "shell-script"
    script.write_text("#!/bin/sh\necho \"$0 $*\"\nexit 5\n")
    script.chmod(0o755)
    proc = await spawn_script(script, "a", env=env(), stdout=PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert not isinstance(proc, ForkedProcess)
    assert (proc.returncode, out.decode()) == (5, f"{script} a\n")
