"""``toolmesh tool-service register``: a class's definition becomes config items, in one put."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.examples.loading import EXAMPLES
from tests.processes import console_script, env
from tests.servers import Served, serving

NO_DEFINITION = '''
from toolmesh.tools import DynamicToolService

class Bare(DynamicToolService):
    async def invoke(self, user, config, arguments):
        return "hi"
'''

BAD_DEFINITION = '''
from toolmesh.tools import Argument, DynamicToolService, Tool, ToolServiceDefinition

class Wrong(DynamicToolService):
    definition = ToolServiceDefinition(id="wrong", tools=[
        Tool("w", "Wrong", arguments=[Argument("n", "int", "a number")])])
'''


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("register")) as srv:
        yield srv


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A user's folder holding their tool services, not on the Python path."""
    (tmp_path / "wordtools.py").write_text((EXAMPLES / "wordcount" / "wordtools.py").read_text())
    (tmp_path / "bare.py").write_text(NO_DEFINITION)
    (tmp_path / "wrong.py").write_text(BAD_DEFINITION)
    return tmp_path


def toolmesh(served: Served, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([console_script(), *args, "--url", served.url], env=env(), cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def stored(served: Served, item: str, workspace: str = "default") -> object:
    got = toolmesh(served, "config", "get", item, "-w", workspace)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def test_registering_the_joke_service_writes_the_seeds_items(served: Served) -> None:
    done = toolmesh(served, "tool-service", "register", "joke")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("registered tool-service/joke-service, tool/tell-joke in "
                                  "workspace 'default' (version ")
    assert stored(served, "tool-service/joke-service") == \
        json.loads((EXAMPLES / "joke" / "joke-service.json").read_text())
    assert stored(served, "tool/tell-joke") == \
        json.loads((EXAMPLES / "joke" / "tell-joke.json").read_text())


def test_a_class_in_the_current_folder_is_registered_and_offered(served: Served,
                                                                 folder: Path) -> None:
    done = toolmesh(served, "tool-service", "register", "wordtools:WordCount", "-w", "words",
                    cwd=folder)
    assert done.returncode == 0, done.stderr
    assert stored(served, "tool/count-words", "words") == \
        json.loads((EXAMPLES / "wordcount" / "count-words.json").read_text())
    tools = toolmesh(served, "tools", "--json", "-w", "words")
    assert tools.returncode == 0, tools.stderr
    status = {t["key"]: t["status"] for t in json.loads(tools.stdout)["tools"]}
    assert status == {"count-words": "available"}


def test_overrides_name_another_service_and_queues(served: Served, folder: Path) -> None:
    done = toolmesh(served, "tool-service", "register", "wordtools:WordCount", "--id", "wc2",
                    "--topic", "wc2", "-w", "over", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert stored(served, "tool-service/wc2", "over")["request-queue"] == \
        "non-persistent://tg/request/wc2"
    assert stored(served, "tool/count-words", "over")["service"] == "wc2"


def test_a_dry_run_prints_the_items_and_writes_nothing(served: Served, folder: Path) -> None:
    done = toolmesh(served, "tool-service", "register", "wordtools:WordCount", "--dry-run",
                    "-w", "dry", cwd=folder)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert sorted(printed) == ["tool-service/word-count", "tool/count-words"]
    assert printed["tool/count-words"]["arguments"][0]["required"] is True
    missing = toolmesh(served, "config", "get", "tool/count-words", "-w", "dry")
    assert missing.returncode == 1


@pytest.mark.parametrize(("spec", "words"), [
    ("bare:Bare", "bare:Bare declares no definition: give the class a `definition = "
                  "ToolServiceDefinition(...)`"),
    ("wrong:Wrong", "the definition of wrong:Wrong is invalid: invalid field "
                    "'arguments[0].type' of tool/w"),
    ("wordtools:Nope", "Nope"),
    ("nothere:X", "nothere"),
])
def test_what_cannot_be_registered_is_one_line_and_exit_1(served: Served, folder: Path,
                                                          spec: str, words: str) -> None:
    done = toolmesh(served, "tool-service", "register", spec, cwd=folder)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("toolmesh: error: ") and words in done.stderr


def test_both_explicit_queues_or_neither(served: Served, folder: Path) -> None:
    done = toolmesh(served, "tool-service", "register", "joke", "--request-queue",
                    "request:tg:x")
    assert done.returncode == 1
    assert "give both --request-queue and --response-queue, or neither" in done.stderr
