"""MCP sampling: a real server process asks the client for ``sampling/createMessage``; the
mcp-tool service answers with the deployment's LLM through a real text-completion service
(a ScriptedLLM) — only when the server's ``mcp`` item says ``"sampling": true``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.callback_servers import running_http_server, stdio_item
from tests.mcp.callback_stack import callback_stack
from toolmesh import RequestError
from toolmesh.config.errors import ConfigError
from toolmesh.config.validation import validate
from toolmesh.llm import Rule, ScriptedLLM
from toolmesh.mcp import McpServer

SUMMARY = Rule(r"(?s)^Cats sleep", "Cats sleep a lot.<END> and more")


async def test_a_server_allowed_to_sample_is_answered_by_the_deployments_llm(tmp_path: Path) -> None:
    llm = ScriptedLLM(rules=[SUMMARY])
    async with callback_stack(tmp_path, llm) as s, running_http_server() as http:
        await s.put({"summary": stdio_item(**{"remote-name": "summarize", "sampling": True}),
                     "summary-http": {"url": http.url, "remote-name": "summarize",
                                      "sampling": True}})
        for name in ("summary", "summary-http"):
            text = await s.client.invoke(name, {"text": "Cats sleep sixteen hours a day."},
                                         timeout=30)
            # the LLM's answer, cut at the server's stop sequence, under the LLM's model name
            assert text == "'Cats sleep a lot.' from scripted (stopSequence)"
    # the LLM saw the server's system prompt and its one message as the prompt
    assert llm.prompts == [("You summarize in five words.", "Cats sleep sixteen hours a day.")] * 2


async def test_without_sampling_true_the_server_gets_the_sdks_refusal(tmp_path: Path) -> None:
    llm = ScriptedLLM(rules=[SUMMARY])
    async with callback_stack(tmp_path, llm) as s:
        await s.put({"summary": stdio_item(**{"remote-name": "summarize"})})
        with pytest.raises(RequestError) as raised:
            await s.client.invoke("summary", {"text": "Cats sleep sixteen hours a day."},
                                  timeout=30)
        assert raised.value.type == "tool-error"
        assert "sampling failed: Sampling not supported" in raised.value.message
        # allowed later (a new session: the capability is declared in the handshake)
        await s.put({"summary": stdio_item(**{"remote-name": "summarize", "sampling": True})})
        assert "'Cats sleep a lot.'" in await s.client.invoke(
            "summary", {"text": "Cats sleep sixteen hours a day."}, timeout=30)
    assert len(llm.prompts) == 1  # the refused call never reached the LLM


async def test_an_llm_failure_reaches_the_server_as_an_error(tmp_path: Path) -> None:
    async with callback_stack(tmp_path, ScriptedLLM()) as s:  # no answer for any prompt
        await s.put({"summary": stdio_item(**{"remote-name": "summarize", "sampling": True})})
        with pytest.raises(RequestError) as raised:
            await s.client.invoke("summary", {"text": "anything"}, timeout=30)
    assert raised.value.type == "tool-error"
    assert "sampling failed: the LLM could not answer:" in raised.value.message


def test_sampling_must_be_a_boolean() -> None:
    assert McpServer.from_config("m", {"url": "http://h/mcp", "sampling": True}).sampling
    assert not McpServer.from_config("m", {"url": "http://h/mcp"}).sampling
    with pytest.raises(ConfigError, match="'sampling' must be true or false"):
        McpServer.from_config("m", {"url": "http://h/mcp", "sampling": "yes"})
    validate("mcp", "m", '{"url": "http://h/mcp", "sampling": false}')
    with pytest.raises(ConfigError, match="field 'sampling' of .* must be true or false"):
        validate("mcp", "m", '{"url": "http://h/mcp", "sampling": 1}')
