"""`toolmesh agent` and issue 41 as a user meets it, against a real `toolmesh serve`: `-v`
shows which tools a step was shown and why, and an answer the model's limit cut short is
marked at its end and exits 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.llm.openai_server import Answer, OpenAITestServer
from tests.processes import ROOT, run_toolmesh
from tests.servers import toolmesh_serve

#: tools the question gives no sign of (all backed by the joke service)
OTHERS = {"get-weather": "Look up the current weather in a city",
          "convert-currency": "Convert an amount of money to another currency",
          "count-words": "Count the words of a text"}


async def put_tools(url: str) -> None:
    """tell-joke and its service, and the :data:`OTHERS` (backed by the same service)."""
    for item, file in [("tool-service/joke-service", "joke-service.json"),
                       ("tool/tell-joke", "tell-joke.json")]:
        code, _, err = await run_toolmesh("config", "put", item,
                                          str(ROOT / "examples" / "joke" / file), "-u", url)
        assert code == 0, err
    for name, description in OTHERS.items():
        item = json.loads((ROOT / "examples" / "joke" / "tell-joke.json").read_text())
        item.update(name=name, description=description, arguments=[])
        code, _, err = await run_toolmesh("config", "put", f"tool/{name}", "-", "-u", url,
                                          stdin_text=json.dumps(item))
        assert code == 0, err


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_verbose_shows_the_tools_a_step_was_shown_and_why(tmp_path: Path) -> None:
    script = tmp_path / "llm.json"
    script.write_text(json.dumps({"responses": [
        'Thought: a joke\nAction: tell-joke\nArgs: {"topic": "food"}',
        "Thought: done\nFinal Answer: Here it is."]}))
    async with toolmesh_serve(tmp_path, "--llm", f"scripted:{script}") as served:
        await put_tools(served.url)
        code, out, err = await run_toolmesh("agent", "Tell me a joke about food", "-v",
                                            "-u", served.url)
    assert code == 0, err
    assert out.strip() == "Here it is."
    assert "🧰 1 of 4 tools (bm25): tell-joke (matched: joke, food)\n" in err
    assert err.index("🧰") < err.index("🔧 tell-joke")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_a_cut_answer_is_marked_and_exits_3(tmp_path: Path) -> None:
    long = " ".join(f"w{i}" for i in range(400))
    async with OpenAITestServer(default=Answer(text=f"Thought: ok\nFinal Answer: {long}")) \
            as llm, toolmesh_serve(tmp_path, "--llm", llm.base_url, "--model", "m",
                                   "--tool-calling", "react", "--max-answer-tokens", "40") \
            as served:
        code, out, err = await run_toolmesh("agent", "Write at length", "-u", served.url)
        whole_code, _, _ = await run_toolmesh("agent", "Write at length", "--no-streaming",
                                              "-u", served.url)
    assert code == 3 and whole_code == 3, err
    assert out.rstrip().endswith("[The answer was cut short here: the model reached its limit "
                                 "of 40 tokens (--max-answer-tokens).]")
    assert out.startswith("w0 w1 w2") and "w399" not in out
    assert "the answer was cut short by the model's limit (exit status 3)" in err


def test_the_flags_defaults_are_the_agents() -> None:
    """cli/choice_options.py names the agent's defaults without importing it."""
    from toolmesh.agent import selection
    from toolmesh.cli import choice_options

    assert choice_options.SELECTION_METHODS == selection.METHODS
    assert choice_options.DEFAULT_BUDGET == selection.DEFAULT_BUDGET
    assert choice_options.DEFAULT_RELEVANCE == selection.DEFAULT_RELEVANCE


@pytest.mark.parametrize("env,value,flag,message", [
    ("TOOLMESH_TOOL_BUDGET", "lots", "--tool-budget",
     "'lots' is not a whole number of 0 or more (the flag, or TOOLMESH_TOOL_BUDGET)"),
    ("TOOLMESH_TOOL_RELEVANCE", "-1", "--tool-relevance", "'-1' is not a number of 0 or more"),
    ("TOOLMESH_TOOL_SELECTION", "vectors", "--tool-selection",
     "'vectors' is not one of bm25, embeddings, off (the flag, or TOOLMESH_TOOL_SELECTION)"),
    ("TOOLMESH_CHOICE_STEPS", "3", "--choice-steps", "'3' is not one of 1, 2"),
])
async def test_a_bad_value_in_the_environment_is_an_error_that_names_it(
        env: str, value: str, flag: str, message: str) -> None:
    """Not a traceback, and not quietly the default: the flag and the variable are named.
    Other commands, which never read the value, are not held up by it."""
    code, _, err = await run_toolmesh("serve", "--port", "0", extra_env={env: value})
    assert code == 2 and f"argument {flag}: {message}" in err, err
    assert "Traceback" not in err
    code, _, err = await run_toolmesh("config", "list", "tool", "-u", "http://127.0.0.1:9/",
                                      extra_env={env: value})
    assert "cannot reach the gateway" in err, err


def word_vector(text: str) -> list[float]:
    """Embeddings as a tiny model would give them: weather words along one axis, money words
    along another (a text's vector is the sum of its words')."""
    axes = {"raining": (1.0, 0.0), "weather": (1.0, 0.0), "money": (0.0, 1.0),
            "currency": (0.0, 1.0)}
    x = y = 0.0
    for word in text.lower().replace("?", " ").replace("-", " ").split():
        dx, dy = axes.get(word, (0.0, 0.0))
        x, y = x + dx, y + dy
    return [x, y, 0.01]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_embeddings_from_the_llms_server_rank_what_no_word_matches(
        tmp_path: Path) -> None:
    """``--tool-selection embeddings``: the question shares no word with any tool (BM25 has
    no evidence), the server's ``/v1/embeddings`` ranks the weather tool first."""
    async with OpenAITestServer(default=Answer(text="Thought: ok\nFinal Answer: Wet."),
                                embed=word_vector) as llm, \
            toolmesh_serve(tmp_path, "--llm", llm.base_url, "--model", "m",
                           "--tool-calling", "react", "--tool-selection", "embeddings",
                           "--tool-budget", "1") as served:
        await put_tools(served.url)
        code, out, err = await run_toolmesh("agent", "Is it raining in Lima?", "-v",
                                            "-u", served.url)
        asked = [r.body["input"] for r in llm.requests if r.path == "/v1/embeddings"]
    assert code == 0, err
    assert out.strip() == "Wet."
    assert "🧰 1 of 4 tools (bm25+embeddings): get-weather (ranked within the budget)" in err
    # the question and every tool's text, in one request
    assert len(asked) == 1 and asked[0][0] == "Is it raining in Lima?" and len(asked[0]) == 5
