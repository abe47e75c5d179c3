"""Every `toolmesh` and `tg-*` command starts fast: building the parser, and running a
simple command, imports only what that command needs (bench/cli_startup.py has the figures).

Each check runs in a fresh interpreter (this one has imported everything long ago) and
looks at the modules the command added to ``sys.modules``. What may stay, and why:

* ``toolmesh.bus`` (with ``bus.base`` and ``bus.queue_id``, no backend): the default of
  ``toolmesh run ... --concurrency`` is ``DEFAULT_CONCURRENCY``; no broker client, no asyncio;
* ``toolmesh.gateway`` (its ``__init__`` imports nothing) and ``toolmesh.gateway.deadlines``:
  the help of ``--deadline`` lists the default deadlines, and a gateway call asks for the
  route's deadline;
* ``toolmesh.config.tokens``: the help of ``toolmesh token create`` lists the capabilities;
* ``toolmesh.config.validation`` and ``toolmesh.schema.tool_arguments``: the choices of
  ``--transport`` and the argument types ``tg-set-tool`` lists. They import jsonschema when
  they check something, not when they are imported (jsonschema is in :data:`HEAVY`).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import socket
import subprocess
import sys

import pytest

#: never loaded by building the parser or by a simple command: third-party packages and
#: toolmesh's own heavy parts (each name also stands for its submodules)
HEAVY = (
    "jsonschema", "aiohttp", "mcp", "aio_pika", "pulsar", "asyncpg", "jinja2", "httpx",
    "toolmesh.agent", "toolmesh.mcp", "toolmesh.llm", "toolmesh.prompt", "toolmesh.rpc",
    "toolmesh.tools", "toolmesh.secrets", "toolmesh.runtime", "toolmesh.config.service",
    "toolmesh.config.store.sqlite", "toolmesh.config.store.postgres", "toolmesh.bus.memory", "toolmesh.bus.rabbitmq", "toolmesh.bus.pulsar",
    "toolmesh.gateway.server",
    # the standard library's slow imports, where the command does not need them
    "asyncio", "logging",
)

#: besides HEAVY, not loaded by building the parser alone (--help, --version, a usage error):
#: the HTTP client and what it brings, and importlib.metadata (read by --version only)
CLIENT = ("urllib.request", "http.client", "ssl", "socket", "email", "importlib.metadata")

#: the only modules of these packages that building the parser may load (see the docstring)
ALLOWED_IN = {
    "toolmesh.gateway": {"toolmesh.gateway", "toolmesh.gateway.deadlines"},
    "toolmesh.bus": {"toolmesh.bus", "toolmesh.bus.base", "toolmesh.bus.queue_id"},
}

#: run in a fresh interpreter: call ``MODULE:FUNCTION`` (a console script's entry point)
#: with the remaining arguments as ``sys.argv``, then print the modules it loaded, as JSON
#: on the last line of stderr (also when the command exits, as commands do)
CHILD = """
import atexit, importlib, sys
base = set(sys.modules)

def report():
    loaded = sorted(set(sys.modules) - base)
    import json
    sys.__stderr__.write("\\n" + json.dumps(loaded) + "\\n")

atexit.register(report)
module, _, function = sys.argv[1].partition(":")
sys.argv = sys.argv[2:]
result = getattr(importlib.import_module(module), function)()
if isinstance(result, int):
    sys.exit(result)
"""


def loaded_by(entry: str, *argv: str, env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """Exit status of ``entry`` run with ``argv``, and the modules it loaded."""
    done = subprocess.run([sys.executable, "-c", CHILD, entry, *argv], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env={**_environ(), **(env or {})})
    lines = done.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("["), done.stderr
    return done.returncode, json.loads(lines[-1])


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("TOOLMESH_TOKEN", "TRUSTGRAPH_TOKEN", "TOOLMESH_GATEWAY_TOKEN")}


def offending(loaded: list[str], names: tuple[str, ...]) -> list[str]:
    """The modules of ``loaded`` that are one of ``names`` or inside one of them, and those
    of an :data:`ALLOWED_IN` package that its allow-list leaves out."""
    found = [m for m in loaded if any(m == n or m.startswith(n + ".") for n in names)]
    for package, allowed in ALLOWED_IN.items():
        found += [m for m in loaded if (m == package or m.startswith(package + "."))
                  and m not in allowed]
    return sorted(set(found))


def entry_point(script: str) -> str:
    """The ``MODULE:FUNCTION`` of the console script ``script``."""
    for ep in importlib.metadata.entry_points(group="console_scripts"):
        if ep.name == script and ep.value.startswith("toolmesh."):
            return ep.value
    pytest.skip(f"the {script} script is not installed")


@pytest.fixture(scope="module")
def closed_url() -> str:
    """A gateway URL nothing listens on: a command gets as far as its one HTTP call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/"


def test_building_the_parser_imports_nothing_heavy() -> None:
    # toolmesh.gateway.server, not toolmesh.gateway: see the module's docstring
    heavy = ("jsonschema", "aiohttp", "mcp", "toolmesh.gateway.server", "toolmesh.agent",
             "aio_pika", "asyncio", "toolmesh.mcp", "toolmesh.rpc", "toolmesh.tools")
    code = ("import sys; from toolmesh.cli.main import build_parser; build_parser(); "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_building_the_parser_loads_nothing_it_does_not_need() -> None:
    code, loaded = loaded_by("toolmesh.cli.main:build_parser")
    assert code == 0
    assert offending(loaded, HEAVY + CLIENT) == []


@pytest.mark.parametrize("argv", [
    ["--version"], ["--help"], [], ["config"], ["config", "lsit"], ["run", "joke", "--help"],
    ["serve", "--help"], ["completion", "bash"],
], ids=lambda argv: " ".join(argv) or "(no arguments)")
def test_a_command_that_calls_nothing_imports_no_client(argv: list[str]) -> None:
    code, loaded = loaded_by("toolmesh.cli.main:run", "toolmesh", *argv)
    assert code in (0, 2)
    # --version reads the installed distribution's metadata (importlib.metadata, which
    # parses it with the email package, which imports socket): no HTTP client even so
    unneeded = ("urllib.request", "http.client", "ssl") if argv == ["--version"] else CLIENT
    assert offending(loaded, HEAVY + unneeded) == []


@pytest.mark.parametrize("script, argv", [
    ("toolmesh", ["config", "list", "tool"]),
    ("toolmesh", ["config", "get", "tool/x"]),
    ("toolmesh", ["config", "show"]),
    ("toolmesh", ["tools"]),
    ("toolmesh", ["mcp", "show"]),
    ("toolmesh", ["token", "list"]),
    ("tg-show-config", []),
    ("tg-put-config-item", ["--type", "a", "--key", "b", "--value", "1"]),
    ("tg-get-config-item", ["a/b"]),
    ("tg-list-config-items", ["--type", "a"]),
    ("tg-show-tools", []),
    ("tg-set-tool", ["--id", "t", "--name", "t", "--type", "tool-service", "--service", "s",
                     "--argument", "n:string:a name"]),
    ("tg-show-mcp-tools", []),
    ("tg-set-mcp-tool", ["--id", "m", "--tool-url", "http://127.0.0.1:9/mcp"]),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_gateway_command_imports_only_its_client(script: str, argv: list[str],
                                                   closed_url: str) -> None:
    code, loaded = loaded_by(entry_point(script), script, *argv,
                             env={"TOOLMESH_URL": closed_url, "TRUSTGRAPH_URL": closed_url})
    assert code == 1  # nothing listening: the one-line error, after the imports it needs
    assert "urllib.request" in loaded  # the call was made
    assert offending(loaded, HEAVY) == []


def test_the_public_api_is_there_and_loaded_when_used() -> None:
    code = ("import sys, toolmesh; before = 'asyncio' in sys.modules; "
            "from toolmesh import *; import toolmesh as t; "
            "print(before, sorted(n for n in t.__all__ if n not in dir(t)), "
            "t.DynamicToolService.__module__, t.connect.__module__, t.RequestClient.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["False", "[]", "toolmesh.tools.service", "toolmesh.bus",
                                   "toolmesh.rpc.client"]
