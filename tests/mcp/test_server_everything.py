"""toolmesh against an MCP server it did not write: ``@modelcontextprotocol/server-everything``
2026.8.31 from npm (Node, the TypeScript SDK), over streamable HTTP and stdio — through the
whole agent stack (a ScriptedLLM on the memory bus), the mcp-tool service, and the CLI."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.stack import agent_stack, answer_of, observations
from tests.agent.test_tool_status import by_key, patient, status
from tests.conftest import Backend
from tests.mcp import everything
from tests.mcp.everything import EverythingServer
from tests.processes import run_toolmesh
from tests.servers import toolmesh_serve
from toolmesh import RequestError
from toolmesh.agent.loop import AgentOptions
from toolmesh.llm import Rule, ScriptedLLM

# slow (tests/conftest.py): the npm server-everything, on Node
pytestmark = pytest.mark.slow

#: the agent tests run on the memory bus only (the bus is covered elsewhere)
on_memory = pytest.mark.parametrize("backend", ["memory"], indirect=True)
FINISH = Rule(r"\nObservation: (?P<obs>.*?)\n\nYour reply", "Thought: done\nFinal Answer: {obs}")


@pytest.fixture(scope="module")
def server() -> Iterator[EverythingServer]:
    """One server-everything over streamable HTTP for the module (each test has its own
    sessions on it); installed from npm first if need be."""
    problem = everything.missing_node()
    if problem is not None:
        pytest.fail(problem, pytrace=False)  # not a skip: the suite needs them (docs/testing.md)
    with everything.everything_http() as s:
        yield s


def mcp_tool(name: str, mcp: str, description: str) -> dict[str, str]:
    """A ``tool`` item of type mcp-tool with no declared arguments (the server's schema)."""
    return {"type": "mcp-tool", "name": name, "mcp-tool": mcp, "description": description}


def test_the_http_server_listens_on_loopback_only(server: EverythingServer) -> None:
    # without tests/mcp/loopback.cjs this is {"::"} (every interface, IPv4 and IPv6)
    assert everything.listening_addresses(server.port) == {"127.0.0.1"}
    outside = _outside_address()
    if outside is not None:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((outside, server.port), timeout=5).close()


@on_memory
async def test_discovered_arguments_are_shown_and_the_servers_answer_is_the_observation(
        backend: Backend, tmp_path: Path, server: EverythingServer) -> None:
    llm = ScriptedLLM(['Thought: add\nAction: adder\nArgs: {"a": 2, "b": 3.5}'], rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, joke=False) as s:
        patient(s)
        await s.put({("mcp", "sum"): {"url": server.url, "remote-name": "get-sum"},
                     ("tool", "adder"): mcp_tool("adder", "sum", "Add two numbers")})
        messages = await s.ask("2 + 3.5?")
    # get-sum's inputSchema: {a: number, b: number}, both required, with descriptions
    assert ("Tool: adder\nDescription: Add two numbers\nArguments:\n"
            "- a (number, required) — First number\n"
            "- b (number, required) — Second number\n") in llm.prompts[0][1]
    assert observations(messages) == ["The sum of 2 and 3.5 is 5.5."]
    assert answer_of(messages) == "The sum of 2 and 3.5 is 5.5."


@on_memory
async def test_arguments_against_the_schema_are_refused_before_the_call(
        backend: Backend, tmp_path: Path, server: EverythingServer) -> None:
    llm = ScriptedLLM(['Thought: add\nAction: adder\nArgs: {"a": "two", "c": 3}'],
                      rules=[FINISH])
    async with agent_stack(backend, tmp_path, llm, joke=False) as s:
        patient(s)
        await s.put({("mcp", "sum"): {"url": server.url, "remote-name": "get-sum"},
                     ("tool", "adder"): mcp_tool("adder", "sum", "Add two numbers")})
        messages = await s.ask("two plus three?")
    (observation,) = observations(messages)
    # toolmesh's own words, every problem with its path (the server, had it been called,
    # would have answered with zod's "Input validation error" instead)
    assert observation.startswith("Error: invalid arguments for 'adder': $.a: must be number, "
                                  "not string; $.b: required. You passed:"), observation
    assert "Input validation error" not in observation


@on_memory
async def test_progress_of_a_long_running_operation_streams_and_renews_the_deadline(
        backend: Backend, tmp_path: Path, server: EverythingServer) -> None:
    llm = ScriptedLLM(['Thought: wait\nAction: long-op\nArgs: {"duration": 1.2, "steps": 3}'],
                      rules=[FINISH])
    # 3 steps 0.4 s apart take 1.2 s, past the 0.8 s tool timeout that each report renews
    options = AgentOptions(tool_timeout=0.8, tool_max_timeout=20)
    async with agent_stack(backend, tmp_path, llm, options=options, joke=False) as s:
        patient(s)
        await s.put({("mcp", "long"): {"url": server.url,
                                       "remote-name": "trigger-long-running-operation"},
                     ("tool", "long-op"): mcp_tool("long-op", "long", "A slow operation")})
        messages = await s.ask("run it")
    assert observations(messages) == [
        "Long running operation completed. Duration: 1.2 seconds, Steps: 3."]
    kinds = [m["message_type"] for m in messages]
    first, observation = kinds.index("progress"), kinds.index("observation")
    assert kinds[first:observation] == ["progress"] * 3
    progress = [m for m in messages if m["message_type"] == "progress"]
    # server-everything reports no message, only progress/total
    assert [m["content"] for m in progress] == [f"long-op: {n}/3" for n in (1, 2, 3)]
    assert [m["progress"] for m in progress] == [
        {"tool": "long-op", "progress": n, "total": 3, "message": None} for n in (1, 2, 3)]


@on_memory
async def test_sampling_is_answered_by_the_deployments_llm_only_when_allowed(
        backend: Backend, tmp_path: Path, server: EverythingServer) -> None:
    sample = Rule(r"^Resource trigger-sampling-request context: Name a cat$", "Whiskers")
    action = 'Thought: ask\nAction: ask-llm\nArgs: {"prompt": "Name a cat", "maxTokens": 20}'
    llm = ScriptedLLM([action], rules=[FINISH, sample])
    async with agent_stack(backend, tmp_path, llm, joke=False) as s:
        patient(s)
        await s.put({("mcp", "sampler"): {"url": server.url, "sampling": True,
                                          "remote-name": "trigger-sampling-request"},
                     ("mcp", "no-sampler"): {"url": server.url,
                                             "remote-name": "trigger-sampling-request"},
                     ("tool", "ask-llm"): mcp_tool("ask-llm", "sampler", "Ask an LLM"),
                     ("tool", "no-llm"): mcp_tool("no-llm", "no-sampler", "Ask no LLM")})
        tools = by_key(await status(s))
        messages = await s.ask("name a cat")
    # the server registers the tool only for a client that declares sampling in the
    # handshake; toolmesh declares it only for items with "sampling": true
    assert tools["ask-llm"]["status"] == "available"
    assert tools["no-llm"]["status"] == "not-offered"
    assert "has no tool 'trigger-sampling-request'" in tools["no-llm"]["reason"]
    assert "Tool: ask-llm\n" in llm.prompts[0][1] and "Tool: no-llm\n" not in llm.prompts[0][1]
    # the server's request reached the ScriptedLLM: its system prompt and its one message
    assert ("You are a helpful test server.",
            "Resource trigger-sampling-request context: Name a cat") in llm.prompts
    (observation,) = observations(messages)
    prefix = "LLM sampling result: \n"
    assert observation.startswith(prefix), observation
    assert json.loads(observation[len(prefix):]) == {
        "model": "scripted", "role": "assistant", "stopReason": "endTurn",
        "content": {"type": "text", "text": "Whiskers"}}


@on_memory
async def test_a_tool_that_needs_task_augmentation_is_not_offered(
        backend: Backend, tmp_path: Path, server: EverythingServer) -> None:
    llm = ScriptedLLM(default="Thought: t\nFinal Answer: ok")
    async with agent_stack(backend, tmp_path, llm, joke=False) as s:
        patient(s)
        await s.put({("mcp", "research"): {"url": server.url,
                                           "remote-name": "simulate-research-query"},
                     ("mcp", "sum"): {"url": server.url, "remote-name": "get-sum"},
                     ("tool", "research"): mcp_tool("research", "research", "Research a topic"),
                     ("tool", "adder"): mcp_tool("adder", "sum", "Add two numbers")})
        tools = by_key(await status(s))
        await s.ask("which tools?")
        # called anyway (through the mcp-tool service), it is refused before it reaches the
        # server, which would answer with an isError result ("requires task augmentation")
        with pytest.raises(RequestError) as raised:
            await s.agent.mcp.invoke("research", {"topic": "cats"}, timeout=10)
    assert tools["adder"]["status"] == "available"
    assert tools["research"]["status"] == "not-offered", tools["research"]
    assert "task augmentation" in tools["research"]["reason"]
    prompt = llm.prompts[-1][1]
    assert "Tool: adder\n" in prompt and "Tool: research\n" not in prompt
    assert raised.value.type == "mcp-error"
    assert "task augmentation" in raised.value.message


async def test_the_cli_sets_and_invokes_its_tools_over_http_and_stdio(
        tmp_path: Path, server: EverythingServer) -> None:
    stdio = everything.stdio_item()
    async with toolmesh_serve(tmp_path, "--mcp-stdio-allow", stdio["command"]) as served:
        u = ["-u", served.url]
        # two at a time: each command is a process that spends most of its time starting
        sets = await asyncio.gather(
            run_toolmesh("mcp", "set", "echo", "--url", server.url, *u),
            run_toolmesh("mcp", "set", "long", "-r", "trigger-long-running-operation",
                         "--transport", "stdio", "--command", stdio["command"],
                         *(f"--arg={a}" for a in stdio["args"]), *u))
        assert [code for code, _, _ in sets] == [0, 0], sets
        echo, long = await asyncio.gather(
            run_toolmesh("mcp", "invoke", "echo", "-P", '{"message": "hello, everything"}', *u),
            # over stdio (a node child of the mcp-tool service), its progress on stderr
            run_toolmesh("mcp", "invoke", "long", "--param", "duration:=0.2",
                         "--param", "steps:=2", *u))
    assert echo[:2] == (0, "Echo: hello, everything\n"), echo
    done = "Long running operation completed. Duration: 0.2 seconds, Steps: 2.\n"
    assert long[:2] == (0, done), long
    assert [line for line in long[2].splitlines() if line.startswith("progress:")] == [
        "progress: 1/2", "progress: 2/2"], long


def _outside_address() -> str | None:
    """This machine's address on its default route (no packet is sent), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") else address
