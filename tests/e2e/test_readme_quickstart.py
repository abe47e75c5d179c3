"""The README's first minute: `toolmesh serve`, then a joke with no config at all (the joke
service announces itself), then the seed's two `tg-put-config-item` commands, which work
exactly as before and whose items then win."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from tests.processes import ROOT, console_script, env
from tests.servers import serving
from toolmesh.tools.services.joke import pick_joke


def quickstart_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    intro = text[:text.index("\n## ")]
    return re.findall(r"```bash\n(.*?)```", intro, re.S)


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
    ask_block, seed_block = quickstart_blocks()[1:3]
    (ask,) = ask_block.splitlines()
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
