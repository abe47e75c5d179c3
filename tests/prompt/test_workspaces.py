"""The prompt service serves each request from its workspace's prompts, on every bus backend.

Two workspaces hold templates with the same ids and different texts; nothing of one reaches
the other's answers, errors or INFO logs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Backend
from tests.prompt.harness import TIMEOUT, Stack, prompt_stack
from toolmesh import RequestError


def tg_template(prompt: str, **extra: Any) -> str:
    """A value as the real tg-set-prompt writes it."""
    return json.dumps({"id": "x", "prompt": prompt, "response-type": "text", **extra})


async def put(stack: Stack, workspace: str, values: dict[str, str]) -> None:
    version = await stack.config.put({("prompt", k): v for k, v in values.items()},
                                     workspace=workspace)
    async with asyncio.timeout(TIMEOUT):
        await stack.service.wait_for_config(version, workspace=workspace)


async def ask(stack: Stack, workspace: str | None, id: str, **variables: Any) -> str:
    return await stack.client.render_and_complete(id, variables, timeout=TIMEOUT,
                                                  workspace=workspace)


async def test_two_workspaces_with_the_same_ids_never_see_each_other(
        stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    await put(stack, "ws1", {"system": json.dumps("System one."),
                             "template.summarise": tg_template("ONE {{ text }}"),
                             "template.only-one": tg_template("secret one")})
    await put(stack, "ws2", {"template.summarise": tg_template("TWO {{ text }}"),
                             "question": json.dumps({"prompt": "Q2: {{ question }}"})})
    assert await ask(stack, "ws1", "summarise", text="a") == "ONE a"
    assert stack.llm.requests[-1]["system"] == "System one."
    assert await ask(stack, "ws2", "summarise", text="a") == "TWO a"
    assert stack.llm.requests[-1]["system"] == ""  # ws1's system prompt stays in ws1
    assert await ask(stack, "ws2", "question", question="b") == "Q2: b"
    assert await ask(stack, "ws1", "question", question="b") == "b"  # shipped in ws1
    # no workspace named: the service's own (default), which has neither
    assert await ask(stack, None, "question", question="c") == "c"
    with pytest.raises(RequestError) as e:
        await ask(stack, None, "summarise", text="a")
    assert e.value.message == ("unknown prompt template 'summarise' in workspace 'default'; "
                               "known templates: agent-json, agent-native, agent-react, question")

    # an id of ws1 asked for in ws2: not found, and the answer names ws2's ids only
    with pytest.raises(RequestError) as e:
        await ask(stack, "ws2", "only-one")
    assert e.value.type == "prompt-error"
    assert e.value.message == ("unknown prompt template 'only-one' in workspace 'ws2'; "
                               "known templates: agent-json, agent-native, agent-react, "
                               "question, summarise")

    caplog.clear()
    with caplog.at_level(logging.INFO, "toolmesh"):
        await put(stack, "ws2", {"template.only-two": tg_template("two only")})
        with pytest.raises(RequestError, match="known templates: agent-json, agent-native, "
                                               "agent-react, only-two, question, summarise$"):
            await ask(stack, "ws2", "missing")
        assert await ask(stack, "ws2", "only-two") == "two only"
        assert await ask(stack, "ws2", "summarise", text="z") == "TWO z"
    assert "prompt templates of workspace 'ws2': agent-json, agent-native, agent-react, " \
        "only-two, question, summarise" \
        in caplog.text
    for record in caplog.records:  # what ws2's requests log names nothing of ws1
        text = record.getMessage()
        assert not any(marker in text for marker in ("ws1", "only-one", "ONE", "System one")), \
            text


async def test_changes_apply_per_workspace_and_a_deletion_reverts_to_the_shipped_one(
        stack: Stack) -> None:
    for ws in ("ws1", "ws2"):
        await put(stack, ws, {"template.question": tg_template(ws + ": {{ question }}")})
    await put(stack, "ws1", {"template.question": tg_template("new: {{ question }}"),
                             "system": json.dumps("Terse.")})
    assert await ask(stack, "ws1", "question", question="q") == "new: q"
    assert await ask(stack, "ws2", "question", question="q") == "ws2: q"
    assert stack.llm.requests[-1]["system"] == ""
    assert stack.service.templates_of("ws1")["question"].system == "Terse."
    version = await stack.config.delete([("prompt", "template.question")], workspace="ws1")
    async with asyncio.timeout(TIMEOUT):
        await stack.service.wait_for_config(version, workspace="ws1")
    assert await ask(stack, "ws1", "question", question="q") == "q"
    assert stack.llm.requests[-1]["system"] == "Terse."  # its system prompt stays
    assert await ask(stack, "ws2", "question", question="q") == "ws2: q"


async def test_a_workspace_is_read_at_the_first_request_naming_it(stack: Stack) -> None:
    # put, then ask at once, without waiting for the service to apply it
    await stack.config.put({("prompt", "template.fresh"): tg_template("fresh {{ x }}")},
                           workspace="new-ws")
    assert await ask(stack, "new-ws", "fresh", x=1) == "fresh 1"
    # a workspace nobody wrote to is served the shipped templates
    assert await ask(stack, "empty-ws", "question", question="q") == "q"


async def test_trustgraphs_wire_variables_and_a_bad_workspace(stack: Stack) -> None:
    await put(stack, "ws1", {"template.list": tg_template("{{ items | join(', ') }} {{ n }}")})
    # TrustGraph's clients send the values themselves as "variables"
    r = await stack.raw.request({"id": "list", "workspace": "ws1", "streaming": False,
                                 "variables": {"items": ["a", "b"], "n": "3"}}, timeout=TIMEOUT)
    assert (r["error"], r["text"]) == (None, "a, b 3")
    r = await stack.raw.request({"id": "list", "workspace": "ws1", "variables": ["items"]},
                                timeout=TIMEOUT)
    assert r["error"] == {"type": "prompt-error", "message":
                          "'variables' must be an object of template variables, not list"}
    r = await stack.raw.request({"id": "question", "workspace": 7,
                                 "terms": {"question": '"q"'}}, timeout=TIMEOUT)
    assert r["error"] == {"type": "bad-request", "message": "'workspace' must be a string, not int"}
    assert set(r) == {"error", "text", "object", "end_of_stream", "in_token", "out_token", "model"}
    # a name the config store refuses is the request's error, not the shipped templates
    r = await stack.raw.request({"id": "question", "workspace": "bad\x00name",
                                 "terms": {"question": '"q"'}}, timeout=TIMEOUT)
    assert r["error"]["type"] == "config-error"
    assert "workspace must not contain NUL characters" in r["error"]["message"]
    assert [r["prompt"] for r in stack.llm.requests] == ["a, b 3"]  # the one answered above


@pytest.fixture
async def deaf(backend: Backend, tmp_path: Path) -> AsyncIterator[Stack]:
    """A prompt service that never hears config pushes: it can only read the config at a
    workspace's first use, and when asked for an id it lacks."""
    async with prompt_stack(backend, tmp_path, hears_pushes=False) as s:
        yield s


async def test_an_id_put_a_moment_ago_is_found_before_its_push_arrives(deaf: Stack) -> None:
    await deaf.config.put({("prompt", "template.a"): tg_template("A")}, workspace="ws1")
    assert await ask(deaf, "ws1", "a") == "A"  # ws1's first use: read then
    await deaf.config.put({("prompt", "template.b"): tg_template("B")}, workspace="ws1")
    assert await ask(deaf, "ws1", "b") == "B"  # unknown to the service: read once more
    with pytest.raises(RequestError, match="'c' in workspace 'ws1'; known templates: a, "
                                           "agent-json, agent-native, agent-react, b, question"):
        await ask(deaf, "ws1", "c")
