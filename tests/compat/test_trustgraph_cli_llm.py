"""The real trustgraph-cli's LLM commands (`tg-invoke-llm`, `tg-invoke-prompt`,
`tg-invoke-agent --show-usage`), its `tg-show-mcp-tools` on a stdio item and its Python
`Api.config().get_values_all_workspaces` against a running `toolmesh serve`.

The LLM is scripted (``--llm scripted:FILE``), so answers are known and token counts are its
documented whitespace-word counts: in = words of system + prompt, out = words of the answer.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.cli.test_agent_cli import EXAMPLES
from tests.cli.test_config_cli import script
from tests.cli.test_tool_cli import tables
from tests.forkserver import spawn_script
from tests.servers import Served, stored_raw, toolmesh_serve

ANSWER = "Paris is the capital of France."
#: the agent's two steps: a tool call, then the final answer
STEPS = ['Thought: I call the joke tool.\nAction: tell-joke\nArgs: {"topic": "food"}',
         "Thought: The tool answered.\nFinal Answer: It told a joke."]
USAGE = re.compile(r"Input tokens: (\S+)  Output tokens: (\S+)  Model: (\S+)")


def words(*texts: str) -> int:
    """The scripted LLM's token count (documented: whitespace-separated words)."""
    return sum(len(t.split()) for t in texts)


@asynccontextmanager
async def serve_with_script(tmp_path: Path, script_body: dict[str, object],
                            *extra: str) -> AsyncIterator[Served]:
    path = tmp_path / "llm.json"
    path.write_text(json.dumps(script_body))
    async with toolmesh_serve(tmp_path, "--llm", f"scripted:{path}", *extra) as s:
        yield s


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with serve_with_script(tmp_path, {"default": ANSWER}) as s:
        yield s


async def tg_run(bin: Path, command: str, *args: str) -> tuple[str, str]:
    """(stdout, stderr) of a trustgraph-cli command that must succeed (it exits 0 and prints
    ``Exception: ...`` when it fails)."""
    proc = await spawn_script(
        bin / command, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert "Exception" not in out.decode(), out.decode() + err.decode()
    return out.decode(), err.decode()


def usage(stderr: str) -> tuple[int, int, str]:
    found = USAGE.search(stderr)
    assert found, stderr
    in_token, out_token, model = found.groups()
    assert in_token.isdigit() and out_token.isdigit(), stderr  # not "None"
    return int(in_token), int(out_token), model


@pytest.mark.parametrize("streaming", [True, False])
async def test_tg_invoke_llm(tg_bin: Path, served: Served, streaming: bool) -> None:
    system, prompt = "Be brief.", "What is the capital of France?"
    flags = [] if streaming else ["--no-streaming"]
    out, err = await tg_run(tg_bin, "tg-invoke-llm", "-u", served.url, system, prompt,
                            "--show-usage", *flags)
    assert out == ANSWER + "\n"
    assert usage(err) == (words(system, prompt), words(ANSWER), "scripted")


@pytest.mark.parametrize("streaming", [True, False])
async def test_tg_invoke_prompt(tg_bin: Path, served: Served, streaming: bool) -> None:
    flags = [] if streaming else ["--no-streaming"]
    out, err = await tg_run(tg_bin, "tg-invoke-prompt", "-u", served.url, "question",
                            "question=What is the capital of France?", "--show-usage", *flags)
    assert out == ANSWER + "\n"
    in_token, out_token, model = usage(err)
    # the question is in the prompt, whatever else the template adds
    assert in_token >= words("What is the capital of France?")
    assert (out_token, model) == (words(ANSWER), "scripted")


async def test_tg_invoke_prompt_says_which_template_is_unknown(tg_bin: Path,
                                                               served: Served) -> None:
    proc = await spawn_script(
        tg_bin / "tg-invoke-prompt", "-u", served.url, "no-such-template", "x=1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert "Exception" in out.decode() and "no-such-template" in out.decode()


async def test_tg_invoke_agent_shows_the_usage_of_the_whole_dialog(
        tg_bin: Path, tmp_path: Path) -> None:
    async with serve_with_script(tmp_path, {"responses": STEPS}) as served:
        for item, file in [("tool-service/joke-service", "joke-service.json"),
                           ("tool/tell-joke", "tell-joke.json")]:
            code, _, err = await script("tg-put-config-item", item, "-u", served.url,
                                        stdin=(EXAMPLES / file).read_text())
            assert code == 0, err
        out, err = await tg_run(tg_bin, "tg-invoke-agent", "-u", served.url,
                                "-q", "Tell me a joke about food", "--show-usage")
        assert out.strip() == "It told a joke."
        in_token, out_token, model = usage(err)
        # both LLM answers of the dialog, summed
        assert (out_token, model) == (words(*STEPS), "scripted")
        assert in_token > words("Tell me a joke about food") * 2  # two prompts, each with it


async def test_tg_show_mcp_tools_shows_a_stdio_item(tg_bin: Path, tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, "--mcp-stdio-allow", "python") as served:
        u = ["-u", served.url]
        code, _, err = await script("tg-set-mcp-tool", "-i", "clock", "-r", "get_current_time",
                                    "--transport", "stdio", "--command", "python",
                                    "--arg=-m", "--arg", "mcp_server_time", *u)
        assert code == 0, err
        await tg_run(tg_bin, "tg-set-mcp-tool", "-i", "weather", "-r", "get_weather",
                     "--tool-url", "https://mcp.example/mcp", *u)
        # a stdio item has no URL, and says so with an empty one
        assert stored_raw(served, "mcp/clock") == {
            "url": "", "remote-name": "get_current_time", "transport": "stdio",
            "command": "python", "args": ["-m", "mcp_server_time"]}
        out, _ = await tg_run(tg_bin, "tg-show-mcp-tools", *u)
        assert tables(out) == [
            {"id": "clock", "remote-name": "get_current_time", "url": "", "auth": "No"},
            {"id": "weather", "remote-name": "get_weather", "url": "https://mcp.example/mcp",
             "auth": "No"}]


ALL_WORKSPACES = """
import json, sys
from trustgraph.api import Api
values = Api(sys.argv[1]).config().get_values_all_workspaces("mcp")
print(json.dumps([[v.workspace, v.type, v.key, json.loads(v.value)] for v in values]))
"""


async def test_the_real_api_gets_values_of_all_workspaces(tg_bin: Path, served: Served) -> None:
    for workspace, id, url in [("default", "weather", "https://mcp.example/mcp"),
                               ("ws2", "calc", "http://h:9/mcp")]:
        await tg_run(tg_bin, "tg-set-mcp-tool", "-u", served.url, "-w", workspace, "-i", id,
                     "--tool-url", url, "--auth-token", "s3cret-of-" + workspace)
    proc = await asyncio.create_subprocess_exec(
        str(tg_bin / "python"), "-c", ALL_WORKSPACES, served.url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert json.loads(out) == [
        ["default", "mcp", "weather", {"remote-name": "weather", "url": "https://mcp.example/mcp",
                                       "auth-token": "***"}],
        ["ws2", "mcp", "calc", {"remote-name": "calc", "url": "http://h:9/mcp",
                                "auth-token": "***"}]]
