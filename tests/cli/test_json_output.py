"""The listing commands' three forms — ``--json``, a plain table when piped, a coloured table
on a terminal — and deleting what is not there, run as a user runs them: the installed
``toolmesh`` console script against one real ``toolmesh serve`` shared by the module."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.processes import console_script, env
from tests.servers import Served, serving
from toolmesh.cli.http import GatewayClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "joke"
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# secrets stored in the mcp items: no output may ever show one
URL_PASSWORD, QUERY_KEY, AUTH_TOKEN, ENV_SECRET = ("urlpass-5ecret", "querykey-5ecret",
                                                   "authtoken-5ecret", "envvalue-5ecret")
SECRETS = (URL_PASSWORD, QUERY_KEY, AUTH_TOKEN, ENV_SECRET)
MCP_W = {"url": f"https://bob:{URL_PASSWORD}@mcp.example/mcp?api_key={QUERY_KEY}",
         "remote-name": "weather", "auth-token": AUTH_TOKEN}
MCP_S = {"url": "", "transport": "stdio", "command": "true", "args": ["--flag", "two words"],
         "env": {"API_KEY": ENV_SECRET}, "remote-name": "hello", "sampling": True}
UNICODE = {"name": "日本 🙂", "b": 1, "a": [1, 2]}
ITEMS = {
    ("tool-service", "joke-service"): (EXAMPLES / "joke-service.json").read_text(),
    ("tool", "tell-joke"): (EXAMPLES / "tell-joke.json").read_text(),
    ("tool", "ask"): json.dumps({"type": "text-completion", "name": "ask",
                                 "description": "Ask the LLM"}),
    ("tool", "w"): json.dumps({"type": "mcp-tool", "name": "get-weather",
                               "description": "The weather", "mcp-tool": "nothere"}),
    ("mcp", "w"): json.dumps(MCP_W),
    ("mcp", "s"): json.dumps(MCP_S),
    ("note", "plain"): "just text, not JSON",
    ("note", "unicode"): json.dumps(UNICODE, ensure_ascii=False),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("listings"), "--mcp-stdio-allow", "true") as srv:
        put(srv, "default", ITEMS)
        yield srv


def put(served: Served, workspace: str, items: dict[tuple[str, str], str]) -> int:
    answer = GatewayClient(served.url, token="").post("api/v1/config", {
        "operation": "put", "workspace": workspace,
        "values": [{"type": t, "key": k, "value": v} for (t, k), v in items.items()]})
    return int(answer["version"])


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a command: no colour settings or tokens from the outside."""
    outside = ("NO_COLOR", "FORCE_COLOR", "TOOLMESH_COLOR", "TOOLMESH_TOKEN",
               "TRUSTGRAPH_TOKEN", "TOOLMESH_GATEWAY_TOKEN", "TRUSTGRAPH_WORKSPACE")
    return {**{k: v for k, v in env().items() if k not in outside}, **extra}


def toolmesh(served: Served, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """The ``toolmesh`` console script with its stdout piped (as a script reads it)."""
    return subprocess.run([console_script(), *args, "-u", served.url], env=child_env(**extra_env),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def ok(served: Served, *args: str, **extra_env: str) -> str:
    """The stdout of a command that must succeed, checked to hold no escape sequence."""
    done = toolmesh(served, *args, **extra_env)
    assert done.returncode == 0, done.stderr
    if not extra_env:
        assert "\x1b" not in done.stdout, done.stdout
    return done.stdout


def failed(served: Served, *args: str) -> str:
    """The one-line stderr of a command that must fail with status 1 (and print nothing)."""
    done = toolmesh(served, *args)
    assert done.returncode == 1, (args, done.stdout, done.stderr)
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


def on_terminal(served: Served, *args: str, **extra_env: str) -> str:
    """The stdout of ``toolmesh ARGS`` run with a pseudo-terminal as its stdout (as a person
    sees it); the command must succeed."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([console_script(), *args, "-u", served.url],
                                env=child_env(TERM="xterm-256color", **extra_env),
                                stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE)
    finally:
        os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 1)[0]:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end of the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    # the terminal turns each \n into \r\n
    return b"".join(chunks).decode().replace("\r\n", "\n")


def table_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """A piped table's header and rows, each split on runs of spaces."""
    header, *lines = text.splitlines()
    return header.split(), [line.split() for line in lines]


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


# -- config list / get / show -----------------------------------------------------------------

@pytest.mark.slow  # seconds, measured (tests/conftest.py)
def test_config_list_prints_keys_one_a_line_or_a_json_array(served: Served) -> None:
    assert json.loads(ok(served, "config", "list", "tool", "--json")) == ["ask", "tell-joke", "w"]
    assert ok(served, "config", "list", "tool") == "ask\ntell-joke\nw\n"
    assert json.loads(ok(served, "config", "list", "nothing", "--json")) == []
    done = toolmesh(served, "config", "list", "nothing")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == "no items of type 'nothing' in workspace 'default'\n"


def test_config_get_json_decodes_json_values_and_strings_the_rest(served: Served) -> None:
    assert json.loads(ok(served, "config", "get", "tool/ask", "--json")) == \
        json.loads(ITEMS[("tool", "ask")])
    assert json.loads(ok(served, "config", "get", "note/plain", "--json")) == \
        "just text, not JSON"
    out = ok(served, "config", "get", "note/unicode", "--json")
    assert json.loads(out) == UNICODE
    assert "日本 🙂" in out and list(json.loads(out)) == ["a", "b", "name"]  # keys sorted
    # without --json: the stored text exactly
    assert ok(served, "config", "get", "note/plain") == "just text, not JSON\n"
    assert ok(served, "config", "get", "note/unicode") == ITEMS[("note", "unicode")] + "\n"
    assert "no config item note/missing in workspace 'default'" in failed(
        served, "config", "get", "note/missing", "--json")


def test_config_show_is_json_with_or_without_the_flag(served: Served) -> None:
    out = ok(served, "config", "show")
    assert ok(served, "config", "show", "--json") == out
    shown = json.loads(out)
    assert list(shown) == ["version", "config"]
    assert isinstance(shown["version"], int) and shown["version"] >= 1
    config = shown["config"]
    assert list(config) == sorted(config)
    assert config["note"] == {"plain": "just text, not JSON", "unicode": UNICODE}
    assert config["mcp"]["w"]["auth-token"] == "***"
    assert_no_secret(out)
    only = json.loads(ok(served, "config", "show", "--type", "note", "--json"))
    assert only == {"version": shown["version"], "config": {"note": config["note"]}}


# -- config history ---------------------------------------------------------------------------

def test_config_history_as_json_and_as_a_table(served: Served) -> None:
    entries = json.loads(ok(served, "config", "history", "--json", "-n", "100"))
    assert len(entries) == len(ITEMS)  # one put of them all: one entry per item
    for e in entries:
        assert set(e) == {"at", "actor", "workspace", "operation", "type", "key", "version"}
        assert (e["operation"], e["workspace"], e["actor"]) == ("put", "default", "local")
    assert {(e["type"], e["key"]) for e in entries} == set(ITEMS)
    header, rows = table_rows(ok(served, "config", "history", "-n", "100"))
    assert header == ["AT", "VERSION", "OPERATION", "WORKSPACE", "ITEM", "ACTOR"]
    assert rows == [[e["at"], str(e["version"]), "put", "default", f"{e['type']}/{e['key']}",
                     "local"] for e in entries]


# -- tools ------------------------------------------------------------------------------------

def test_tools_as_json_and_as_a_table(served: Served) -> None:
    answer = json.loads(ok(served, "tools", "--json"))
    assert set(answer) == {"workspace", "version", "tools", "tool_calling"}
    assert answer["workspace"] == "default" and isinstance(answer["version"], int)
    assert answer["tool_calling"]["tool_calling"] == "react"  # the offline demo model
    statuses = {t["key"]: (t["name"], t["type"], t["status"]) for t in answer["tools"]}
    assert statuses == {"ask": ("ask", "text-completion", "available"),
                        "tell-joke": ("tell-joke", "tool-service", "available"),
                        "w": ("get-weather", "mcp-tool", "not-offered")}
    (w,) = [t for t in answer["tools"] if t["key"] == "w"]
    assert "mcp/nothere" in w["reason"]
    listed = toolmesh(served, "tools")
    out = listed.stdout
    # how the agent calls tools is a note on stderr, so the piped table is only the table
    assert listed.stderr.startswith("tool calling: react (provider;"), listed.stderr
    header, rows = table_rows(out)
    assert header == ["KEY", "NAME", "TYPE", "SOURCE", "STATUS", "REASON"]
    assert [row[:5] for row in rows] == [
        ["ask", "ask", "text-completion", "configured", "available"],
        ["tell-joke", "tell-joke", "tool-service", "configured", "available"],
        ["w", "get-weather", "mcp-tool", "configured", "not"]]
    assert out.splitlines()[3].endswith("not offered  " + w["reason"])


# -- mcp show ---------------------------------------------------------------------------------

def test_mcp_show_as_json_and_as_a_table_never_shows_a_secret(served: Served) -> None:
    out = ok(served, "mcp", "show", "--json")
    assert_no_secret(out)
    shown = json.loads(out)
    assert shown == {
        "s": {**MCP_S, "env": {"API_KEY": "***"}},
        "w": {**MCP_W, "auth-token": "***",
              "url": "https://bob:***@mcp.example/mcp?api_key=***"}}
    assert json.loads(ok(served, "mcp", "show", "w", "--json")) == {"w": shown["w"]}
    out = ok(served, "mcp", "show")
    assert_no_secret(out)
    header, s, w = out.splitlines()
    assert header.split() == ["ID", "TRANSPORT", "REMOTE-NAME", "AUTH-TOKEN", "SAMPLING",
                              "SERVER"]
    assert s.split() == ["s", "stdio", "hello", "none", "allowed", "API_KEY=***", "true",
                         "--flag", "'two", "words'"]
    assert w.split() == ["w", "streamable-http", "weather", "***", "-",
                         "https://bob:***@mcp.example/mcp?api_key=***"]
    assert "no MCP tool 'nope' in workspace 'default'" in failed(
        served, "mcp", "show", "nope", "--json")
    done = toolmesh(served, "mcp", "show", "--json", "-w", "empty")
    assert (done.returncode, json.loads(done.stdout)) == (0, {})


# -- token list / revoke ----------------------------------------------------------------------

def test_token_list_as_json_and_a_table_and_revoking_an_unknown_id(served: Served) -> None:
    made = toolmesh(served, "token", "create", "-w", "default,ws2", "-c", "agent",
                    "--name", "ci")
    assert made.returncode == 0, made.stderr
    tokens = json.loads(ok(served, "token", "list", "--json"))
    (token,) = [t for t in tokens if t["name"] == "ci"]
    assert set(token) == {"id", "name", "workspaces", "capabilities", "created"}
    assert (token["workspaces"], token["capabilities"]) == (["default", "ws2"], ["agent"])
    assert made.stdout.strip() not in json.dumps(tokens)
    header, rows = table_rows(ok(served, "token", "list"))
    assert header == ["ID", "NAME", "WORKSPACES", "CAPABILITIES", "CREATED"]
    assert [token["id"], "ci", "default,ws2", "agent", token["created"]] in rows

    assert failed(served, "token", "revoke", "nope") == (
        "toolmesh: error: config-error: no token 'nope' (toolmesh token list shows the ids)\n")
    # the first refusal ends the command, and says what was not tried
    err = failed(served, "token", "revoke", "nope", token["id"])
    assert err.rstrip().endswith(f"; not tried: {token['id']}")
    assert token["id"] in {t["id"] for t in json.loads(ok(served, "token", "list", "--json"))}
    done = toolmesh(served, "token", "revoke", token["id"])
    assert done.returncode == 0 and done.stderr == f"revoked token {token['id']}\n"
    assert token["id"] not in {t["id"] for t in
                               json.loads(ok(served, "token", "list", "--json"))}


# -- config delete ----------------------------------------------------------------------------

def version(served: Served) -> int:
    return int(json.loads(ok(served, "config", "show", "--json"))["version"])


def history(served: Served, workspace: str) -> list[tuple[str, str, int]]:
    entries = json.loads(ok(served, "config", "history", "--json", "-w", workspace))
    return [(e["operation"], f"{e['type']}/{e['key']}", e["version"]) for e in entries]


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
def test_deleting_an_item_that_is_not_there_is_an_error_and_changes_nothing(
        served: Served) -> None:
    ws = "deleting"
    first = put(served, ws, {("note", "a"): "1", ("note", "b"): "2"})
    assert failed(served, "config", "delete", "note/nonexist", "-w", ws) == (
        "toolmesh: error: no config item note/nonexist in workspace 'deleting'\n")
    # several named, some missing: the whole delete is refused
    err = failed(served, "config", "delete", "note/a", "note/nonexist", "note/b", "tool/x",
                 "-w", ws)
    assert err == ("toolmesh: error: no config items note/nonexist, tool/x in workspace "
                   "'deleting'; nothing was deleted\n")
    # no version was made, nothing was recorded, nothing went
    assert version(served) == first
    assert history(served, ws) == [("put", "note/b", first), ("put", "note/a", first)]
    assert json.loads(ok(served, "config", "list", "note", "--json", "-w", ws)) == ["a", "b"]
    # the item exists in another workspace: still not there in this one
    assert "no config item tool/ask in workspace 'deleting'" in failed(
        served, "config", "delete", "tool/ask", "-w", ws)

    done = toolmesh(served, "config", "delete", "note/a", "note/a", "-w", ws)
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"deleted 1 item(s) (version {first + 1})\n"
    assert version(served) == first + 1
    assert "no config item note/a in workspace 'deleting'" in failed(
        served, "config", "delete", "note/a", "-w", ws)
    assert history(served, ws)[0] == ("delete", "note/a", first + 1)


def test_a_token_that_may_not_read_config_still_deletes_unchecked(served: Served) -> None:
    ws = "write-only"
    first = put(served, ws, {("note", "a"): "1"})
    made = toolmesh(served, "token", "create", "-w", ws, "-c", "config:write")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    done = toolmesh(served, "config", "delete", "note/a", "-w", ws, "-t", token)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"asked to delete 1 item(s) (version {first + 1}); the token may "
                           "not read config, so whether they existed was not checked\n")
    assert json.loads(ok(served, "config", "list", "note", "--json", "-w", ws)) == []
    # a missing item cannot be told from a present one: no error, and no version either
    done = toolmesh(served, "config", "delete", "note/a", "-w", ws, "-t", token)
    assert done.returncode == 0 and f"(version {first + 1})" in done.stderr, done.stderr


def test_trustgraphs_delete_of_a_missing_item_still_succeeds_and_makes_no_version(
        served: Served) -> None:
    before = version(served)
    done = subprocess.run([str(Path(console_script()).parent / "tg-delete-config-item"),
                           "--type", "note", "--key", "never-there", "-u", served.url],
                          env=child_env(), capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (
        0, "Configuration item deleted: note/never-there"), done.stderr
    assert version(served) == before


# -- the terminal forms -----------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    pytest.param(("tools",), id="tools"),
    pytest.param(("config", "history", "-n", "100"), id="history"),
    pytest.param(("mcp", "show"), id="mcp-show"),
    pytest.param(("token", "list"), id="token-list"),
])
def test_on_a_terminal_a_table_is_the_piped_text_with_bold_headers_and_colour(
        served: Served, args: tuple[str, ...]) -> None:
    if args[0] == "token":  # a token to list
        assert toolmesh(served, "token", "create", "-w", "default", "-c", "agent").returncode == 0
    piped = ok(served, *args)
    seen = on_terminal(served, *args)
    assert seen != piped and "\x1b[1m" in seen.splitlines()[0]  # a bold header
    assert ANSI.sub("", seen) == piped
    assert on_terminal(served, *args, NO_COLOR="1") == piped
    assert ok(served, *args, TOOLMESH_COLOR="always") == seen  # piped, but asked for


def test_status_words_are_coloured_on_a_terminal(served: Served) -> None:
    seen = on_terminal(served, "tools")
    assert "\x1b[32mavailable\x1b[0m" in seen and "\x1b[33mnot offered\x1b[0m" in seen
    assert "\x1b[32mput\x1b[0m" in on_terminal(served, "config", "history")


@pytest.mark.parametrize("args", [
    ("tools", "--json"), ("config", "history", "--json"), ("mcp", "show", "--json"),
    ("token", "list", "--json"), ("config", "list", "tool", "--json"),
    ("config", "get", "tool/ask", "--json"), ("config", "show"),
])
def test_json_is_the_same_on_a_terminal_and_in_a_pipe(served: Served,
                                                      args: tuple[str, ...]) -> None:
    seen = on_terminal(served, *args)
    assert "\x1b" not in seen
    parsed: Any = json.loads(seen)
    assert parsed == json.loads(ok(served, *args))
