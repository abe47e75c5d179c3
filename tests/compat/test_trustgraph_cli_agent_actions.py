"""The real `tg-invoke-agent` against a dialog that calls tools: toolmesh's ``tool-call``
messages (the action, sent before its observation; :mod:`toolmesh.agent.action`) must leave
TrustGraph's client printing exactly what it printed before they existed.

The expected outputs were recorded from toolmesh without ``tool-call`` messages. TrustGraph's
client turns a message type it does not know into an empty chunk that prints nothing (its
``action`` type it would print as a thought, which is why toolmesh does not use that name).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cli.test_agent_verbose import dialog_server
from tests.compat.test_trustgraph_cli_agent import invoke
from tests.servers import Served

QUESTION = "A food joke, then a story"
JOKE = "Why did the tomato blush? It saw the salad dressing."

STREAMING_VERBOSE = (
    f"❓ {QUESTION}\n\n"
    "🤔  I look for a joke\n\n"
    "💡  Hey trustgraph! Here's a pun for you:\n💡  \n"
    f"💡  {JOKE}\n\n"
    "🤔  and now a story\n\n"
    "💡  Error: there is no tool 'tell-a-story'. Available tools: 'tell-joke'.\n\n"
    "🤔  I have both\n\n"
    "Here is your joke.\n")
WHOLE_MESSAGES_VERBOSE = (
    f"❓ {QUESTION}\n\n"
    "🤔 I look for a joke\n\n"
    "💡 Hey trustgraph! Here's a pun for you:  Why did the tomato blush? It saw the\n"
    "💡 salad dressing.\n\n"
    "🤔 and now a story\n\n"
    "💡 Error: there is no tool 'tell-a-story'. Available tools: 'tell-joke'.\n\n"
    "🤔 I have both\n\n"
    "Here is your joke.\n")


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """`toolmesh serve` whose scripted LLM plays test_agent_verbose's dialog."""
    async with dialog_server(tmp_path, dialogs=1) as s:
        yield s


@pytest.mark.parametrize(("flags", "expected"), [
    ([], "Here is your joke.\n"),
    (["-v"], STREAMING_VERBOSE),
    (["--no-streaming"], "Here is your joke.\n"),
    (["-v", "--no-streaming"], WHOLE_MESSAGES_VERBOSE),
], ids=["streaming", "streaming-verbose", "whole", "whole-verbose"])
async def test_tg_invoke_agent_prints_what_it_did_before_tool_calls_were_sent(
        tg_bin: Path, served: Served, flags: list[str], expected: str) -> None:
    out = await invoke(tg_bin, "-u", served.url, "-q", QUESTION, *flags)
    assert out == expected
