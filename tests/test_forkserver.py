"""tests/forkserver.py: a child forked from a template starts, runs and ends as the same
``python -m MODULE`` started as a new interpreter does — each case is run both ways and the
two compared (tests/fork_probe.py reports what its process was started with)."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from tests import forkserver
from tests.forkserver import PIPE, ForkedProcess, spawn
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
