"""The README's promises to TrustGraph's users: a joke with no config at all (the joke service
announces itself; the question of "First 10 minutes"), then the seed's two
`tg-put-config-item` commands of "Coming from TrustGraph", which work exactly as before and
whose items then win. (tests/docs/test_getting_started.py runs "First 10 minutes" whole.)"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from tests.processes import ROOT, console_script, env
from tests.servers import serving
from toolmesh.tools.services.joke import pick_joke


def quickstart_blocks() -> tuple[str, str]:
    """The README's joke question (one line) and its block of the seed's commands."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    [ask] = [line for block in blocks for line in block.splitlines()
             if line.startswith('toolmesh agent "Tell me a joke about food"')]
    [seed] = [block for block in blocks if block.startswith("tg-put-config-item ")]
    return ask, seed


def run(command: str, url: str) -> subprocess.CompletedProcess[str]:
    """One README line as the shell runs it (its `< file` from the repository root)."""
    argv = shlex.split(command, comments=True)
    stdin = None
    if "<" in argv:
        at = argv.index("<")
        stdin = (ROOT / argv[at + 1]).read_text()
        argv = argv[:at]
    assert argv[0] in ("toolmesh", "tg-put-config-item"), argv
    program = console_script() if argv[0] == "toolmesh" else \
        str(Path(console_script()).with_name(argv[0]))
    return subprocess.run([program, *argv[1:], "--url" if argv[0] == "toolmesh" else "-u",
                           url], input=stdin, cwd=ROOT, env=env(), capture_output=True,
                          text=True, timeout=60)


def test_a_joke_with_no_config_then_with_the_seeds_items(tmp_path: Path) -> None:
    ask, seed_block = quickstart_blocks()
    joke = f"Here's a pun for you:\n\n{pick_joke('food', 'pun')}"
    with serving(tmp_path) as served:
        answered = run(ask, served.url)
        assert answered.returncode == 0, answered.stderr
        assert joke in answered.stdout
        assert "🔧 tell-joke" in answered.stderr  # -v: the call of the announced tool
        tools = json.loads(run("toolmesh tools --json", served.url).stdout)["tools"]
        assert [(t["key"], t["source"]) for t in tools] == [("tell-joke", "announced")]

        for command in seed_block.splitlines():
            done = run(command, served.url)
            assert done.returncode == 0, done.stderr
        tools = json.loads(run("toolmesh tools --json", served.url).stdout)["tools"]
        assert [(t["key"], t["source"], t["status"]) for t in tools] == \
            [("tell-joke", "configured", "available")]
        answered = run(ask, served.url)
        assert answered.returncode == 0, answered.stderr
        assert joke in answered.stdout
