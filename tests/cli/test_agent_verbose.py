"""`toolmesh agent -v` as a user reads it: every step's thought, the tool it called with
which arguments, and what came back (a result or an error) — against a real `toolmesh serve`
whose LLM is scripted, streaming and not."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import pytest_asyncio

from tests.processes import ROOT, run_toolmesh
from tests.servers import Served, toolmesh_serve
from toolmesh.tools.services.joke import pick_joke

ACT = 'Thought: I look for a joke\nAction: tell-joke\nArgs: {"topic": "food"}'
WRONG_TOOL = 'Thought: and now a story\nAction: tell-a-story\nArgs: {"about": "a fox"}'
DONE = "Thought: I have both\nFinal Answer: Here is your joke."
DIALOG = [ACT, WRONG_TOOL, DONE]

JOKE = f"Hey trustgraph! Here's a pun for you:\n\n{pick_joke('food', 'pun')}"
#: what -v writes to stderr for DIALOG, line by line
STEPS = (
    "🤔 I look for a joke\n"
    '🔧 tell-joke {"topic": "food"}\n'
    f"💡 {JOKE}\n"
    "🤔 and now a story\n"
    '🔧 tell-a-story {"about": "a fox"}\n'
    "❌ there is no tool 'tell-a-story'. Available tools: 'tell-joke'.\n"
    "🤔 I have both\n"
)


@asynccontextmanager
async def dialog_server(data_dir: Path, *, dialogs: int) -> AsyncIterator[Served]:
    """`toolmesh serve` with the joke tool, and an LLM that plays DIALOG ``dialogs`` times."""
    script = data_dir / "llm.json"
    script.write_text(json.dumps({"responses": DIALOG * dialogs}))
    async with toolmesh_serve(data_dir, "--llm", f"scripted:{script}") as s:
        for item, file in [("tool-service/joke-service", "joke-service.json"),
                           ("tool/tell-joke", "tell-joke.json")]:
            code, _, err = await run_toolmesh("config", "put", item,
                                              str(ROOT / "examples" / "joke" / file), "-u", s.url)
            assert code == 0, err
        yield s


# One server (and one event loop) for the module: its scripted LLM plays DIALOG once for each
# of the module's three dialogs, in whichever order they come.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    async with dialog_server(tmp_path_factory.mktemp("verbose"), dialogs=3) as s:
        yield s


@pytest.mark.parametrize("mode", [[], ["--no-streaming"]], ids=["streaming", "whole-messages"])
async def test_verbose_shows_each_action_before_its_observation(served: Served,
                                                                mode: list[str]) -> None:
    code, out, err = await run_toolmesh("agent", "A food joke, then a story", "-v", *mode,
                                        "-u", served.url)
    assert code == 0, err
    assert out == "Here is your joke.\n"
    assert err == STEPS


async def test_without_verbose_only_the_answer_shows(served: Served) -> None:
    code, out, err = await run_toolmesh("agent", "A food joke, then a story", "-u", served.url)
    assert (code, out, err) == (0, "Here is your joke.\n", "")
