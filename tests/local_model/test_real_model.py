"""The agent with a real model: SmolLM2-135M-Instruct on llama-cpp-python's server, in its
default chat format (which ignores ``tools``) and in ``chatml-function-calling``.

``toolmesh serve --llm URL --model smollm2`` with no other flag must find the strategy that
works (``json`` on both), and get working dialogs out of a model this small: joke requests
call ``tell-joke`` with a topic and end with an answer that passes the joke on, plain
questions end with an answer, no reply fails to parse, no dialog takes a minute (issue 31);
questions that need one of several tools call the right one with the question's values, no
placeholder reaches a tool, and every dialog's tokens are counted (issue 41). The other
strategies, forced, still end every dialog within its bounds. Only a real model shows these;
the exact cases run against the scripted model and the OpenAI test server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_agent_cli import run_toolmesh
from tests.local_model.choice_tools import CASES, Case
from tests.local_model.dialogs import DIALOG_SECONDS, JOKES, PLAIN, Dialog, ask
from tests.processes import ROOT
from tests.local_model.server import running
from tests.servers import toolmesh_serve

FORMATS = {"default": None, "chatml-function-calling": "chatml-function-calling"}


@pytest.fixture(scope="module", params=list(FORMATS))
def model(request: pytest.FixtureRequest) -> Iterator[str]:
    """A llama-cpp-python server in one chat format, for the module's tests; its API root."""
    with running(chat_format=FORMATS[request.param]) as url:
        yield url


def report(dialogs: list[tuple[Dialog, str | None]]) -> str:
    return "\n".join(("ok   " if t is None else f"FAIL {t}\n     ") + d.summary()
                     for d, t in dialogs)


async def test_with_no_other_flag_joke_requests_and_questions_end_well(
        model: str, tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, "--llm", model, "--model", "smollm2") as served:
        jokes = [(d := await ask(served.url, q), d.trouble(joke=True)) for q in JOKES]
        plain = [(d := await ask(served.url, q), d.trouble(joke=False)) for q in PLAIN]
        code, _, listing = await run_toolmesh("tools", "-u", served.url)
    everything = report(jokes + plain)
    # the bar: 8 of 8 joke requests, 3 of 3 questions (issues 31 and 41)
    assert all(t is None for _, t in jokes), everything
    assert all(t is None for _, t in plain), everything
    # llama-cpp-python streams no usage: every dialog's tokens were counted (issue 41)
    for dialog, _ in jokes + plain:
        last = dialog.messages[-1]
        assert last.get("in_token") and last.get("out_token"), (last, everything)
        assert last.get("token_source") == "counted", last
    # never a reply that could not be used, never a dialog over a minute
    assert not any(d.unparsed for d, _ in jokes + plain), everything
    assert max(d.seconds for d, _ in jokes + plain) < DIALOG_SECONDS, everything
    # it found json works here, and says so (on stderr, beside the table)
    assert code == 0 and "tool calling: json (detected; native:" in listing, listing
    assert "json: works" in listing


# json, the strategy auto picks here, is held to the bar above; forced, the other two
# must still end every dialog within its bounds (kept tight: a free-running step of this
# model writes until its limit — what the bound is for — and the suite has a model on one
# core only: 96 tokens a step are enough to see a step cut at its bound)
@pytest.mark.parametrize("strategy", ["native", "react"])
async def test_each_strategy_forced_ends_its_dialogs_within_bounds(
        model: str, tmp_path: Path, strategy: str) -> None:
    async with toolmesh_serve(tmp_path, "--llm", model, "--model", "smollm2",
                              "--tool-calling", strategy, "--max-iterations", "2",
                              "--max-step-tokens", "96") as served:
        dialogs = [await ask(served.url, JOKES[0])]
    everything = report([(d, None) for d in dialogs])
    for dialog in dialogs:
        last = dialog.messages[-1]
        # an answer, or the step limit's error — never a hang, a crash or an unbounded step
        assert last.get("message_type") == "answer" or (
            last.get("error") or {}).get("type") == "max-iterations", (last, everything)
        assert dialog.seconds < DIALOG_SECONDS, everything


async def test_among_several_tools_the_right_one_is_called_with_the_questions_values(
        model: str, tmp_path: Path) -> None:
    """Issue 41: three tools of a tool service beside tell-joke, questions of the tests' own
    (tests/local_model/choice_tools.py), no flag but the model's."""
    async with toolmesh_serve(tmp_path, "--llm", model, "--model", "smollm2",
                              "--tool-service", "tests.local_model.choice_tools:Helpers",
                              cwd=ROOT) as served:
        # the first dialog waits for the announcement of the service the process runs
        dialogs = [(case, await ask(served.url, case.question)) for case in CASES]
    lines = "\n".join(f"{'ok  ' if right(c, d) else 'FAIL'} " + d.summary() for c, d in dialogs)
    # measured 6 of 8 in both chat formats (1 of 13 and 5 of 13 before issue 41's work)
    assert sum(right(c, d) for c, d in dialogs) >= 5, lines
    for case, dialog in dialogs:
        assert dialog.answer is not None, lines  # every dialog ends with an answer
        assert dialog.seconds < 30, lines
        assert not dialog.unparsed, lines
        # no placeholder ever reaches a tool: a refused call says so instead of a result
        for call, observation in zip(dialog.calls, dialog.of("observation"), strict=False):
            values = [v for v in (call.get("arguments") or {}).values() if isinstance(v, str)]
            if not observation["content"].startswith("Error: arguments for"):
                assert not any(v.strip() in ("", "...", "…", "string") for v in values), lines


def right(case: Case, dialog: Dialog) -> bool:
    """The dialog's first call is the case's tool with the case's values."""
    first = dialog.calls[0] if dialog.calls else {}
    if first.get("tool") != case.tool:
        return False
    given = first.get("arguments") or {}
    for name, value in case.arguments.items():
        got = given.get(name)
        if isinstance(value, (int, float)):
            if not isinstance(got, (int, float)) or float(got) != float(value):
                return False
        elif not isinstance(got, str) or got.strip().lower() != str(value).lower():
            return False
    return True
