"""The render worker: a process that compiles and renders prompt templates, one at a time.

Started by :class:`toolmesh.prompt.renderer.RenderPool` as ``python -m toolmesh.prompt.worker
LIMITS_JSON``; it speaks frames on stdin/stdout — a 4-byte big-endian length, then JSON:

* ``{"op": "render", "id", "system", "prompt", "variables"}`` → ``{"ok": [system, prompt]}``
* ``{"op": "check", "sources": [[owner, part, source], ...]}`` → ``{"errors": [msg|null, ...]}``
* any failure → ``{"error": "<message naming the template>"}``; a failure that may leave
  the worker half-changed (a recursion past Python's limit, an error Jinja did not expect)
  adds ``"retire": true``, and the worker exits after that answer

and each answer carries ``"cpu"``: the seconds of CPU the request took here, which, unlike the
time the pool waited for it, a busy machine does not stretch (the pool tells a quick render
from a slow one by it: :mod:`toolmesh.prompt.fair_share`).

It writes ``{"ready": true}`` once it can serve. Why a process: a template is code written by
whoever can put config, and a thread running it can neither be stopped (CPython cannot kill a
thread) nor keep off the GIL the event loop needs. A process can be killed at its time limit,
given a memory limit, and runs at a lower CPU priority than the server it serves. It answers
JSON, never pickle: what comes back from untrusted code is data, never code.
"""

from __future__ import annotations

import functools
import json
import os
import struct
import sys
import time
from typing import Any, BinaryIO

import orjson

from toolmesh.prompt.sandbox import MiB, RenderLimits
from toolmesh.prompt.templates import (
    PromptError,
    PromptTemplate,
    UnsettledRender,
    compile_check,
    set_limits,
)

HEADER = struct.Struct(">I")


def encode(value: Any) -> bytes:
    """``value`` as one frame. orjson, or json for what orjson refuses (integers past 64
    bits, lone surrogates): any value a request's JSON decoded to."""
    try:
        body = orjson.dumps(value)
    except TypeError:
        body = json.dumps(value).encode()
    return HEADER.pack(len(body)) + body


def _read(stream: BinaryIO) -> Any | None:
    """The next frame's value; ``None`` at the end of input (the pool closed the pipe)."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    return decode(stream.read(size))


def decode(body: bytes) -> Any:
    """A frame's value (orjson, or json for what :func:`encode` wrote with it)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


#: an answer's flag: this worker exits after it (the pool replaces it)
RETIRE = "retire"


@functools.lru_cache(maxsize=256)
def _template(id: str, system: str, prompt: str) -> PromptTemplate:
    """The compiled template: each worker compiles a template once, at its first render."""
    return PromptTemplate(id=id, system=system, prompt=prompt)


def _check(owner: str, part: str, source: str) -> str | None:
    try:
        compile_check(owner, part, source)
    except PromptError as e:
        return e.message
    return None


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """The answer to one request (never raises: a failure is an ``error`` answer)."""
    try:
        if request.get("op") == "check":
            return {"errors": [_check(*source) for source in request["sources"]]}
        template = _template(request["id"], request["system"], request["prompt"])
        return {"ok": list(template.render(request["variables"]))}
    except UnsettledRender as e:
        return {"error": e.message, RETIRE: True}
    except PromptError as e:
        return {"error": e.message}
    except MemoryError:
        return {"error": f"template {request.get('id')!r} is too costly to render: it needs "
                         "more memory than --prompt-max-memory allows"}
    except Exception as e:  # a worker answers; it never dies of one template
        # ...but is not trusted with the next: an error Jinja did not expect, like a
        # recursion cut off deep inside it (UnsettledRender), can leave its state
        # half-changed — one such worker later failed a plain `{{ 6*7 }}` ("top-level
        # template code() takes 0 positional arguments"). It answers, then exits, and the
        # pool starts a fresh one.
        return {"error": f"template {request.get('id')!r} failed: {type(e).__name__}: {e}",
                RETIRE: True}


def _limit_memory(mib: int) -> None:
    """Let this process grow by ``mib`` MiB of address space beyond what it holds now; a
    template that needs more fails with :class:`MemoryError` (Linux and macOS)."""
    if not mib:
        return
    try:
        import resource

        with open("/proc/self/statm") as f:
            held = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = held + mib * MiB
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError):
        pass  # no /proc or no rlimits: the time limit still holds


def main() -> None:
    limits = RenderLimits(**json.loads(sys.argv[1]))
    try:
        os.nice(10)  # the server that waits for it comes first
    except (AttributeError, OSError):
        pass
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the answers pipe
    set_limits(limits)
    _limit_memory(limits.max_memory)
    answers.write(encode({"ready": True}))
    answers.flush()
    while (request := _read(requests)) is not None:
        start = time.process_time()
        answer = handle(request)
        answer["cpu"] = time.process_time() - start
        answers.write(encode(answer))
        answers.flush()
        if answer.get(RETIRE):
            break


if __name__ == "__main__":
    main()
