"""`toolmesh completion bash|zsh|fish`: the scripts, run in the real shells.

bash's completion function is driven as bash drives it (COMP_WORDS, COMP_CWORD); fish
answers `complete -C`; zsh's function runs with its completion builtins replaced by stubs
that print what they were given. A shell that is not installed is skipped, and its script
is at least checked to name every command.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from toolmesh.cli.main import build_parser

TOOLMESH = shutil.which("toolmesh")
pytestmark = pytest.mark.skipif(TOOLMESH is None, reason="toolmesh is not installed")


def generated(shell: str, env: dict[str, str] | None = None) -> str:
    assert TOOLMESH is not None
    done = subprocess.run([TOOLMESH, "completion", shell], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout


def run_shell(argv: list[str], script: str) -> str:
    done = subprocess.run(argv, input=script, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout


# -- the parser tree, read here independently of toolmesh.cli.completion ---------------------

def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("toolmesh",)
             ) -> list[tuple[tuple[str, ...], set[str], set[str]]]:
    """Every command: (its words, what completes a plain word there, its options)."""
    words: set[str] = set()
    options = {flag for action in parser._actions if action.help != argparse.SUPPRESS
               for flag in action.option_strings}
    below = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                typed = "any:Thing" if name == "MODULE:CLASS" else name
                if typed == name:
                    words.add(name)
                below += commands(sub, (*path, typed))
        elif not action.option_strings and action.choices:
            words |= set(action.choices)
    return [(path, words, options), *below]


TREE = commands(build_parser())


def test_the_tree_has_what_the_scripts_must_complete() -> None:
    paths = {path for path, _, _ in TREE}
    assert {("toolmesh", "config", "history"), ("toolmesh", "run", "joke"),
            ("toolmesh", "run", "any:Thing"), ("toolmesh", "completion")} <= paths


# -- bash ------------------------------------------------------------------------------------

BASH = shutil.which("bash")


def bash_complete(cases: list[list[str]]) -> list[list[str]]:
    """What bash's completion offers for each case: the words typed, the last one under the
    cursor (as bash splits them: a:b is three words)."""
    assert BASH is not None
    lines = [generated("bash"),
             'comp() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _toolmesh;'
             ' echo "${COMPREPLY[*]}"; }']
    lines += ["comp " + " ".join(f"'{w}'" for w in case) for case in cases]
    return [line.split() for line in run_shell([BASH, "--norc", "-s"], "\n".join(lines) + "\n")
            .splitlines()]


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_bash_completes_commands_subcommands_options_and_parts() -> None:
    cases = {
        ("toolmesh", "con"): ["config"],
        ("toolmesh", "config", ""): ["put", "get", "list", "delete", "show", "history"],
        ("toolmesh", "serve", "--po"): ["--port"],
        ("toolmesh", "run", "jo"): ["joke", "joke-streaming"],
        # after an option's value; after a MODULE:CLASS (bash splits it at the colon)
        ("toolmesh", "serve", "--port", "80", "--ll"): ["--llm", "--llm-server"],
        ("toolmesh", "run", "wordtools", ":", "WordCount", "--to"): ["--topic"],
        ("toolmesh", "run-service", "joke", "--con"): ["--concurrency"],
        ("toolmesh", "mcp", "set", "x", "--transport", "s"): ["streamable-http", "sse", "stdio"],
        ("toolmesh", "completion", ""): ["bash", "zsh", "fish"],
        # a part's options only
        ("toolmesh", "run", "joke", "--l"): ["--log-level"],
    }
    got = bash_complete([list(case) for case in cases])
    assert dict(zip(cases, got)) == cases


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_bash_completes_every_command_of_the_parsers() -> None:
    cases = [[*path, ""] for path, _, _ in TREE] + [[*path, "-"] for path, _, _ in TREE]
    got = bash_complete(cases)
    n = len(TREE)
    for (path, words, options), plain, dashed in zip(TREE, got[:n], got[n:]):
        assert set(plain) == words, path
        assert set(dashed) == options, path


# -- zsh -------------------------------------------------------------------------------------

ZSH = shutil.which("zsh")

ZSH_STUBS = """
compdef() { }
_describe() { print -rl -- "${(@P)4}" }
compadd() { print -rl -- "${(@P)2}" }
_files() { print -- '<files>' }
"""


def zsh_complete(*typed: str) -> list[str]:
    """What zsh's completion function hands to _describe/compadd (zsh filters them by the
    word under the cursor itself), or ``['<files>']``."""
    assert ZSH is not None
    words = " ".join(f"'{w}'" for w in typed)
    return run_shell([ZSH, "-f", "-s"], ZSH_STUBS + generated("zsh") + f"""
words=({words}); CURRENT=${{#words}}; _toolmesh
""").splitlines()


@pytest.mark.skipif(ZSH is None, reason="zsh is not installed")
def test_zsh_completes_commands_subcommands_options_and_parts() -> None:
    assert "config:read and change config items through the gateway" in \
        zsh_complete("toolmesh", "con")
    assert [i.split(":")[0] for i in zsh_complete("toolmesh", "config", "")] == \
        ["put", "get", "list", "delete", "show", "history"]
    assert "--port:gateway port" in zsh_complete("toolmesh", "serve", "--po")
    assert [i.split(":")[0] for i in zsh_complete("toolmesh", "run", "jo")] == \
        ["config", "gateway", "agent", "prompt", "text-completion", "mcp-tool", "joke",
         "joke-streaming"]
    offered = [i.split(":")[0] for i in zsh_complete("toolmesh", "run", "x:Y", "--")]
    assert "--topic" in offered and "--port" not in offered
    assert zsh_complete("toolmesh", "mcp", "set", "x", "--transport", "") == \
        ["streamable-http", "sse", "stdio"]
    assert zsh_complete("toolmesh", "config", "put", "tool/x", "") == ["<files>"]


# -- fish ------------------------------------------------------------------------------------

FISH = shutil.which("fish")


@pytest.mark.skipif(FISH is None, reason="fish is not installed")
def test_fish_completes_commands_subcommands_options_and_parts(tmp_path: Path) -> None:
    assert FISH is not None
    (tmp_path / "toolmesh.fish").write_text(generated("fish"))
    lines = ["toolmesh con", "toolmesh config ", "toolmesh serve --po", "toolmesh run jo",
             "toolmesh run wordtools:WordCount --to"]
    script = f"source {tmp_path / 'toolmesh.fish'}\n" + "".join(
        f"complete -C '{line}'\necho ---\n" for line in lines)
    out = subprocess.run([FISH, "--no-config", "-c", script], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    answers = [[row.split("\t")[0] for row in block.strip().splitlines()]
               for block in out.stdout.split("---\n")[:-1]]
    assert answers == [["config"],
                       sorted(["put", "get", "list", "delete", "show", "history"]),
                       ["--port"],
                       ["joke", "joke-streaming"],
                       ["--topic"]]


# -- every script ------------------------------------------------------------------------------

@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_script_names_every_command_and_no_secret(shell: str) -> None:
    secret = "hunter2-in-the-bus-url"
    script = generated(shell, env={"TOOLMESH_BUS": f"amqp://u:{secret}@h/",
                                   "TOOLMESH_GATEWAY_TOKEN": secret,
                                   "TOOLMESH_LLM_URL": f"http://{secret}/v1"})
    for path, words, options in TREE:
        for word in (*path[1:], *words):
            if word != "any:Thing":
                assert word in script, (path, word)
        for option in options:
            # fish spells an option -l NAME or -s N
            spelled = (option if shell != "fish" else f"-l '{option[2:]}'"
                       if option.startswith("--") else f"-s '{option[1:]}'")
            assert spelled in script, (path, option)
    assert secret not in script  # env defaults never reach a file people keep


def test_the_help_says_how_to_install() -> None:
    assert TOOLMESH is not None
    done = subprocess.run([TOOLMESH, "completion", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0
    for line in ["toolmesh completion bash > ~/.local/share/bash-completion/completions/toolmesh",
                 'eval "$(toolmesh completion zsh)"',
                 "toolmesh completion fish > ~/.config/fish/completions/toolmesh.fish"]:
        assert line in done.stdout
