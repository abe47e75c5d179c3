"""What each OpenAI-compatible server accepts, in one table.

Servers that speak OpenAI's chat-completions API differ in what they accept around tool
calling and structured output. Rather than special cases spread through the code, each
difference is a field of :class:`Quirks`, and :data:`TABLE` says, per server, which apply.
The provider learns which server it talks to once, from ``GET /v1/models``
(:func:`identify`), or from the operator (``--llm-server``).

Each entry was seen on the server itself or in its documentation and bug reports:

* **llama-cpp-python** (``owned_by: "me"``): validates an assistant message's ``content`` as a
  string, so a tool-call message with ``content: null`` is an HTTP 500 (what breaks
  pydantic-ai on it); takes a schema only as ``{"type": "json_object", "schema": ...}`` (the
  ``json_schema`` form is an HTTP 500); its ``chatml-function-calling`` format renders no
  ``tool`` messages, so a model there never sees a tool's result unless it comes as a user
  message; ``tool_choice: "required"`` is an HTTP 500; asked to stream a reply that calls a
  tool there, it closes the connection without a word, so requests with tools are not
  streamed.
* **Ollama** (``owned_by: "library"``): ignores ``tool_choice``; a model without tool support
  answers HTTP 400 to ``tools``; ``content`` must be a string, never a list of parts.
* **vLLM** (``owned_by: "vllm"``): ``tool_choice: "auto"`` needs the server started with
  ``--enable-auto-tool-choice`` (else HTTP 400); a named tool choice works either way.
* **llama.cpp's llama-server** (``owned_by: "llamacpp"``): ``tools`` only with ``--jinja``.
* **OpenAI** and anything not recognised: the API as OpenAI documents it.

One quirk depends on how the server was started, so it is found by trying (:func:`escapes`):
llama-cpp-python's ``chatml-function-calling`` format HTML-escapes every message before the
model reads it (its template engine has autoescaping on), so a model there reads
``&#34;thought&#34;`` for ``"thought"`` and ``It&#39;s`` for ``It's`` — and writes them back.
Against such a server the text sent has ``" ' < > &`` replaced by look-alike characters
(:data:`LOOKALIKES`), which reach the model unharmed.

What a server *cannot* do (no tool calls at all, a schema ignored) is not a quirk: the agent
finds that out by trying (:mod:`toolmesh.llm.detect`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

SchemaForm = Literal["json_schema", "json_object"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Quirks:
    """How to speak to one kind of server."""

    #: the server kind, as :func:`identify` names it
    kind: str
    #: an assistant message that only calls tools carries ``content: ""``, not ``null``
    empty_content_with_tool_calls: bool = False
    #: how a response schema is sent: OpenAI's ``{"type": "json_schema", "json_schema":
    #: {"name", "schema"}}``, or ``{"type": "json_object", "schema": ...}``
    schema_form: SchemaForm = "json_schema"
    #: tool results go as user messages (``Result of TOOL: ...``), not ``tool`` messages
    tool_results_as_user: bool = False
    #: ``tool_choice: "required"`` is understood (else the agent does without it)
    tool_choice_required: bool = True
    #: the server may HTML-escape what the model reads: find out with :func:`escapes`
    may_escape: bool = False
    #: a request with tools may be streamed (else it is asked whole, and the text is passed
    #: on in one piece)
    streams_tool_calls: bool = True

    def response_format(self, schema: Mapping[str, Any], *, name: str = "reply") -> dict[str, Any]:
        """The ``response_format`` field that asks this server for JSON matching ``schema``."""
        if self.schema_form == "json_object":
            return {"type": "json_object", "schema": dict(schema)}
        return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema)}}


OPENAI = Quirks(kind="openai")

#: server kind -> its quirks
TABLE: Mapping[str, Quirks] = {
    q.kind: q for q in (
        OPENAI,
        Quirks(kind="llama-cpp-python", empty_content_with_tool_calls=True,
               schema_form="json_object", tool_results_as_user=True,
               tool_choice_required=False, may_escape=True, streams_tool_calls=False),
        Quirks(kind="ollama", tool_choice_required=False),
        Quirks(kind="vllm"),
        Quirks(kind="llama.cpp"),
    )}

#: ``owned_by`` of ``GET /v1/models`` -> server kind
_OWNERS = {"me": "llama-cpp-python", "library": "ollama", "ollama": "ollama", "vllm": "vllm",
           "llamacpp": "llama.cpp"}


def identify(models: Any) -> str:
    """The server kind a ``GET /v1/models`` body reveals (``openai`` when nothing does)."""
    data = models.get("data") if isinstance(models, dict) else None
    if isinstance(data, list):
        for entry in data:
            owner = entry.get("owned_by") if isinstance(entry, dict) else None
            if isinstance(owner, str) and owner in _OWNERS:
                return _OWNERS[owner]
    return OPENAI.kind


#: what an escaping server would mangle, and the characters sent instead
LOOKALIKES = str.maketrans({'"': "\u201d", "'": "\u2019", "<": "\u2039", ">": "\u203a",
                            "&": "\uff06"})
#: the probe: a message of quotes, which an escaping server makes at least twice as long
PROBE = '"' * 32


def escapes(tokens_empty: int, tokens_quotes: int) -> bool:
    """Whether a server HTML-escapes messages, from the prompt tokens it counted for an empty
    user message and for one of :data:`PROBE`: unescaped, 32 quotes are at most 32 tokens;
    escaped (``&#34;``), well over 64."""
    return tokens_quotes - tokens_empty > 48


def quirks_of(kind: str) -> Quirks:
    """The quirks of server ``kind``; OpenAI's for a kind not in the table."""
    return TABLE.get(kind, OPENAI)
