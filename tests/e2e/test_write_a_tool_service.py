"""The guide's "Write your first tool service" (docs/tool-services.md), as a new user follows
it: the file written in an empty folder, the commands run from there through the installed
``toolmesh`` command, an offline dialog that calls the tool — on the embedded default, and as
separate processes on RabbitMQ with the example's LLM script."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import RUN_MARKER
from tests.examples.loading import EXAMPLES
from tests.processes import ROOT, console_script, env, run_toolmesh, start_toolmesh
from tests.rabbit import own_vhost
from tests.servers import serving

PAGE = ROOT / "docs" / "tool-services.md"
SECTION = "## Write your first tool service"


def guide_section() -> str:
    """The section of the page, up to the next section of its level."""
    text = PAGE.read_text()
    start = text.index(SECTION)
    return text[start:text.index("\n## ", start + len(SECTION))]


def blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def commands(block: str) -> list[list[str]]:
    """The block's commands, each split as the shell would, without its comment."""
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty folder with the guide's file written in it."""
    (python,) = blocks(guide_section(), "python")
    (tmp_path / "wordtools.py").write_text(python)
    return tmp_path


def test_the_guide_shows_the_example_verbatim() -> None:
    (python,) = blocks(guide_section(), "python")
    assert python == (EXAMPLES / "wordcount" / "wordtools.py").read_text()


def test_the_guide_flow_offline_on_the_embedded_default(folder: Path, tmp_path: Path) -> None:
    # two commands: the service announces itself, nothing is registered
    serve, ask = commands(blocks(guide_section(), "bash")[0])
    assert serve[:2] == ["toolmesh", "serve"] and ask[0] == "toolmesh"
    with serving(tmp_path, *serve[2:], cwd=folder, as_user=True) as served:
        def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
            return subprocess.run([console_script(), *argv[1:], "--url", served.url],
                                  cwd=folder, env=env(), capture_output=True, text=True,
                                  timeout=60)

        answered = run(ask)
        listed = run(["toolmesh", "config", "list", "tool"])
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.strip() == "4 words"
    assert "no items of type 'tool'" in listed.stderr  # offered with no config at all
    # -v shows the call with its arguments, then what the tool answered
    assert "count-words" in answered.stderr and '{"text": "the quick brown fox"}' in answered.stderr
    assert "4 words" in answered.stderr
    # the transcript the guide shows is what a user sees
    (transcript,) = blocks(guide_section(), "text")
    shown = answered.stderr + answered.stdout
    for line in transcript.splitlines():
        assert line.strip() in shown, (line, shown)


@pytest.fixture
async def vhost_url() -> AsyncIterator[str]:
    """A RabbitMQ vhost of this test's own: `toolmesh serve` uses the fixed config queues."""
    async with own_vhost(f"{RUN_MARKER}-wordcount") as url:
        yield url


@pytest.mark.rabbitmq
async def test_the_service_as_its_own_process_on_rabbitmq(folder: Path, tmp_path: Path,
                                                          vhost_url: str) -> None:
    (folder / "llm.json").write_text((EXAMPLES / "wordcount" / "llm.json").read_text())
    with serving(tmp_path, "--bus", vhost_url, "--llm", "scripted:llm.json", cwd=folder,
                 as_user=True) as served:
        service, _ = await start_toolmesh("run", "wordtools:WordCount", "--bus", vhost_url,
                                          cwd=folder, as_user=True)
        try:
            url = ("--url", served.url)
            code, _, err = await run_toolmesh("tool-service", "register", "wordtools:WordCount",
                                              *url, cwd=folder, as_user=True)
            assert code == 0, err
            code, out, err = await run_toolmesh(
                "agent", 'How many words are in "the quick brown fox jumps"?', *url,
                as_user=True)
            assert (code, out.strip()) == (0, "The text has 5 words."), err
            # called directly, past the agent's argument checks, the service's own bug shows
            code, out, err = await run_toolmesh("tool-service", "invoke", "word-count",
                                                "--arguments", "{}", *url, as_user=True)
            assert code == 1
            assert err.strip() == ("toolmesh: error: tool-service-error: KeyError: 'text' "
                                   "(raised by the tool service word-count)")
        finally:
            service.terminate()
            assert await service.wait() == 0
            assert service.stderr is not None
            log = (await service.stderr.read()).decode()
    # the service logged its bug with the traceback
    assert "Traceback" in log and "KeyError: 'text'" in log
