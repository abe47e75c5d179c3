"""Which calls wait for a person, from the MCP annotations of a real MCP server's tools
(tests/mcp/servers.py: ``remove`` says destructiveHint, ``look`` readOnlyHint) and the
``approval`` of its ``mcp`` item; and the policy's order, as a table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agent.stack import agent_stack, answer_of, observations
from tests.agent.test_tool_status import patient
from tests.approvals.test_approval import Dialog, approvals
from tests.conftest import Backend
from tests.mcp.servers import running_server
from toolmesh.approvals import required
from toolmesh.llm import Rule, ScriptedLLM

on_memory = pytest.mark.parametrize("backend", ["memory"], indirect=True)
FINISH = Rule(r"\nObservation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")


def tool(name: str, mcp: str, **extra: Any) -> dict[str, Any]:
    return {"type": "mcp-tool", "name": name, "mcp-tool": mcp, "description": name, **extra}


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
@on_memory
async def test_a_tool_its_server_calls_destructive_asks_and_a_read_only_one_does_not(
        backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(['Thought: look\nAction: look\nArgs: {"path": "a.txt"}',
                       'Thought: remove\nAction: remove\nArgs: {"path": "a.txt"}'],
                      rules=[FINISH])
    async with running_server() as server, \
            agent_stack(backend, tmp_path, llm, joke=False) as s, approvals(s) as client:
        patient(s)
        await s.put({("mcp", "files"): {"url": server.url, "remote-name": "remove"},
                     ("mcp", "eyes"): {"url": server.url, "remote-name": "look"},
                     ("mcp", "stats"): {"url": server.url, "remote-name": "stats"},
                     ("tool", "remove"): tool("remove", "files"),
                     ("tool", "look"): tool("look", "eyes")})
        looked = await s.ask("look at a.txt")  # readOnlyHint: runs at once
        dialog = Dialog(s, "remove a.txt")
        request = await dialog.request()  # destructiveHint: waits
        stats = json.loads(await s.agent.mcp.invoke("stats", {}, timeout=10))
        assert "removed" not in stats
        await client.request({"operation": "approve", "dialog": request["dialog"],
                              "call": request["call"], "digest": request["digest"]},
                             timeout=10)
        removed = await dialog.end()
        stats = json.loads(await s.agent.mcp.invoke("stats", {}, timeout=10))
    assert "approval-request" not in [m["message_type"] for m in looked]
    assert observations(looked) == ["a.txt looks fine"]
    assert request["tool"] == "remove" and request["arguments"] == {"path": "a.txt"}
    assert answer_of(removed) == "removed a.txt"
    assert stats["removed"] == ["a.txt"]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
@on_memory
async def test_the_mcp_items_policy_overrides_the_annotations_and_the_tools_overrides_both(
        backend: Backend, tmp_path: Path) -> None:
    llm = ScriptedLLM(rules=[FINISH], default='Thought: go\nAction: go\nArgs: {"path": "b"}')
    async with running_server() as server, \
            agent_stack(backend, tmp_path, llm, joke=False) as s, approvals(s) as client:
        patient(s)
        # the server says remove is destructive; its item says never ask
        await s.put({("mcp", "files"): {"url": server.url, "remote-name": "remove",
                                        "approval": "never"},
                     ("tool", "go"): tool("go", "files")})
        unasked = await s.ask("go")
        # the server says look is read-only; its item says always ask, the tool says never
        await s.put({("mcp", "files"): {"url": server.url, "remote-name": "look",
                                        "approval": "always"},
                     ("tool", "go"): tool("go", "files", approval="never")})
        still_unasked = await s.ask("go")
        await s.put({("tool", "go"): tool("go", "files")})  # the item's "always" decides
        dialog = Dialog(s, "go")
        request = await dialog.request()
        await client.request({"operation": "deny", "dialog": request["dialog"],
                              "call": request["call"]}, timeout=10)
        await dialog.end()
    assert observations(unasked) == ["removed b"]
    assert observations(still_unasked) == ["b looks fine"]
    assert request["tool"] == "go"


@pytest.mark.parametrize(("sources", "asks"), [
    ({}, False),
    ({"default": "always"}, True),
    ({"annotations": {"destructiveHint": True}}, True),
    ({"annotations": {"readOnlyHint": True}, "default": "always"}, False),
    ({"annotations": {"destructiveHint": False}, "default": "always"}, True),
    ({"server": "never", "annotations": {"destructiveHint": True}}, False),
    ({"server": "always", "annotations": {"readOnlyHint": True}}, True),
    ({"tool": "never", "server": "always"}, False),
    ({"tool": "always", "server": "never", "default": "never"}, True),
])
def test_the_first_source_that_says_decides(sources: dict[str, Any], asks: bool) -> None:
    assert required(**sources) is asks
