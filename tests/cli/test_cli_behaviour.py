"""The `toolmesh` command line as people expect of one: help when a group is given alone,
--version, errors reported by the subcommand they concern with "did you mean", per-part
help for `toolmesh run`, tool services imported from the current folder, a port clash
reported before anything starts, and a closed pipe ending the command quietly.

Each test runs the installed console script (the `python -m` form would put the current
folder on the import path itself, hiding what `toolmesh run MODULE:CLASS` must do).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import re
import shutil
import signal
import socket
import subprocess
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.servers import Served, toolmesh_serve
from toolmesh.cli import once_options, options

TOOLMESH = shutil.which("toolmesh")
pytestmark = pytest.mark.skipif(TOOLMESH is None, reason="toolmesh is not installed")

GROUPS = ["config", "mcp", "token", "tool-service", "run", "run-service"]


def toolmesh(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None
             ) -> tuple[int, str, str]:
    """Run the console script to completion: ``(exit code, stdout, stderr)``."""
    assert TOOLMESH is not None
    done = subprocess.run([TOOLMESH, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})
    return done.returncode, done.stdout, done.stderr


def usage_error(err: str) -> tuple[str, str]:
    """The first line (the usage) and the last (the error) of an argparse failure."""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    return lines[0], lines[-1]


# -- help ---------------------------------------------------------------------------------------

def test_toolmesh_alone_prints_the_help() -> None:
    code, out, err = toolmesh()
    assert (code, err) == (0, "")
    assert out.startswith("usage: toolmesh [-h] [--version] COMMAND ...\n")
    for command in ["demo", "serve", "run", "config", "agent", "mcp", "tool-service", "tools",
                    "token", "completion"]:
        assert re.search(rf"^    {command}\b", out, re.M), command


@pytest.mark.parametrize("group", GROUPS)
def test_a_command_group_alone_prints_its_help(group: str) -> None:
    code, out, err = toolmesh(group)
    assert (code, err) == (0, "")
    shown = "run" if group == "run-service" else group  # an alias shows its command's help
    assert out.startswith(f"usage: toolmesh {shown} [-h] ")
    assert "show this help message and exit" in out


def test_version() -> None:
    code, out, err = toolmesh("--version")
    assert (code, out, err) == (0, f"toolmesh {importlib.metadata.version('toolmesh')}\n", "")


# -- errors: reported by the subcommand, with suggestions ----------------------------------------

def test_an_unknown_option_is_reported_by_its_subcommand_with_a_suggestion() -> None:
    code, out, err = toolmesh("serve", "--prot")
    assert (code, out) == (2, "")
    first, last = usage_error(err)
    assert first.startswith("usage: toolmesh serve [-h] ")
    assert last == "toolmesh serve: error: unrecognized arguments: --prot (did you mean --port?)"


def test_an_unknown_option_two_levels_down() -> None:
    code, _, err = toolmesh("config", "history", "--jsno")
    first, last = usage_error(err)
    assert code == 2 and first.startswith("usage: toolmesh config history ")
    assert last == ("toolmesh config history: error: unrecognized arguments: --jsno "
                    "(did you mean --json?)")


@pytest.mark.parametrize(("args", "error"), [
    (["sevre"], "toolmesh: error: argument COMMAND: invalid choice: 'sevre' "
                "(did you mean 'serve'?)"),
    (["config", "lst"], "toolmesh config: error: argument COMMAND: invalid choice: 'lst' "
                        "(did you mean 'list'?)"),
    (["run", "jokee"], "toolmesh run: error: argument PART: invalid choice: 'jokee' "
                       "(did you mean 'joke'?)"),
    (["completion", "bsah"], "toolmesh completion: error: argument shell: invalid choice: "
                             "'bsah' (did you mean 'bash'?)"),
])
def test_a_mistyped_command_or_choice_gets_a_suggestion(args: list[str], error: str) -> None:
    code, out, err = toolmesh(*args)
    assert (code, out) == (2, "")
    first, last = usage_error(err)
    assert first.startswith(f"usage: {error.split(':')[0]} ")
    assert last == error


def test_a_choice_nothing_resembles_lists_the_choices() -> None:
    code, _, err = toolmesh("zzzz")
    assert code == 2
    assert usage_error(err)[1].startswith(
        "toolmesh: error: argument COMMAND: invalid choice: 'zzzz' (choose from 'demo', ")


# -- toolmesh run PART ---------------------------------------------------------------------------

#: a tool service's: its queues and id, and how it announces itself
TOOL_SERVICE_OPTIONS = {"--topic", "--request-queue", "--response-queue", "--id",
                        "--concurrency", "-w", "--announce-ttl", "--no-announcements",
                        "--dedupe", *(bound.flag for bound in once_options.DEDUPE_BOUNDS)}
PART_OPTIONS = {
    "config": {"--config-store", "--mcp-stdio-allow"},
    "gateway": {"--host", "--port", "--token", "--token-file", "--allow-origin", "--allow-host",
                "--insecure", "--no-workbench", "--startup-grace", "--deadline",
                "--mcp-allow", "--mcp-deny",
                # the direct routes refuse what a dialog would ask a person about
                "--approval", "--public-url",
                *(bound.flag for bound in options.GATEWAY_BOUNDS)},
    "agent": {"--flow", "--no-announcements", "--tool-calling", "--step-temperature",
              "--dialogs", "--dialogs-keep", "--dialogs-days", "--dialogs-max-bytes",
              "--approval",
              # how a step's tools are chosen and its reply bounded (issue 41)
              "--tool-selection", "--tool-budget", "--tool-relevance", "--find-tools",
              "--choice-steps", "--argument-values", "--max-answer-tokens",
              *(bound.flag for bound in options.AGENT_BOUNDS),
              *(bound.flag for bound in options.STREAM_BOUNDS)},
    "prompt": {bound.flag for bound in options.PROMPT_BOUNDS},
    "text-completion": {"--llm", "--model", "--api-key", "--api-key-file", "--temperature",
                        "--llm-server", "--tool-calling",
                        *(bound.flag for bound in options.STREAM_BOUNDS)},
    "mcp-tool": {"--mcp-stdio-allow", "--flow", "--mcp-allow", "--mcp-deny", "--public-url",
                 "--mcp-logins"},
    "joke": TOOL_SERVICE_OPTIONS,
    "joke-streaming": TOOL_SERVICE_OPTIONS,
    "wordtools:WordCount": TOOL_SERVICE_OPTIONS,
}
#: every part reads these
PROCESS_OPTIONS = {"-h", "--bus", "--drain-timeout", "--max-deliveries", "--log-level",
                   "--metrics-port", "--metrics-host", "--metrics-token-file"}


@pytest.mark.parametrize("part", PART_OPTIONS)
def test_each_part_has_a_help_with_only_its_options(part: str) -> None:
    code, out, err = toolmesh("run", part, "--help")
    assert (code, err) == (0, "")
    usage = out.split("\n\n", 1)[0]
    prog = "MODULE:CLASS" if ":" in part else part
    assert usage.startswith(f"usage: toolmesh run {prog} [-h]")
    assert set(re.findall(r"\[(--?[\w-]+)", usage)) == PART_OPTIONS[part] | PROCESS_OPTIONS


def test_run_alone_lists_each_part_once_with_its_description() -> None:
    code, out, err = toolmesh("run")
    assert (code, err) == (0, "")
    listed = re.findall(r"^    (\S+)", out, re.M)
    assert listed == ["config", "gateway", "agent", "prompt", "text-completion", "mcp-tool",
                      "joke", "joke-streaming", "MODULE:CLASS"]
    assert "    joke           the built-in joke tool service (topic joke)\n" in out


def test_a_part_refuses_the_options_of_other_parts() -> None:
    code, out, err = toolmesh("run", "joke", "--llm", "x", "--port", "1")
    assert (code, out) == (2, "")
    first, last = usage_error(err)
    assert first.startswith("usage: toolmesh run joke [-h] ")
    assert last == ("toolmesh run joke: error: unrecognized arguments: --llm x --port 1 "
                    "(--llm is an option of text-completion; --port is an option of gateway)")


# -- toolmesh run MODULE:CLASS from the current folder -------------------------------------------

WORDTOOLS = textwrap.dedent("""\
    from toolmesh import DynamicToolService


    class WordCount(DynamicToolService):
        async def invoke(self, user, config, arguments):
            return str(len(str(arguments.get("text", "")).split()))


    def helper():
        pass
""")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "wordtools.py").write_text(WORDTOOLS)
    (tmp_path / "broken.py").write_text("import os\n\ndef count(:\n    pass\n")
    (tmp_path / "needsdeps.py").write_text("import os\nimport no_such_dependency_xyz\n")
    (tmp_path / "plain.py").write_text("import os\n")
    return tmp_path


async def test_a_service_in_the_current_folder_runs(folder: Path) -> None:
    assert TOOLMESH is not None
    proc = await asyncio.create_subprocess_exec(
        TOOLMESH, "run", "wordtools:WordCount", "--topic", "wordcount", cwd=folder,
        env={**os.environ, "TOOLMESH_BUS": "memory://"}, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(30):
            while "ready:" not in (lines[-1] if lines else ""):
                raw = await proc.stderr.readline()
                assert raw, "".join(lines)
                lines.append(raw.decode())
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 20)
    assert code == 0
    assert any("WordCount (id wordcount): non-persistent://tg/request/wordcount" in line
               for line in lines), lines


@pytest.mark.parametrize(("spec", "error"), [
    ("nothere:WordCount", "cannot import module 'nothere': no file nothere.py or package "
                          "nothere in the current folder ({folder}) or on the Python path"),
    ("wordtools:Nope", "module 'wordtools' has no class 'Nope' (it defines: WordCount)"),
    ("plain:Nope", "module 'plain' has no class 'Nope' (it defines no DynamicToolService "
                   "subclass)"),
    ("wordtools:helper", "'wordtools:helper' is a function, not a DynamicToolService subclass"),
    ("wordtools:DynamicToolService", "'wordtools:DynamicToolService' is the DynamicToolService "
                                     "base class itself, not a DynamicToolService subclass"),
    ("broken:Count", "importing 'broken' failed: broken.py line 3: SyntaxError: invalid syntax"),
    ("needsdeps:Thing", "importing 'needsdeps' failed: ModuleNotFoundError: No module named "
                        "'no_such_dependency_xyz' (needsdeps.py line 2)"),
])
def test_a_service_that_cannot_be_loaded_fails_in_one_line(folder: Path, spec: str,
                                                           error: str) -> None:
    code, out, err = toolmesh("run", spec, "--topic", "t", cwd=folder)
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"toolmesh: error: {error.format(folder=folder)}"]


def test_serve_refuses_a_tool_service_it_cannot_load_before_starting(folder: Path) -> None:
    code, out, err = toolmesh("serve", "--port", "0", "--tool-service", "wordtools:Nope",
                              cwd=folder, env={"TOOLMESH_DATA_DIR": str(folder / "data")})
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "toolmesh: error: module 'wordtools' has no class 'Nope' (it defines: WordCount)"]
    code, out, err = toolmesh("serve", "--port", "0", "--tool-service", "wordtools:WordCount",
                              cwd=folder, env={"TOOLMESH_DATA_DIR": str(folder / "data")})
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "toolmesh: error: --tool-service wordtools:WordCount: the class declares no definition, "
        "so it has no queues of its own; give it one (docs/tool-services.md)"]


def test_a_class_without_definition_needs_a_topic(folder: Path) -> None:
    code, _, err = toolmesh("run", "wordtools:WordCount", "--bus", "memory://", cwd=folder)
    assert code == 1
    assert err.splitlines() == [
        "toolmesh: error: wordtools:WordCount declares no definition, so it has no queues of "
        "its own: give --topic, or both --request-queue and --response-queue (or give the "
        "class a definition: docs/tool-services.md)"]


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_bad_log_level_is_a_usage_error(how: str) -> None:
    args, env = ((["--log-level", "loud"], {}) if how == "flag"
                 else ([], {"TOOLMESH_LOG_LEVEL": "loud"}))
    code, _, err = toolmesh("run", "prompt", *args, env=env)
    assert code == 2
    usage, error = usage_error(err)
    assert usage.startswith("usage: toolmesh run prompt [-h]") and "[--bus BUS]" in err
    assert error == ("toolmesh run prompt: error: argument --log-level: 'loud' is not one of "
                     "DEBUG, INFO, WARNING, ERROR, CRITICAL")


# -- a port in use -------------------------------------------------------------------------------

@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("command", [["serve"], ["run", "gateway"]])
@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_port_in_use_fails_before_anything_starts(command: list[str], how: str,
                                                     taken_port: int, tmp_path: Path) -> None:
    env = {"TOOLMESH_DATA_DIR": str(tmp_path), "TOOLMESH_BUS": "memory://"}
    if how == "flag":
        args = [*command, "--port", str(taken_port)]
    else:
        args, env["TOOLMESH_PORT"] = command, str(taken_port)
    code, out, err = toolmesh(*args, env=env)
    assert (code, out) == (1, "")
    # one line: nothing was started (nor logged) before
    assert err.splitlines() == [
        f"toolmesh: error: cannot listen on 127.0.0.1:{taken_port}: the address is in use "
        "(another toolmesh serve?); choose another port with --port or TOOLMESH_PORT"]
    assert not (tmp_path / "config.db").exists()


# -- a closed pipe -------------------------------------------------------------------------------

def into_closed_pipe(command: list[str], *, buffered: bool) -> tuple[int, str]:
    """Run ``command`` with stdout a pipe nobody reads any more (``| head -1`` once head has
    exited): ``(exit code, stderr)``."""
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(command, stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=60, env=env)
    finally:
        os.close(write)
    return done.returncode, done.stderr


@pytest.mark.parametrize("buffered", [True, False])
def test_a_closed_pipe_ends_the_command_quietly(buffered: bool) -> None:
    assert TOOLMESH is not None
    assert into_closed_pipe([TOOLMESH, "completion", "bash"], buffered=buffered) == (141, "")


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with toolmesh_serve(tmp_path) as s:
        yield s


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_config_show_and_tg_show_config_into_a_closed_pipe(served: Served) -> None:
    tg_show_config = shutil.which("tg-show-config")
    assert TOOLMESH is not None and tg_show_config is not None
    for command in ([TOOLMESH, "config", "show", "--url", served.url],
                    [tg_show_config, "-u", served.url]):
        for buffered in (True, False):
            code, err = await asyncio.to_thread(into_closed_pipe, command, buffered=buffered)
            assert (code, err) == (141, ""), (command, buffered)
