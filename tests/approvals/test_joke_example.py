"""The copy-paste example of docs/approvals.md, on the joke service every `toolmesh serve`
runs: `examples/joke/tell-joke-approved.json` (tell-joke with ``"approval": "always"``) put
as `tool/tell-joke` makes each joke wait for a person — asked by `toolmesh agent`, answered
with `toolmesh approvals approve CALL` or on the WebSocket, and by an MCP client's person
through /mcp; putting `examples/joke/tell-joke.json` back ends it. The commands are the
docs' own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_approvals_cli import listed, waiting
from tests.dialogs.test_embedded_restart import _offered
from tests.gateway.test_approvals_route import socket
from tests.processes import ROOT, run_toolmesh
from tests.servers import toolmesh_serve

APPROVED = ROOT / "examples" / "joke" / "tell-joke-approved.json"
PLAIN = ROOT / "examples" / "joke" / "tell-joke.json"
JOKE = "Tell me a joke about food"
#: how the joke service's answers begin
JOKED = "Hey trustgraph! "


def test_the_example_is_tell_joke_with_approval_always_and_the_docs_use_it() -> None:
    approved, plain = json.loads(APPROVED.read_text()), json.loads(PLAIN.read_text())
    assert approved.pop("approval") == "always"
    assert approved == plain
    docs = (ROOT / "docs" / "approvals.md").read_text()
    assert "toolmesh config put tool/tell-joke examples/joke/tell-joke-approved.json" in docs
    assert "mailer" not in docs  # the example needs no service that is not shipped


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_the_example_asks_on_every_face(tmp_path: Path) -> None:
    from tests.mcp_endpoint.test_mcp_approval import Person, session, yes

    async with toolmesh_serve(tmp_path) as served:
        u = ("-u", served.url)
        put = await run_toolmesh("config", "put", "tool/tell-joke",
                                 "examples/joke/tell-joke-approved.json", *u, cwd=ROOT)
        assert put[0] == 0, put[2]
        await _offered(served.url, "tell-joke")
        # the CLI, at the prompt
        yes_at_prompt = await run_toolmesh("agent", JOKE, *u, stdin_text="y\n")
        no_at_prompt = await run_toolmesh("agent", JOKE, *u, stdin_text="n\nno jokes today\n")
        # from another terminal, with the call's key
        async with waiting(served, JOKE) as agent:
            [request] = await listed(served)
            approved = await run_toolmesh("approvals", "approve", request["call"], *u)
            elsewhere = await agent.end()
        # the WebSocket
        async with socket(served, "") as s:
            await s.ask(JOKE)
            asked = await s.request()
            answered = await s.answer("a1", {"operation": "approve", "call": asked["call"],
                                             "digest": asked["digest"]})
            last = await s.end()
        # an MCP client's person, through /mcp
        person = Person(yes())
        async with session(served.url + "mcp", person) as client:
            by_mcp = await client.call_tool("tell-joke", {"topic": "food"})
        # put back: no one is asked
        back = await run_toolmesh("config", "put", "tool/tell-joke",
                                  "examples/joke/tell-joke.json", *u, cwd=ROOT)
        plain = await run_toolmesh("agent", JOKE, *u, stdin_text="")
    assert yes_at_prompt[0] == 0 and yes_at_prompt[1].startswith(JOKED), yes_at_prompt
    assert '✋ tell-joke {"topic": "food"}  waits for your approval' in yes_at_prompt[2]
    assert "the user denied this call of 'tell-joke'" in no_at_prompt[1] \
        and "no jokes today" in no_at_prompt[1], no_at_prompt
    assert approved[0] == 0, approved[2]
    assert elsewhere[0] == 0 and elsewhere[1].startswith(JOKED), elsewhere
    assert asked["tool"] == "tell-joke" and asked["arguments"] == {"topic": "food"}
    assert answered["response"]["answer"]["decision"] == "approve"
    assert str(last.get("answer", "")).startswith(JOKED), last
    assert len(person.asked) == 1 and not by_mcp.is_error, by_mcp
    assert by_mcp.content[0].text.startswith(JOKED)
    assert back[0] == 0 and plain[0] == 0 and "waits for your approval" not in plain[2]
    assert plain[1].startswith(JOKED), plain
