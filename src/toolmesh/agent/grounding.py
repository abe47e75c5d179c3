"""Arguments grounded in the dialog: values that come from the question and the results, not
from the prompt's own text.

A small model copies what it reads last and most clearly, and a tool's prompt is full of text
that looks like a value: ``"..."`` in an example reply, ``e.g. USD`` in a description, the
description itself. Two defences, both against the class of mistake rather than any one tool:

* :func:`ungrounded` — before a call runs, each string value is checked: a known placeholder
  (``...``, ``string``, ``<city>``, ``your_key_here``, a JSON type's name), one of the
  examples a description gives (``e.g. USD``, ``such as km``, ``format: YYYY-MM-DD``), the
  tool's or an argument's name, or text copied from the tool's descriptions is refused —
  unless the question or an earlier result says it too. The model is told which value and
  why, and asked again (:mod:`toolmesh.agent.loop`), within the dialog's step limit, as an
  argument that fails its schema is.
* :func:`spans` — the pieces of the dialog a value may be (each run of up to
  :data:`SPAN_WORDS` words within a sentence that neither begins nor ends with a function
  word, each quoted passage, the text after a colon):
  the ``json`` strategy can hold a string argument to them, so that a small model copies
  ``Madrid`` rather than writing ``Máximilán`` (docs/tool-calling.md has the figures).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from toolmesh.agent.problems import json_path
from toolmesh.agent.terms import STOP_WORDS, examples, terms, words
from toolmesh.agent.tools import Tool
from toolmesh.agent.transcript import Transcript

#: values that stand for a value, whatever the dialog says
PLACEHOLDERS = frozenset({"", "...", "…", "..", "?", "??", "???", "-", "_", "xxx", "n/a",
                          "tbd", "todo", "placeholder", "lorem ipsum", "foo", "bar",
                          "example", "sample", "value", "your value", "string", "str",
                          "text", "number", "integer", "int", "float", "boolean", "bool",
                          "object", "array", "list", "dict", "null", "undefined"})
#: placeholders by shape: <city>, {city}, [city], ${CITY}, %s, your_city_here, YOUR_KEY
_SHAPES = re.compile(r"""^(<[^<>]*>|\{\{?[^{}]*\}?\}|\[[^\[\]]*\]|\$\{?\w+\}?|%[sdf]
                          |(your|my)[\s_-]\w.*|\w.*[\s_-]here|\.{2,}.*|.*\.{3}|x{3,})$""",
                     re.IGNORECASE | re.VERBOSE)
_QUOTED = re.compile(r"'([^']{1,400})'|\"([^\"]{1,400})\"|“([^”]{1,400})”|‘([^’]{1,400})’")
_SENTENCES = re.compile(r"[.!?;\n]+(?:\s+|$)")
_EDGES = "\"'“”‘’()[]{}<>.,!?;:*`"

__all__ = ["dialog_numbers", "dialog_spans", "dialog_text", "examples", "held_schema",
           "numbers", "spans", "ungrounded"]

#: the longest run of words a span is
SPAN_WORDS = 8
#: the most spans a dialog offers (the shortest and the question's first)
MAX_SPANS = 800
#: characters of each result that spans are taken from
RESULT_CHARS = 2000


def dialog_text(transcript: Transcript) -> str:
    """The question and every result the dialog has had, as one text."""
    parts = [transcript.question]
    for turn in transcript.turns:
        parts += [call.observation for call in turn.calls if call.ok]
    return "\n".join(parts)


def _norm(text: str) -> str:
    return " ".join(words(text))


def _said(value: str, said: str) -> bool:
    """Whether ``value`` appears in the dialog (``said``: its words, normalised, between
    spaces), as words, case and punctuation aside."""
    wanted = _norm(value)
    return bool(wanted) and f" {wanted} " in said


def _strings(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, (*path, i))


def _enumerated(schema: Mapping[str, Any]) -> bool:
    return "enum" in schema or "const" in schema


def _argument_schema(tool: Tool, path: tuple[Any, ...]) -> Mapping[str, Any]:
    if not path:
        return {}
    for argument in tool.arguments:
        if argument.name == path[0]:
            return argument.value_schema if len(path) == 1 else {}
    return {}


def ungrounded(tool: Tool, arguments: Any, dialog: str) -> list[str]:
    """Each string value of ``arguments`` that the prompt gave rather than the dialog, as
    ``$.path: why`` lines (empty when every value may go to the tool)."""
    descriptions = [tool.info.description, *(a.description for a in tool.arguments)]
    names = {_norm(tool.name), *(_norm(a.name) for a in tool.arguments)}
    described = {t for d in descriptions for t in terms(d)}
    said = f" {_norm(dialog)} "
    problems = []
    for path, value in _strings(arguments):
        text = value.strip()
        where = json_path(path)
        shown = _shown(text)
        if not _norm(text):  # no word in it: "", "...", "?"
            problems.append(f"{where}: {shown} is a placeholder, not a value")
            continue
        if _said(text, said):
            continue
        schema = _argument_schema(tool, path)
        low = " ".join(text.lower().split())
        if low in PLACEHOLDERS or _SHAPES.match(low):
            problems.append(f"{where}: {shown} is a placeholder, not a value")
        elif _norm(text) in names:
            problems.append(f"{where}: {shown} is a name from the tool's definition, not a "
                            "value")
        elif not _enumerated(schema) and any(
                _norm(text) == _norm(e) for d in descriptions for e in examples(d)):
            problems.append(f"{where}: {shown} is an example from the tool's description, and "
                            "the question does not say it")
        elif _copied(text, descriptions, described, dialog):
            problems.append(f"{where}: {shown} is copied from the tool's description, not "
                            "taken from the question")
    return problems


def _copied(value: str, descriptions: Sequence[str], described: set[str], dialog: str) -> bool:
    """Whether a value (of three words or more) is a passage of one of the tool's
    descriptions, or most of its words come from them and few from the dialog."""
    passage = _norm(value)
    if passage.count(" ") >= 2 and any(f" {passage} " in f" {_norm(d)} " for d in descriptions):
        return True
    mine = terms(value)
    if len(mine) < 3:
        return False
    said = set(terms(dialog))
    from_description = sum(t in described for t in mine)
    from_dialog = sum(t in said for t in mine)
    return from_description >= 0.75 * len(mine) and from_dialog < 0.5 * len(mine)


def _shown(value: str) -> str:
    return repr(value if len(value) <= 60 else value[:57] + "...")


def spans(texts: Iterable[str]) -> list[str]:
    """The pieces of ``texts`` a string argument may be (module docstring), each once, in
    order of appearance, at most :data:`MAX_SPANS`."""
    out: dict[str, None] = {}

    def add(span: str) -> None:
        span = " ".join(span.split()).strip(_EDGES + " ")
        if span and len(out) < MAX_SPANS:
            out.setdefault(span, None)

    for text in texts:
        text = text[:RESULT_CHARS]
        for match in _QUOTED.finditer(text):
            add(next(g for g in match.groups() if g is not None))
        if ":" in text:  # "count the words of: the quick brown fox." -> to its sentence's end
            add(_SENTENCES.split(text.split(":", 1)[1].strip(), maxsplit=1)[0])
        for sentence in _SENTENCES.split(text):
            found = [w.strip(_EDGES) for w in sentence.split()]
            found = [w for w in found if w]
            for length in range(1, SPAN_WORDS + 1):
                for start in range(len(found) - length + 1):
                    run = found[start:start + length]
                    # a run that begins or ends with a function word ("a", "the", "about")
                    # is never the value: a small model picks "a" or "a joke about owls"
                    if run[0].lower() not in STOP_WORDS and run[-1].lower() not in STOP_WORDS:
                        add(" ".join(run))
    return list(out)


def _sources(transcript: Transcript, tool: str | None) -> list[str]:
    """The question, then the dialog's results, the latest first — but ``tool``'s own: a tool
    is not fed its own output (a small model calls ``spell-word`` on ``S-P-E-L-L``, then on
    ``S---P---E---L---L``, each result new, until the step limit)."""
    texts: list[str] = [transcript.question]
    for turn in reversed(transcript.turns):
        texts += [call.observation for call in turn.calls
                  if call.ok and not call.redundant and call.name != tool]
    return texts


def dialog_spans(transcript: Transcript, *, tool: str | None = None) -> list[str]:
    """The spans (:func:`spans`) of the question and the dialog's results (not ``tool``'s),
    the question's first."""
    return spans(_sources(transcript, tool))


_NUMBER = re.compile(r"(?<![\w.])(minus\s+|negative\s+|-)?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w])",
                     re.IGNORECASE)
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
                      "eighty": 80, "ninety": 90, "hundred": 100, "single": 1, "dozen": 12,
                      "couple": 2, "pair": 2})


def numbers(texts: Iterable[str]) -> list[float]:
    """The numbers ``texts`` say, in digits (``12``, ``64.50``, ``1,000``, ``minus 10``) or in
    words (``two``, ``a dozen``), each once, in order of appearance."""
    out: dict[float, None] = {}
    for text in texts:
        text = text[:RESULT_CHARS]
        for match in _NUMBER.finditer(text):
            value = float(match.group(2).replace(",", "") + (match.group(3) or ""))
            out.setdefault(-value if match.group(1) else value, None)
        for word in words(text):
            if word in _NUMBER_WORDS:
                out.setdefault(float(_NUMBER_WORDS[word]), None)
    return list(out)


def dialog_numbers(transcript: Transcript, *, tool: str | None = None) -> list[float]:
    """The numbers (:func:`numbers`) of the question and the dialog's results (not
    ``tool``'s)."""
    return numbers(_sources(transcript, tool))


def held_schema(schema: Mapping[str, Any], strings: Sequence[str],
                figures: Sequence[float], *, said: str = "") -> dict[str, Any]:
    """An arguments schema whose free values must come from the dialog, at any depth: a
    string without ``enum``, ``const``, ``format`` or ``pattern`` one of ``strings``; a number
    or integer without ``enum`` or ``const`` one of ``figures`` (those of its type, within its
    bounds) — where the dialog has any. An optional top-level argument with an ``enum`` one of
    whose values the dialog (``said``) names is required: a small model leaves out the
    ``"km"`` of "the distance in km" otherwise."""
    out = _held(dict(schema), list(strings), list(figures))
    properties = out.get("properties")
    if said and isinstance(properties, dict):
        words_said = f" {_norm(said)} "
        required = list(out.get("required") or ())
        for name, prop in properties.items():
            if name in required or not isinstance(prop, dict):
                continue
            if any(isinstance(v, str) and _norm(v) and f" {_norm(v)} " in words_said
                   for v in prop.get("enum") or ()):
                required.append(name)
        if required:
            out["required"] = required
    return out


def _fits(value: float, schema: Mapping[str, Any]) -> bool:
    if schema.get("type") == "integer" and not float(value).is_integer():
        return False
    low, high = schema.get("minimum"), schema.get("maximum")
    return not (isinstance(low, (int, float)) and value < low
                or isinstance(high, (int, float)) and value > high)


def _held(schema: dict[str, Any], strings: list[str], figures: list[float]) -> dict[str, Any]:
    out = dict(schema)
    kind = out.get("type")
    if kind == "string" and strings and not any(k in out for k in (
            "enum", "const", "format", "pattern")):
        for key in ("minLength", "maxLength"):
            out.pop(key, None)
        out["enum"] = strings
    elif kind in ("number", "integer") and not any(k in out for k in ("enum", "const")):
        allowed = [int(v) if kind == "integer" else v for v in figures if _fits(v, out)]
        if allowed:
            out["enum"] = allowed
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _held(v, strings, figures) if isinstance(v, dict) else v
                             for k, v in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _held(out["items"], strings, figures)
    return out
