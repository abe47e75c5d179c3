"""`toolmesh mcp ...` and toolmesh's tg-* tool scripts against a real `toolmesh serve` process.

What they store is read back with `toolmesh config get`, so these tests check the wire and
the gateway's validation as well as the commands. Calling an MCP tool needs an MCP service
behind the gateway; only the invoke failures that happen before (or without) it are here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cli.test_config_cli import script
from tests.processes import run_toolmesh
from tests.servers import Served, keys, stored, stored_raw, toolmesh_serve

SECRET = "s3cr3t-T0KEN-value"
ENV_SECRET = "ghp_env-secret-value"
DOWN = "http://127.0.0.1:9/"

#: the seed's tell-joke tool (SPEC §2) with this test's argument description
TELL_JOKE = {"type": "tool-service", "name": "tell-joke",
             "description": "Tell a joke on a given topic", "service": "joke-service",
             "style": "pun",
             "arguments": [{"name": "topic", "type": "string",
                            "description": "The topic: anything"}]}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with toolmesh_serve(tmp_path, "--mcp-stdio-allow", "npx,uvx") as s:
        yield s


def tables(out: str) -> list[dict[str, str]]:
    """The two-column tables a tg-show-* command printed, as {row name: text}; a cell that
    wraps onto more lines is joined with newlines."""
    found: list[dict[str, str]] = []
    last = ""
    for line in out.splitlines():
        if line.startswith("+"):
            if not found or found[-1]:
                found.append({})
            continue
        if line.startswith("| "):
            key, value = (c.strip() for c in line[2:-2].split(" | ", 1))
            if key:
                found[-1][key], last = value, key
            else:
                found[-1][last] += "\n" + value
    return [t for t in found if t]


def one_line_failure(result: tuple[int, str, str], complaint: str) -> None:
    code, out, err = result
    assert code == 1, (out, err)
    assert complaint in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_toolmesh_mcp_set_show_delete(served: Served) -> None:
    u = ["-u", served.url]
    outputs: list[str] = []
    code, out, err = await run_toolmesh("mcp", "set", "weather", "--url", "https://mcp.example/mcp",
                                        "--remote-name", "get_weather", "--auth-token", SECRET, *u)
    assert code == 0 and "stored mcp/weather" in err, err
    assert "--auth-token is visible to other users" in err and "--auth-token-file" in err
    outputs += [out, err]
    weather = {"url": "https://mcp.example/mcp", "remote-name": "get_weather",
               "auth-token": SECRET}
    assert stored_raw(served, "mcp/weather") == weather
    assert await stored(served, "mcp/weather") == {**weather, "auth-token": "***"}

    code, out, err = await run_toolmesh(
        "mcp", "set", "files", "--transport", "stdio", "--command", "npx", "--arg=-y",
        "--arg", "server-files", "--env", f"GITHUB_TOKEN={ENV_SECRET}", *u)
    assert code == 0, err
    # "url": "" — no URL, in the form TrustGraph's tg-show-mcp-tools can list
    files = {"url": "", "remote-name": "files", "transport": "stdio", "command": "npx",
             "args": ["-y", "server-files"], "env": {"GITHUB_TOKEN": ENV_SECRET}}
    assert stored_raw(served, "mcp/files") == files
    assert await stored(served, "mcp/files") == {**files, "env": {"GITHUB_TOKEN": "***"}}

    code, out, err = await run_toolmesh("mcp", "set", "events", "--url", "http://h/sse",
                                        "--transport", "sse", *u)
    assert code == 0, err
    assert await stored(served, "mcp/events") == {"url": "http://h/sse", "remote-name": "events",
                                                  "transport": "sse"}

    code, out, err = await run_toolmesh("mcp", "show", *u)
    assert code == 0, err
    outputs += [out, err]
    header, *rows = out.splitlines()
    assert header.split() == ["ID", "TRANSPORT", "REMOTE-NAME", "AUTH-TOKEN", "SAMPLING",
                              "SERVER"]
    assert [row.split() for row in rows] == [  # by id
        ["events", "sse", "events", "none", "-", "http://h/sse"],
        ["files", "stdio", "files", "none", "-", "GITHUB_TOKEN=***", "npx", "-y",
         "server-files"],
        ["weather", "streamable-http", "get_weather", "***", "-", "https://mcp.example/mcp"]]

    code, out, err = await run_toolmesh("mcp", "show", "weather", *u)
    assert code == 0 and out.splitlines()[1].startswith("weather ") and "files" not in out, err
    outputs += [out, err]
    assert all(SECRET not in o and ENV_SECRET not in o for o in outputs)

    code, out, err = await run_toolmesh("mcp", "delete", "files", *u)
    assert code == 0, err
    assert await keys(served, "mcp") == ["events", "weather"]
    one_line_failure(await run_toolmesh("mcp", "delete", "files", *u), "no MCP tool 'files'")
    one_line_failure(await run_toolmesh("mcp", "show", "files", *u), "no MCP tool 'files'")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_tg_mcp_scripts(served: Served) -> None:
    u = ["-u", served.url]
    code, out, err = await script("tg-set-mcp-tool", "-i", "weather", "-r", "get_weather",
                                  "--tool-url", "https://mcp.example/mcp", "--auth-token", SECRET,
                                  *u)
    assert (code, out) == (0, ""), err  # silent on success, like trustgraph-cli
    assert stored_raw(served, "mcp/weather") == {
        "url": "https://mcp.example/mcp", "remote-name": "get_weather", "auth-token": SECRET}
    code, out, err = await script("tg-set-mcp-tool", "--id", "files", "--transport", "stdio",
                                  "--command", "uvx", "--arg", "mcp-server-files",
                                  "--env", f"KEY={ENV_SECRET}", *u)
    assert code == 0, err
    assert stored_raw(served, "mcp/files") == {
        "url": "", "remote-name": "files", "transport": "stdio", "command": "uvx",
        "args": ["mcp-server-files"], "env": {"KEY": ENV_SECRET}}

    code, out, err = await script("tg-show-mcp-tools", *u)
    assert code == 0, err
    assert SECRET not in out + err and ENV_SECRET not in out + err
    files, weather = tables(out)  # in key order
    assert weather == {"id": "weather", "remote-name": "get_weather",
                       "url": "https://mcp.example/mcp", "transport": "streamable-http",
                       "auth": "Yes (configured)"}
    assert files == {"id": "files", "remote-name": "files", "url": "", "transport": "stdio",
                     "command": "uvx", "args": "mcp-server-files", "env": "KEY=***",
                     "auth": "No"}

    code, out, err = await script("tg-delete-mcp-tool", "--id", "weather", *u)
    assert (code, out.strip()) == (0, "MCP tool 'weather' deleted successfully."), err
    assert await keys(served, "mcp") == ["files"]
    one_line_failure(await script("tg-delete-mcp-tool", "-i", "weather", *u),
                     "MCP tool 'weather' not found.")


async def test_tg_set_tool_stores_the_seeds_tell_joke(served: Served) -> None:
    code, out, err = await script(
        "tg-set-tool", "--id", "tell-joke", "--name", "tell-joke",
        "--description", "Tell a joke on a given topic", "--type", "tool-service",
        "--service", "joke-service", "--config-param", "style=pun",
        "--argument", "topic:string:The topic: anything", "-u", served.url)
    assert (code, out.strip()) == (0, "Tool set."), err
    assert await stored(served, "tool/tell-joke") == TELL_JOKE


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_tg_set_tool_with_trustgraphs_flags(served: Served) -> None:
    u = ["-u", served.url]
    # the wire doc's captured example gives the same JSON as trustgraph-cli stores
    code, out, err = await script(
        "tg-set-tool", "--id", "calc", "--name", "calculate", "--type", "mcp-tool",
        "--description", "Do math", "--mcp-tool", "calculator",
        "--argument", "expression:string:Math expr", "n:number:A number",
        "--group", "math", "admin", "--state", "done", "--applicable-states", "*", *u)
    assert (code, out.strip()) == (0, "Tool set."), err
    assert await stored(served, "tool/calc") == {
        "name": "calculate", "description": "Do math", "type": "mcp-tool",
        "mcp-tool": "calculator",
        "arguments": [{"name": "expression", "type": "string", "description": "Math expr"},
                      {"name": "n", "type": "number", "description": "A number"}],
        "group": ["math", "admin"], "state": "done", "applicable-states": ["*"]}

    # every JSON Schema type; --argument may repeat; a bare --group stores []
    code, out, err = await script(
        "tg-set-tool", "--id", "sum", "--name", "summarise", "--type", "prompt",
        "--description", "Summarise", "--template", "summary",
        "--argument", "n:integer:How many", "flag:boolean:On or off",
        "--argument", "opts:object:Options", "items:array:Things", "--group", *u)
    assert code == 0, err
    tool = await stored(served, "tool/sum")
    assert [a["type"] for a in tool["arguments"]] == ["integer", "boolean", "object", "array"]
    assert tool["group"] == [] and tool["template"] == "summary"

    # TrustGraph's query types call services toolmesh does not run: refused, saying so
    one_line_failure(await script(
        "tg-set-tool", "--id", "ask", "--name", "ask_kb", "--type", "knowledge-query",
        "--description", "Ask the knowledge base", "--collection", "docs", *u),
        "config-error: invalid field 'type' of tool/ask: tool type 'knowledge-query' is not "
        "available in this deployment: it calls TrustGraph's graph-rag service")
    assert "ask" not in await keys(served, "tool")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_tg_show_tools_and_delete(served: Served) -> None:
    u = ["-u", served.url]
    for args in (
            ["--id", "tell-joke", "--name", "tell-joke", "--description", "Tell a joke",
             "--type", "tool-service", "--service", "joke-service", "--config-param", "style=pun",
             "--argument", "topic:string:The topic: anything", "--group", "fun",
             "--applicable-states", "*"],
            ["--id", "calc", "--name", "calculate", "--description", "Do math",
             "--type", "mcp-tool", "--mcp-tool", "calculator", "--state", "done",
             "--applicable-states", "start", "end"],
            ["--id", "sum", "--name", "summarise", "--description", "Summarise",
             "--type", "prompt", "--template", "summary", "--argument", "text:string:The text"]):
        code, _, err = await script("tg-set-tool", *args, *u)
        assert code == 0, err
    code, out, err = await script("tg-show-tools", *u)
    assert code == 0, err
    calc, summ, joke = tables(out)  # in key order
    # the status row: what the agent offers, and why not (a wrapped cell, joined again)
    statuses = [t.pop("status").replace("\n", " ") for t in (calc, summ, joke)]
    assert statuses == [
        "not offered: tool/calc uses MCP tool 'calculator', but there is no config item "
        "mcp/calculator",
        "available",
        # no tool-service item, but serve's joke service announces its descriptor
        "available"]
    assert calc == {"id": "calc", "name": "calculate", "description": "Do math",
                    "type": "mcp-tool", "mcp-tool": "calculator", "next state": "done",
                    "available in": "start, end"}
    assert joke == {"id": "tell-joke", "name": "tell-joke", "description": "Tell a joke",
                    "type": "tool-service", "service": "joke-service", "config style": "pun",
                    "arg 0": "topic: string\nThe topic: anything", "groups": "fun",
                    "available in": "all states"}
    assert summ == {"id": "sum", "name": "summarise", "description": "Summarise",
                    "type": "prompt", "template": "summary", "arg 0": "text: string\nThe text"}

    # `toolmesh tools`: the same, one line per tool
    code, out, err = await run_toolmesh("tools", *u)
    assert code == 0, err
    header, *lines = out.splitlines()
    assert header.split() == ["KEY", "NAME", "TYPE", "SOURCE", "STATUS", "REASON"]
    assert [line.split()[:5] for line in lines] == [
        ["calc", "calculate", "mcp-tool", "configured", "not"],
        ["sum", "summarise", "prompt", "configured", "available"],
        ["tell-joke", "tell-joke", "tool-service", "configured", "available"]]
    assert lines[0].endswith("not offered  tool/calc uses MCP tool 'calculator', but there is "
                             "no config item mcp/calculator")
    code, out, err = await run_toolmesh("tools", "--json", *u)
    assert code == 0, err
    assert [(t["key"], t["status"]) for t in json.loads(out)["tools"]] == [
        ("calc", "not-offered"), ("sum", "available"), ("tell-joke", "available")]

    code, out, err = await script("tg-delete-tool", "--id", "calc", *u)
    assert (code, out.strip()) == (0, "Tool 'calc' deleted successfully."), err
    assert await keys(served, "tool") == ["sum", "tell-joke"]
    one_line_failure(await script("tg-delete-tool", "--id", "calc", *u),
                     "Tool configuration for 'calc' not found.")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_invalid_input_is_refused_with_one_line(served: Served) -> None:
    u = ["-u", served.url]
    tool = ["tg-set-tool", "--id", "x", "--name", "x", "--description", "d", *u]
    cases: list[tuple[list[str], str]] = [
        (tool + ["--type", "tool-service"],
         "config-error: invalid field 'service' of tool/x: is required"),
        (["tg-set-tool", "--id", "x", "--name", "x", "--type", "text-completion", *u],
         "config-error: invalid field 'description' of tool/x: is required"),
        (tool + ["--type", "prompt"], "config-error: invalid field 'template' of tool/x"),
        (tool + ["--type", "nonsense"],
         "config-error: invalid field 'type' of tool/x: unknown tool type 'nonsense'"),
        (tool + ["--type", "mcp-tool", "--mcp-tool", "m", "--argument", "a:string"],
         "--argument 'a:string' is not name:type:description"),
        (tool + ["--type", "mcp-tool", "--mcp-tool", "m", "--argument", "a:text:desc"],
         "type 'text' is not one of string, number, integer, boolean, object, array"),
        (tool + ["--type", "mcp-tool", "--mcp-tool", "m", "--argument", "a:string:x",
                 "a:number:y"], "--argument names the same argument twice"),
        (tool + ["--type", "tool-service", "--service", "s", "--config-param", "style"],
         "--config-param 'style' is not NAME=VALUE"),
        (tool + ["--type", "tool-service", "--service", "s", "--config-param", "name=y"],
         "'name' is a tool field"),
        (tool + ["--type", "mcp-tool", "--mcp-tool", "m", "--config-param", "a=b"],
         "--config-param is for --type tool-service"),
        (["tg-set-mcp-tool", "-i", "m", "--transport", "stdio", *u],
         "--transport stdio needs --command"),
        (["tg-set-mcp-tool", "-i", "m", *u], "give the MCP server's URL"),
        (["tg-set-mcp-tool", "-i", "m", "--tool-url", "ftp://h/", *u],
         "config-error: invalid field 'url' of mcp/m: must be an http:// or https:// URL"),
        (["tg-set-mcp-tool", "-i", "m", "--tool-url", "http://h/", "--command", "c", *u],
         "--command, --arg and --env are for --transport stdio"),
        (["tg-set-mcp-tool", "-i", "m", "--transport", "stdio", "--command", "c",
          "--env", "NOEQUALS", *u], "--env 'NOEQUALS' is not NAME=VALUE"),
        (["tg-show-tools", "-u", DOWN], "cannot reach the gateway"),
        (["tg-show-mcp-tools", "-u", DOWN], "cannot reach the gateway"),
        (["tg-delete-tool", "--id", "x", "-u", DOWN], "cannot reach the gateway"),
    ]
    for args, complaint in cases:
        one_line_failure(await script(*args), complaint)
    for args, complaint in [
        (["mcp", "set", "m", "--transport", "stdio", *u], "--transport stdio needs --command"),
        (["mcp", "set", "m", "--transport", "stdio", "--command", "c", "--url", "http://h/", *u],
         "--transport stdio takes --command, not a URL"),
        (["mcp", "set", "m", "--url", "http://h/", "-u", DOWN], "cannot reach the gateway"),
        (["mcp", "show", "-u", DOWN], "cannot reach the gateway"),
        (["tools", "-u", DOWN], "cannot reach the gateway"),
    ]:
        one_line_failure(await run_toolmesh(*args), complaint)
    # nothing was stored by any of them
    assert await keys(served, "tool") == [] and await keys(served, "mcp") == []


async def test_invoke_failures_are_one_line() -> None:
    # these fail before any MCP server is involved: the gateway is down, or the input is bad
    for args, complaint in [
        (["-n", "weather", "-P", '{"city": "Paris"}', "-u", DOWN], "cannot reach the gateway"),
        (["-n", "weather", "-P", "{not json", "-u", DOWN], "-P is not valid JSON"),
        (["-n", "weather", "-P", "[1, 2]", "-u", DOWN], "-P must be a JSON object"),
        (["-n", "weather", "--param", "n:=nope", "-u", DOWN], "the value after := is not JSON"),
    ]:
        one_line_failure(await script("tg-invoke-mcp-tool", *args), complaint)
    for args, complaint in [
        (["weather", "--param", "city=Paris", "-u", DOWN], "cannot reach the gateway"),
        (["weather", "-P", "{not json", "-u", DOWN], "-P is not valid JSON"),
        (["weather", "--param", "novalue", "-u", DOWN], "--param 'novalue' is not NAME=VALUE"),
    ]:
        one_line_failure(await run_toolmesh("mcp", "invoke", *args), complaint)


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_mcp_set_reads_the_token_from_a_file(served: Served, tmp_path: Path) -> None:
    (tmp_path / "token").write_text(SECRET + "\n")
    code, out, err = await run_toolmesh("mcp", "set", "w", "--url", "https://mcp.example/mcp",
                                        "--auth-token-file", str(tmp_path / "token"),
                                        "-u", served.url)
    assert code == 0 and "process list" not in err, err
    assert stored_raw(served, "mcp/w")["auth-token"] == SECRET
    one_line_failure(await run_toolmesh("mcp", "set", "w", "--url", "https://mcp.example/mcp",
                                        "--auth-token-file", str(tmp_path / "nope"),
                                        "-u", served.url), "cannot read --auth-token-file")
