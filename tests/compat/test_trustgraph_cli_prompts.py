"""trustgraph-cli's prompt commands against a running `toolmesh serve`.

tg-set-prompt writes TrustGraph's layout (``prompt/system``, ``prompt/template.<id>``);
tg-show-prompts reads it back; a prompt tool made with tg-set-tool uses it through the agent,
and tg-invoke-prompt through the gateway's ``prompt`` service. trustgraph-cli exits 0 even when
it fails, so these tests judge it by what it prints and by what toolmesh holds.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cli.test_tool_cli import tables
from tests.compat.test_trustgraph_cli_config import tg
from tests.compat.test_trustgraph_cli_tools import tg_raw
from tests.processes import run_toolmesh
from tests.servers import Served, stored_raw, toolmesh_serve


def llm_script(path: Path) -> str:
    """A scripted model (``--llm scripted:PATH``): the agent calls the summarise tool with
    the rest of the question, then answers with the observation; the summarise template's
    prompt is answered with the system prompt it came with, so the answer shows both."""
    path.write_text(json.dumps({"rules": [
        {"match": r"^Summarise in a few words: (?P<text>.*)$",
         "response": "[{system}] short: {text}"},
        # the observation runs up to the shipped agent-react template's last line
        {"match": r"\nObservation: (?P<observation>.*?)\n\nYour reply, starting with",
         "response": "Thought: done\nFinal Answer: {observation}"},
        {"match": r"\nQuestion: Summarise (?P<text>[^\n]*)",
         "response": 'Thought: use the tool\nAction: summarise\nArgs: {"text": "{text}"}'},
    ]}))
    return f"scripted:{path}"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with toolmesh_serve(tmp_path, "--llm", llm_script(tmp_path / "llm.json")) as s:
        yield s


def shown(out: str) -> dict[str, dict[str, str]]:
    """What tg-show-prompts printed: ``{"System prompt": {...}, "<id>": {...}}``."""
    names = [line.removesuffix(":") for line in out.splitlines()
             if line.endswith(":") and not line.startswith(("|", "+"))]
    found = tables(out)
    if len(found) < len(names):  # an empty system prompt prints a table with no rows
        found.insert(0, {})
    assert len(names) == len(found), out
    return dict(zip(names, found, strict=True))


async def test_tg_show_prompts_on_a_fresh_deployment_shows_what_is_served(
        tg_bin: Path, served: Served) -> None:
    out = await tg(tg_bin, "tg-show-prompts", "-u", served.url)
    prompts = shown(out)
    assert list(prompts) == ["System prompt", "agent-json", "agent-native", "agent-react", "question"]
    assert prompts["question"] == {"prompt": "{{question}}", "response": "text"}
    assert prompts["agent-react"]["prompt"].startswith("Answer the question below.")
    # a workspace nobody wrote to reads the same
    assert shown(await tg(tg_bin, "tg-show-prompts", "-u", served.url, "-w", "ws2")) == prompts


async def test_tg_set_prompt_then_tg_show_prompts(tg_bin: Path, served: Served) -> None:
    u = ["-u", served.url]
    assert (await tg(tg_bin, "tg-set-prompt", "--system", "Be terse.", *u)).strip() == \
        "System prompt set."
    out = await tg(tg_bin, "tg-set-prompt", "--id", "extract", "--prompt", "Names in {{text}}",
                   "--response", "json", "--schema", '{"type": "array"}', *u)
    assert out.strip() == "Prompt set."
    assert stored_raw(served, "prompt/system") == "Be terse."
    assert stored_raw(served, "prompt/template.extract") == {
        "id": "extract", "prompt": "Names in {{text}}", "response-type": "json",
        "schema": {"type": "array"}}

    prompts = shown(await tg(tg_bin, "tg-show-prompts", *u))
    assert prompts["System prompt"] == {"prompt": "Be terse."}
    assert prompts["extract"] == {"prompt": "Names in {{text}}", "response": "json",
                                  "schema": "{'type': 'array'}"}

    # another workspace shows its own (tg-set-prompt 2.11.1 passes -w on for --system only)
    await tg(tg_bin, "tg-set-prompt", "-w", "ws2", "--system", "Ws2 prompt.", *u)
    out = await tg(tg_bin, "tg-show-prompts", "-w", "ws2", *u)
    assert "extract" not in out and "Be terse." not in out
    assert shown(out)["System prompt"] == {"prompt": "Ws2 prompt."}


async def test_a_prompt_tool_made_with_tg_set_tool_uses_tg_set_prompts_template(
        tg_bin: Path, served: Served) -> None:
    u = ["-u", served.url]
    await tg(tg_bin, "tg-set-prompt", "--system", "Be terse.", *u)
    await tg(tg_bin, "tg-set-prompt", "--id", "summarise",
             "--prompt", "Summarise in a few words: {{text}}", *u)
    out = await tg(tg_bin, "tg-set-tool", "--id", "sum", "--name", "summarise",
                   "--type", "prompt", "--template", "summarise",
                   "--description", "Summarise a text", "--argument", "text:string:The text", *u)
    assert out.strip() == "Tool set."

    out = await tg(tg_bin, "tg-invoke-agent", *u, "-q", "Summarise the sea is wide")
    # the template tg-set-prompt wrote, sent with the system prompt it set
    assert out.strip() == "[Be terse.] short: the sea is wide"
    code, out, err = await run_toolmesh("agent", "Summarise the sky is blue", *u,
                                        "--no-streaming")
    assert code == 0, err
    assert out.strip() == "[Be terse.] short: the sky is blue"


async def test_tg_invoke_prompt(tg_bin: Path, served: Served) -> None:
    """Needs the gateway's ``prompt`` service (REST and WebSocket)."""
    u = ["-u", served.url]
    await tg(tg_bin, "tg-set-prompt", "--system", "Be terse.", *u)
    await tg(tg_bin, "tg-set-prompt", "--id", "summarise",
             "--prompt", "Summarise in a few words: {{text}}", *u)
    for streaming in ([], ["--no-streaming"]):
        out = await tg(tg_bin, "tg-invoke-prompt", *u, "summarise", "text=the sea is wide",
                       *streaming)
        assert out.strip() == "[Be terse.] short: the sea is wide"
    # an unknown template: the error names this workspace's templates only
    code, _, err = await run_toolmesh("config", "put", "prompt/template.elsewhere",
                                      "--url", served.url, "--workspace", "ws2",
                                      stdin_text=json.dumps({"prompt": "x"}))
    assert code == 0, err
    out = await tg_raw(tg_bin, "tg-invoke-prompt", *u, "elsewhere")
    assert "unknown prompt template 'elsewhere' in workspace 'default'" in out, out
    assert "known templates: agent-json, agent-native, agent-react, question, summarise" in out, out
