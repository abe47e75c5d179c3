"""Prompt templates: Jinja2 text rendered into a ``(system, prompt)`` pair for the LLM.

Templates come from two places, with one format: the defaults toolmesh ships
(:mod:`toolmesh.prompt.defaults`) and config items of type ``prompt`` — TrustGraph's
``template.<id>`` (or toolmesh's alias ``<id>``), value JSON ``{"prompt": "...",
"response-type": "text" | "json", "system": "..."}``; :mod:`toolmesh.prompt.layout` says which
item gives which template, and applies the workspace's ``system`` item.

Rendering runs in a sandboxed Jinja2 environment because config templates are written by
whoever can put config, not by us. A missing variable is an error that names it (rather than
silently rendering an empty string into the LLM's prompt), output is not HTML-escaped (it
is a prompt, not a web page) and a trailing newline is kept as written. What a render may
cost is bounded (:mod:`toolmesh.prompt.sandbox`); the prompt service renders in worker
processes with a time limit (:mod:`toolmesh.prompt.renderer`), never on its event loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import InitVar, dataclass, field
from typing import Any, Literal, get_args

import jinja2

from toolmesh.errors import ToolmeshError
from toolmesh.prompt.sandbox import (
    BoundedEnvironment,
    LimitExceeded,
    RenderLimits,
    render_bounded,
)
from toolmesh.schema.json_text import JsonTextError, loads

ResponseType = Literal["text", "json"]
RESPONSE_TYPES: tuple[str, ...] = get_args(ResponseType)

#: the config type whose items are prompt templates
CONFIG_TYPE = "prompt"
#: TrustGraph's keys in it: the system prompt, the list of template ids its older clients keep,
#: and the prefix of a template's key (``template.<id>``)
SYSTEM_KEY = "system"
INDEX_KEY = "template-index"
TEMPLATE_PREFIX = "template."


class PromptError(ToolmeshError):
    """A template that cannot be parsed or rendered, an unknown template, or an LLM answer
    that does not have the template's response type."""

    type = "prompt-error"


class UnsettledRender(PromptError):
    """A render cut off deep inside Jinja (a recursion past Python's limit): the process that
    rendered it may be left half-changed, so a render worker is not trusted with another."""


def tojson(value: Any) -> str:
    """JSON text of ``value`` with non-ASCII kept as is (Jinja's own ``tojson`` escapes it,
    and HTML characters too — both only get in a model's way)."""
    return json.dumps(value, ensure_ascii=False)


def _environment(limits: RenderLimits) -> BoundedEnvironment:
    env = BoundedEnvironment(limits=limits)
    env.filters["tojson"] = tojson
    return env


_ENV = _environment(RenderLimits())


def set_limits(limits: RenderLimits) -> None:
    """Render this process's templates within ``limits`` from now on (the render worker's
    start; templates compiled before keep the environment they were compiled in)."""
    global _ENV
    _ENV = _environment(limits)


def compile_check(owner: str, part: str, source: str) -> None:
    """:class:`PromptError` if ``source`` does not compile; what :func:`toolmesh.prompt.layout.load`
    checks each text with when it is not given a check of its own."""
    _compile(owner, part, source)


def _compile(owner: str, part: str, source: str) -> jinja2.Template:
    """``source`` compiled; ``owner`` (``template 'x'``) and ``part`` name it in errors."""
    try:
        return _ENV.from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise PromptError(f"{owner}: syntax error in {part} "
                          f"at line {e.lineno}: {e.message}") from None
    except (RecursionError, SyntaxError) as e:
        # Jinja parses recursively and compiles to Python: nesting too deep for either (a
        # hundred brackets, or blocks beyond Python's limit) is a bad template, not a crash
        # that would stop every other template from applying
        raise PromptError(f"{owner}: {part} cannot be compiled, most likely "
                          f"because it is nested too deeply ({type(e).__name__}: "
                          f"{getattr(e, 'msg', None) or e})") from None


@dataclass(frozen=True, kw_only=True)
class PromptTemplate:
    """One prompt template. Constructing it compiles both texts, so a syntax error surfaces
    here (as :class:`PromptError`) and not on the first request — unless ``checked`` says
    they were compiled already elsewhere (the prompt service compiles config templates in its
    render workers, off its event loop); then they compile at the first :meth:`render`."""

    id: str
    prompt: str
    system: str = ""
    response_type: ResponseType = "text"
    checked: InitVar[bool] = False
    _compiled: list[tuple[jinja2.Template, jinja2.Template]] = field(
        init=False, repr=False, compare=False, default_factory=list)

    def __post_init__(self, checked: bool) -> None:
        if self.response_type not in RESPONSE_TYPES:
            raise PromptError(f"template {self.id!r}: response-type must be one of "
                              f"{', '.join(RESPONSE_TYPES)}, not {self.response_type!r}")
        if not checked:
            self._compile()

    def _compile(self) -> tuple[jinja2.Template, jinja2.Template]:
        if not self._compiled:
            owner = f"template {self.id!r}"
            self._compiled.append((_compile(owner, "system", self.system),
                                   _compile(owner, "prompt", self.prompt)))
        return self._compiled[0]

    def render(self, variables: Mapping[str, Any]) -> tuple[str, str]:
        """``(system, prompt)`` with ``variables`` filled in, in this process (the prompt
        service renders in worker processes: :mod:`toolmesh.prompt.renderer`);
        :class:`PromptError` if one is missing, the template fails or exceeds its
        :class:`~toolmesh.prompt.sandbox.RenderLimits` (those of :func:`set_limits`)."""
        system, prompt = self._compile()
        limits = _ENV.limits
        variables = dict(variables)
        try:
            return (render_bounded(system, variables, limits=limits),
                    render_bounded(prompt, variables, limits=limits))
        except jinja2.UndefinedError as e:
            raise PromptError(f"template {self.id!r}: {e.message} "
                              f"(variables given: {', '.join(sorted(variables)) or 'none'})"
                              ) from None
        except LimitExceeded as e:
            raise PromptError(f"template {self.id!r} is too costly to render: {e}") from None
        except MemoryError:
            raise PromptError(f"template {self.id!r} is too costly to render: it needs more "
                              f"than {limits.max_memory} MiB of memory (--prompt-max-memory)"
                              ) from None
        except jinja2.TemplateError as e:  # SecurityError, a failing filter...
            raise PromptError(f"template {self.id!r} failed: {e.message or type(e).__name__}"
                              ) from None
        except RecursionError as e:  # a macro calling itself
            raise UnsettledRender(f"template {self.id!r} failed: {type(e).__name__}: {e}"
                                  ) from None
        except (TypeError, ValueError, ArithmeticError, LookupError) as e:
            # a variable of the wrong shape (e.g. iterating a number)
            raise PromptError(f"template {self.id!r} failed: {type(e).__name__}: {e}") from None

    @classmethod
    def from_config(cls, id: str, value: str, *, checked: bool = False) -> PromptTemplate:
        """Parse the value of config item ``prompt/template.<id>`` (or ``prompt/<id>``);
        unknown fields are ignored (so that TrustGraph's ``schema`` and ``id`` fields, which
        toolmesh does not use, do no harm). ``checked``: as for the class."""
        if not isinstance(value, str):
            raise PromptError(f"template {id!r}: the config value must be JSON text, "
                              f"not {type(value).__name__}")
        try:
            # never RecursionError or ValueError: one unparsable item must not stop the others
            raw = loads(value, what="the config value")
        except JsonTextError as e:
            raise PromptError(f"template {id!r}: {e}") from None
        if not isinstance(raw, dict):
            raise PromptError(f"template {id!r}: the config value must be a JSON object with "
                              f"'prompt', not {type(raw).__name__}")
        prompt = raw.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise PromptError(f"template {id!r}: 'prompt' is required and must be a non-empty "
                              f"string, not {json.dumps(prompt)}")
        system = raw.get("system")
        if system is None:
            system = ""
        if not isinstance(system, str):
            raise PromptError(f"template {id!r}: 'system' must be a string, not {json.dumps(system)}")
        response_type = raw.get("response-type") or "text"
        return cls(id=id, prompt=prompt, system=system, response_type=response_type,
                   checked=checked)


def system_from_config(value: Any, *,
                       check: Callable[[str, str, str], None] = compile_check) -> str:
    """Parse the value of config item ``prompt/system``: JSON text of a string, as
    ``tg-set-prompt --system`` writes it (``null`` is no system prompt). It is a template too
    (TrustGraph renders it with the request's variables), so a syntax error surfaces here
    (``check``: how it is compiled, :func:`compile_check` by default)."""
    if not isinstance(value, str):
        raise PromptError(f"the system prompt must be JSON text, not {type(value).__name__}")
    try:
        raw = loads(value, what="the system prompt")
    except JsonTextError as e:
        raise PromptError(f"{e}; it must be JSON text of a string, e.g. "
                          f"{json.dumps(json.dumps('You are terse.'))}") from None
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise PromptError(f"the system prompt must be a JSON string, not {type(raw).__name__}")
    check(f"{CONFIG_TYPE}/{SYSTEM_KEY}", "the system prompt", raw)
    return raw


def extract_json(text: str, *, template_id: str) -> str:
    """The JSON value in an LLM's answer, as compact JSON text.

    Models wrap JSON in Markdown fences or add a sentence around it, so this takes the first
    JSON value found from the first ``{`` or ``[`` on. :class:`PromptError` quoting the start
    of the answer if there is none.
    """
    body = text.strip()
    if body.startswith("```"):
        # drop the opening fence line (```json) and everything from the closing fence on
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.split("```", 1)[0]
    decoder = json.JSONDecoder()
    for start, ch in enumerate(body):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(body, start)
            except json.JSONDecodeError:
                continue
            except (RecursionError, ValueError):
                # nested too deep for Python, or an integer over its digit limit: refused
                # here, since retrying from each bracket inside would fail alike, slowly
                raise PromptError(f"template {template_id!r} expects a JSON answer, but the "
                                  "LLM's JSON is nested too deep or holds an integer too long "
                                  "to decode") from None
            return json.dumps(value, ensure_ascii=False)
    try:
        # a bare scalar (a number, a string, true) is JSON too
        return json.dumps(json.loads(body), ensure_ascii=False)
    except ValueError:  # not JSON, or an integer over Python's digit limit
        pass
    excerpt = text.strip()[:80] + ("…" if len(text.strip()) > 80 else "")
    raise PromptError(f"template {template_id!r} expects a JSON answer, but the LLM answered "
                      f"{excerpt!r}")
