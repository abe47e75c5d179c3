"""``ScriptedLLM``: an LLM provider that answers from a script — for tests and offline demos.

Public API on purpose (like pydantic-ai's ``TestModel``): test your own agents and prompts
with it, and check in :attr:`ScriptedLLM.prompts` the exact text the LLM was given.

Which answer a prompt gets:

1. the first :class:`Rule` whose ``pattern`` (a regular expression, ``re.S``) is found in the
   prompt;
2. otherwise the next unused entry of ``responses`` (a queue, used in order, each once);
3. otherwise ``default``;
4. otherwise :class:`LLMError` ("no response for this prompt").

A chat request (:meth:`ScriptedLLM.chat`) is matched the same way: a request of one system
and one user message as ``(system, prompt)``, a longer conversation by its transcript — one
``role: content`` line block per message after the system one. A response given in Python may
be a :class:`~toolmesh.llm.base.Completion` instead of text: its tool calls are the reply's.
The scripted model says it follows the ``react`` text protocol (:attr:`ScriptedLLM.tool_calling`),
so an agent on ``auto`` asks it in that protocol without probing; ``tool_calling="json"`` or
``"native"`` makes it claim the other strategies, for testing them with scripted replies.

Placeholders: a response may contain ``{name}`` where ``name`` is a named group of the rule's
match, ``prompt`` or ``system``; it is replaced by that text (an unmatched group by ""). Every
other brace is kept as it is, so JSON needs no escaping: ``{"a": {"b": 1}}`` stays intact
(JSON keys are quoted, and ``{"b"`` is no placeholder). To write a placeholder literally,
double its braces: ``{{prompt}}`` becomes ``{prompt}``. Format specs (``{x:>5}``) are not
supported.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from toolmesh.llm.base import TOOL_CALLING, Completion, CompletionStream, LLMError, ToolCalling
from toolmesh.llm.chat import ChatRequest

#: ``{{name}}`` (an escaped placeholder) or ``{name}``
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}|\{(\w+)\}")
#: a word with the whitespace after it, or leading whitespace: the pieces join to the text
_WORDS = re.compile(r"\S+\s*|\s+")

FILE_KEYS = ("responses", "rules", "default", "chunk_size", "delay", "pace")


@dataclass(frozen=True, slots=True)
class Rule:
    """Answer ``response`` to every prompt in which the regex ``pattern`` is found."""

    pattern: str
    response: str


class ScriptedLLM:
    """An :class:`~toolmesh.llm.base.LLMProvider` that answers from a script (module docstring).

    ``chunk_size`` makes :meth:`stream` yield fixed-size pieces instead of words; ``delay``
    waits that many seconds before each answer, to simulate a slow model; ``pace`` streams a
    piece every that many seconds, as a model writes (one that fell behind is not made to
    wait: what the model wrote meanwhile is all there at once). Token counts are
    word counts (a stand-in, so code that passes them on can be tested); the model is
    ``"scripted"``.
    """

    def __init__(self, responses: Sequence[str | Completion] = (), *, rules: Sequence[Rule] = (),
                 default: str | None = None, chunk_size: int | None = None,
                 delay: float = 0.0, pace: float = 0.0, name: str | None = None,
                 tool_calling: ToolCalling = "react") -> None:
        if tool_calling not in TOOL_CALLING:
            raise ValueError(f"tool_calling must be one of {', '.join(TOOL_CALLING)}, "
                             f"not {tool_calling!r}")
        if chunk_size is not None and chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, not {chunk_size!r}")
        if not pace >= 0:
            raise ValueError(f"pace must be 0 or more seconds, not {pace!r}")
        self._rules = [(_compile(rule.pattern), rule.response) for rule in rules]
        self._queue: deque[str | Completion] = deque(responses)
        #: the tool-calling strategy this model is known to follow (no probing needed)
        self.tool_calling: ToolCalling = tool_calling
        #: every chat request received, in order
        self.requests: list[ChatRequest] = []
        self.default = default
        self.chunk_size = chunk_size
        self.delay = delay
        self.pace = pace
        self.name = name or f"scripted ({len(self._queue)} responses, {len(self._rules)} rules)"
        #: every ``(system, prompt)`` received, in order (also those that got no answer)
        self.prompts: list[tuple[str, str]] = []

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedLLM:
        """Load a script: ``{"responses": [...], "rules": [{"match": "...", "response":
        "..."}], "default": "..."}`` (every key optional; also ``chunk_size``, ``delay``,
        ``pace``)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise LLMError(f"cannot read the LLM script {str(path)!r}: {e.strerror or e}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise LLMError(f"the LLM script {str(path)!r} is not valid JSON: {e}") from None
        try:
            return cls(**_script_options(data), name=f"scripted {path}")
        except (LLMError, ValueError) as e:
            raise LLMError(f"the LLM script {str(path)!r} is invalid: {e}") from None

    @property
    def remaining(self) -> tuple[str | Completion, ...]:
        """The queued ``responses`` not used yet."""
        return tuple(self._queue)

    async def complete(self, *, system: str, prompt: str) -> Completion:
        """The scripted answer to ``prompt``."""
        answer = self._answer(system, prompt)
        if self.delay > 0:
            await asyncio.sleep(self.delay)  # simulated latency, not polling
        return self._completion(system, prompt, answer)

    def stream(self, *, system: str, prompt: str) -> CompletionStream:
        """The scripted answer in chunks (words with their whitespace, or ``chunk_size``)."""
        # Chosen now, not on first iteration, so the order of answers is the order of calls.
        answer = self._answer(system, prompt)
        return CompletionStream(self._chunks(self._completion(system, prompt, answer)))

    def chat(self, request: ChatRequest) -> CompletionStream:
        """The scripted answer to a chat request, matched on its transcript (module
        docstring); recorded in :attr:`requests`."""
        self.requests.append(request)
        system, prompt = transcript(request)
        answer = self._answer(system, prompt)
        return CompletionStream(self._chunks(self._completion(system, prompt, answer)))

    async def models(self) -> list[dict[str, str]]:
        """The one model this provider is (``list-models``): ``scripted``."""
        return [{"id": "scripted", "owned_by": "toolmesh",
                 "description": "answers from a script (for tests and demos)"}]

    async def close(self) -> None:
        """Nothing to release."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"ScriptedLLM({self.name!r})"

    def _answer(self, system: str, prompt: str) -> str | Completion:
        self.prompts.append((system, prompt))
        values = {"prompt": prompt, "system": system}
        for pattern, response in self._rules:
            match = pattern.search(prompt)
            if match is not None:
                groups = {k: v or "" for k, v in match.groupdict().items()}
                return fill(response, {**values, **groups})
        if self._queue:
            queued = self._queue.popleft()
            return queued if isinstance(queued, Completion) else fill(queued, values)
        if self.default is not None:
            return fill(self.default, values)
        raise LLMError(f"the scripted LLM has no response for this prompt: {prompt[:200]!r}")

    def _completion(self, system: str, prompt: str, answer: str | Completion) -> Completion:
        text = answer.text if isinstance(answer, Completion) else answer
        calls = answer.tool_calls if isinstance(answer, Completion) else ()
        return Completion(text=text, in_tokens=len(system.split()) + len(prompt.split()),
                          out_tokens=len(text.split()) + len(calls), model="scripted",
                          tool_calls=calls, finish_reason="tool_calls" if calls else "stop")

    async def _chunks(self, answer: Completion) -> AsyncIterator[str | Completion]:
        if self.delay > 0:
            await asyncio.sleep(self.delay)
        text = answer.text
        if self.chunk_size is None:
            pieces = _WORDS.findall(text)
        else:
            pieces = [text[i:i + self.chunk_size] for i in range(0, len(text), self.chunk_size)]
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i, piece in enumerate(pieces):
            # the model writes piece i at start + i * pace; what it wrote while nobody read
            # is all there at the next read, as a socket would have buffered it
            if self.pace > 0 and (wait := start + i * self.pace - loop.time()) > 0:
                await asyncio.sleep(wait)
            yield piece
        yield answer


def transcript(request: ChatRequest) -> tuple[str, str]:
    """``(system, prompt)`` of a chat request, as a scripted model matches it: the system
    message, and the one user message — or, for a longer conversation, every message after
    the system one as ``role: content`` blocks (a tool call as ``call NAME ARGUMENTS``)."""
    messages = list(request.messages)
    system = messages.pop(0).content if messages and messages[0].role == "system" else ""
    if len(messages) == 1 and messages[0].role == "user":
        return system, messages[0].content
    blocks = []
    for m in messages:
        calls = "".join(f"\ncall {c.name} {c.arguments}" for c in m.tool_calls)
        blocks.append(f"{m.role}: {m.content}{calls}")
    return system, "\n\n".join(blocks)


def fill(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}`` for each name in ``values``; ``{{name}}`` gives ``{name}``; every
    other brace is left alone (see the module docstring)."""

    def replace(m: re.Match[str]) -> str:
        escaped, name = m.group(1), m.group(2)
        if escaped is not None:
            return "{" + escaped + "}" if escaped in values else m.group(0)
        return values[name] if name in values else m.group(0)

    return _PLACEHOLDER.sub(replace, template)


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.DOTALL)
    except re.error as e:
        raise LLMError(f"invalid rule pattern {pattern!r}: {e}") from None


def _script_options(data: Any) -> dict[str, Any]:
    """The constructor arguments a script file describes, checked."""
    if not isinstance(data, dict):
        raise LLMError(f"it must be a JSON object with keys {', '.join(FILE_KEYS)}")
    unknown = sorted(set(data) - set(FILE_KEYS))
    if unknown:
        raise LLMError(f"unknown key(s) {', '.join(map(repr, unknown))}; "
                       f"accepted: {', '.join(FILE_KEYS)}")
    responses = data.get("responses", [])
    if not isinstance(responses, list) or not all(isinstance(r, str) for r in responses):
        raise LLMError("'responses' must be a list of strings")
    if not isinstance(data.get("rules", []), list):
        raise LLMError("'rules' must be a list of {\"match\", \"response\"} objects")
    rules = []
    for i, rule in enumerate(data.get("rules", [])):
        if (not isinstance(rule, dict) or not isinstance(rule.get("match"), str)
                or not isinstance(rule.get("response"), str)):
            raise LLMError(f"rule {i} must be {{\"match\": \"<regex>\", \"response\": \"<text>\"}}")
        rules.append(Rule(rule["match"], rule["response"]))
    default = data.get("default")
    if default is not None and not isinstance(default, str):
        raise LLMError("'default' must be a string")
    chunk_size = data.get("chunk_size")
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool)):
        raise LLMError("'chunk_size' must be an integer")
    delay = data.get("delay", 0.0)
    if not isinstance(delay, (int, float)) or isinstance(delay, bool):
        raise LLMError("'delay' must be a number of seconds")
    pace = data.get("pace", 0.0)
    if not isinstance(pace, (int, float)) or isinstance(pace, bool) or not pace >= 0:
        raise LLMError("'pace' must be a number of seconds, 0 or more")
    return {"responses": responses, "rules": rules, "default": default,
            "chunk_size": chunk_size, "delay": float(delay), "pace": float(pace)}
