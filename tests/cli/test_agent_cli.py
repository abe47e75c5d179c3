"""The main job as a new user runs it: `toolmesh serve` (offline demo model), the seed's
config commands, then `toolmesh agent` and the gateway's agent routes."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from tests.cli.test_config_cli import script
from tests.processes import ROOT, run_toolmesh
from tests.servers import Served, toolmesh_serve
from toolmesh.tools.services.joke import pick_joke

EXAMPLES = ROOT / "examples" / "joke"

# The tests only ask: one server (and one event loop) for the module.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    async with toolmesh_serve(tmp_path_factory.mktemp("agent-cli")) as s:
        u = ["-u", s.url]
        for item, file in [("tool-service/joke-service", "joke-service.json"),
                           ("tool/tell-joke", "tell-joke.json")]:
            code, _, err = await script("tg-put-config-item", item, *u,
                                        stdin=(EXAMPLES / file).read_text())
            assert code == 0, err
        yield s


JOKE = f"Hey trustgraph! Here's a pun for you:\n\n{pick_joke('food', 'pun')}"


async def test_toolmesh_agent_streams_a_dialog_that_calls_the_joke_tool(served: Served) -> None:
    code, out, err = await run_toolmesh("agent", "Tell me a joke about food", "-u", served.url, "-v")
    assert code == 0, err
    assert out.strip() == JOKE
    assert "[offline demo model]" in err and "🤔" in err and "💡" in err  # -v: thoughts, observations


async def test_toolmesh_agent_without_streaming_and_with_a_user(served: Served) -> None:
    code, out, err = await run_toolmesh("agent", "Tell me a joke about food", "-u", served.url,
                                        "--no-streaming", "--user", "alice")
    assert code == 0, err
    assert out.strip() == JOKE.replace("trustgraph", "alice")
    assert err == ""


async def test_the_offline_demo_model_says_what_it_is(served: Served) -> None:
    code, out, _ = await run_toolmesh("agent", "What is the capital of France?", "-u", served.url)
    assert code == 0
    assert "offline demo model" in out and "--llm" in out


async def test_rest_agent_route_returns_the_final_message_with_answer(served: Served) -> None:
    request = urllib.request.Request(
        served.url + "api/v1/flow/default/service/agent", method="POST",
        data=json.dumps({"question": "Tell me a joke about food", "history": []}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.loads(response.read())
    assert body["message_type"] == "answer" and body["end_of_dialog"] is True
    assert body["answer"] == JOKE and "error" not in body


async def test_websocket_agent_streams_spec_messages(served: Served) -> None:
    async with aiohttp.ClientSession() as session, \
            session.ws_connect(served.url + "api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": ""})
        assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
        await ws.send_json({"id": "a1", "service": "agent", "flow": "default",
                            "request": {"question": "Tell me a joke about food", "streaming": True}})
        frames = []
        while not frames or not frames[-1]["complete"]:
            frames.append(await ws.receive_json(timeout=30))
    messages = [f["response"] for f in frames]
    assert {m["message_type"] for m in messages} == {"thought", "tool-call", "observation",
                                                     "answer"}
    # the action comes before its observation, with the tool and its arguments
    kinds = [m["message_type"] for m in messages]
    call = messages[kinds.index("tool-call")]
    assert kinds.index("tool-call") < kinds.index("observation")
    assert (call["tool"], call["arguments"], call["content"]) == (
        "tell-joke", {"topic": "food"}, 'tell-joke {"topic": "food"}')
    assert all(f["id"] == "a1" for f in frames)
    assert [f["complete"] for f in frames].count(True) == 1
    answer = "".join(m["content"] for m in messages if m["message_type"] == "answer")
    assert answer == JOKE == messages[-1]["answer"]
    assert messages[-1]["end_of_dialog"] is True


async def test_agent_cli_failures_are_one_line(served: Served) -> None:
    code, _, err = await run_toolmesh("agent", "hi", "-u", "http://127.0.0.1:9/")
    assert code == 1 and "cannot reach the gateway" in err and "Traceback" not in err


async def test_serve_with_a_real_openai_compatible_llm(tmp_path: Path) -> None:
    from tests.llm.openai_server import OpenAITestServer

    answers = ['Thought: the tool knows jokes\nAction: tell-joke\nArgs: {"topic": "animals"}',
               "Thought: got it\nFinal Answer: Here you go — a joke about animals."]
    async with OpenAITestServer(answers=answers) as llm, \
            toolmesh_serve(tmp_path, "--llm", llm.base_url, "--model", "test-model",
                           "--tool-calling", "react") as served:
        for item, file in [("tool-service/joke-service", "joke-service.json"),
                           ("tool/tell-joke", "tell-joke.json")]:
            assert (await script("tg-put-config-item", item, "-u", served.url,
                                 stdin=(EXAMPLES / file).read_text()))[0] == 0
        code, out, err = await run_toolmesh("agent", "A joke about animals, please", "-u",
                                            served.url)
        assert code == 0, err
        assert out.strip() == "Here you go — a joke about animals."
        first, second = llm.requests
        assert first.body["model"] == "test-model"
        assert "Tool: tell-joke" in first.prompt and "Question: A joke about animals" in first.prompt
        assert f"Observation: Hey trustgraph! Here's a pun for you:\n\n{pick_joke('animals', 'pun')}" \
            in second.prompt
