"""The first ten minutes, as a newcomer follows them: every shell block of
docs/getting-started.md run as written (tests/docs/shell_blocks.py), in a copy of the
repository with a fresh virtual environment and a fresh ``HOME`` — the install, ``toolmesh
serve`` on another port, a dialog, the dialogs it recorded, an approval, the MCP Inspector at
``/mcp`` with a token that may approve, and SmolLM2 on llama-cpp-python's server. The README's
"First 10 minutes" holds the same blocks, so this runs both."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.shell_blocks import Reader, blocks, free_port, tracked_files, unmarked
from tests.local_model import server as local_model
from tests.processes import ROOT
from toolmesh.tools.services.joke import pick_joke

PAGE = ROOT / "docs" / "getting-started.md"
#: the ports the page names: the test gives each a free one (two runs must not collide)
PORTS = ("8899", "8000")


def readme_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## First 10 minutes")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_every_shell_block_of_the_page_is_run_and_the_readme_has_the_same() -> None:
    page = PAGE.read_text()
    assert unmarked(page) == [], "a shell block with no run: comment would never be tried"
    steps = blocks(page)
    assert len(steps) >= 8
    assert [b.text for b in blocks(readme_section())] == [b.text for b in steps], \
        "the README's First 10 minutes and docs/getting-started.md run different commands"
    assert unmarked(readme_section()) == []
    # the page installs what the local-model tests run: a pinned build, made once
    install = next(b.text for b in steps if "llama-cpp-python[server]" in b.text)
    assert f"'{local_model.LLAMA_CPP}'" in install and local_model.SMOLLM2 in install


def check(ran_text: str, stdout: str, stderr: str) -> None:
    """What the page says each command shows."""
    if 'agent "Tell me a joke about food"' in ran_text:
        assert pick_joke("food", "pun") in stdout, stdout
        assert '🔧 tell-joke {"topic": "food"}' in stderr, stderr
    if "dialogs list" in ran_text:
        assert "Tell me a joke about food" in stdout, stdout
    if 'agent "Tell me a joke about cats"' in ran_text:
        assert 'tell-joke {"topic": "cats"}' in stderr and "Approve? [y/N]" in stderr, stderr
        assert "✔ approved" in stderr and pick_joke("cats", "pun") in stdout, (stdout, stderr)
    if "dialogs show" in ran_text and "config delete" in ran_text:
        assert re.search(r"✔ approved by local with the CLI at ", stdout), stdout
    if "--method tools/list" in ran_text:
        assert '"name": "tell-joke"' in stdout, stdout
    if "--method tools/call" in ran_text:
        assert '"isError": false' in stdout and pick_joke("cats", "pun") in stdout.replace(
            "\\n", "\n"), stdout
    if 'agent "Tell me a joke about dogs"' in ran_text:
        assert stdout.strip(), "the local model's dialog gave no answer"


@pytest.mark.slow
def test_the_first_ten_minutes_on_a_fresh_machine(tmp_path: Path) -> None:
    if shutil.which("npx") is None:
        pytest.fail("the page's MCP step needs Node's npx (docs/testing.md)", pytrace=False)
    local_model.install()  # the shared pip cache then has llama.cpp's build (.ci/run does it)
    checkout = tmp_path / "toolmesh"
    for name in tracked_files(ROOT):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, checkout / name)
    venv = tmp_path / "venv"
    # the suite's packages are visible (no download of what is installed); `pip install .`
    # installs this copy into the venv, whose `toolmesh` comes first on the PATH
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    ports = {port: free_port() for port in PORTS}
    steps = blocks(PAGE.read_text())
    with Reader(cwd=checkout, home=tmp_path / "home", path=[venv / "bin"], ports=ports) as me:
        for step in steps:
            if step.how in ("background", "restart"):
                started = me.start(step, timeout=180)
                if step.how == "restart":  # Ctrl-C stopped the one before, and cleanly
                    stopped = me.stopped[-1]
                    assert stopped.process.returncode in (0, 130), "".join(stopped.lines)
                    assert not any("Traceback" in line for line in stopped.lines)
                assert not any("Traceback" in line for line in started), "".join(started)
                continue
            ran = me.run(step, timeout=1800 if "pip install" in step.text else 300)
            assert ran.code == 0, f"{step.text}\nexit {ran.code}\n{ran.stdout}\n{ran.stderr}"
            assert "Traceback" not in ran.stderr, ran.stderr
            check(step.text, ran.stdout, ran.stderr)
        serve = next(s for s in me.servers if s.block.program == "toolmesh serve")
        log = "".join(serve.lines)
        # the restarted server asked the local model, and found out how to get tool calls
        assert "--llm" in serve.block.text and "smollm2" in log, log[-2000:]
    assert (tmp_path / "home" / ".toolmesh").is_dir()  # the reader's own HOME held its data
