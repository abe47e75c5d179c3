"""The tools of one tool set as retrieval sees them: each tool's search terms, the text an
embedding is made of, and what showing it costs in prompt tokens.

A tool's document is its name (weighted three times), its description (twice), and each
argument's name, description and allowed values (once): a question names what it wants done
("convert", "weather") far more often than an argument. The shapes of the values it documents
(``e.g. USD``: three capitals) are in it too, so that "Change 75 CHF into AUD" finds the
currency converter that never says "change". The catalogue belongs to a
:class:`~toolmesh.agent.toolset.ToolSet`, which is rebuilt on every config or announcement
change, so the index is built once per change — and again only if a tool's description or
arguments change meanwhile (an MCP tool learns its schema from its server on first use).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from toolmesh.agent.selection.bm25 import Bm25Index
from toolmesh.agent.terms import examples, shapes, terms
from toolmesh.agent.tools import Tool

#: characters per prompt token, for a tool's JSON Schema (measured with SmolLM2's tokenizer on
#: tool specs: 3.5–3.9; GPT-style tokenizers are close), rounded down: better to overcount
CHARS_PER_TOKEN = 3.5
#: how many times a tool's name, description and argument text count in its document
WEIGHTS = {"name": 3, "description": 2, "arguments": 1}


@dataclass(frozen=True, slots=True)
class Entry:
    """One tool as retrieval sees it."""

    name: str
    #: the text an embedding of the tool is made of
    text: str
    #: the prompt tokens showing it costs (estimated)
    cost: int


def describe(tool: Tool) -> tuple[str, str, str]:
    """The tool's name, description and argument text, as retrieval reads them."""
    parts: list[str] = []
    for argument in tool.arguments:
        parts += [argument.name, argument.description]
        parts += [str(v) for v in argument.value_schema.get("enum") or () if v is not None]
    return tool.name, tool.info.description, " ".join(p for p in parts if p)


def example_values(tool: Tool) -> list[str]:
    """The values the tool documents for its arguments (``e.g.`` in a description, a
    schema's ``examples``, ``default`` and ``enum``): their shapes match a question's codes."""
    out: list[str] = []
    for argument in tool.arguments:
        schema = argument.value_schema
        out += examples(argument.description)
        out += [str(v) for v in (*(schema.get("examples") or ()), *(schema.get("enum") or ()))]
        if "default" in schema:
            out.append(str(schema["default"]))
    return out + examples(tool.info.description)


def query_terms(query: str) -> list[str]:
    """The terms a query is searched by: its words (:func:`toolmesh.agent.terms.terms`) and the shapes of
    its codes (:func:`toolmesh.agent.terms.shapes`)."""
    return terms(query) + shapes(query)


def cost(tool: Tool) -> int:
    """The prompt tokens showing ``tool`` costs: its name, description and argument schema as
    a function definition, estimated from its length."""
    spec = {"name": tool.name, "description": tool.info.description,
            "parameters": tool.parameters()}
    return math.ceil(len(json.dumps(spec, ensure_ascii=False)) / CHARS_PER_TOKEN)


def _signature(tool: Tool) -> tuple[Any, ...]:
    return (tool.info.description, tool.arguments)


class Catalogue:
    """The retrieval view of a tool set's tools (module docstring): :meth:`refresh` it with the
    tools before reading; it rebuilds only what changed."""

    def __init__(self) -> None:
        self._signatures: dict[str, tuple[Any, ...]] = {}
        self.entries: dict[str, Entry] = {}
        self._index = Bm25Index({})

    def refresh(self, tools: Iterable[Tool]) -> None:
        """Index ``tools`` (all of the tool set's: its rarity statistics span them all)."""
        tools = list(tools)
        signatures = {t.name: _signature(t) for t in tools}
        if signatures == self._signatures:
            return
        documents: dict[str, list[str]] = {}
        entries: dict[str, Entry] = {}
        for tool in tools:
            name, description, arguments = describe(tool)
            documents[name] = (terms(name) * WEIGHTS["name"]
                               + terms(description) * WEIGHTS["description"]
                               + terms(arguments) * WEIGHTS["arguments"]
                               + sorted(set(shapes(" ".join(example_values(tool))))))
            entries[name] = Entry(name=name, text=f"{name}: {description} {arguments}".strip(),
                                  cost=cost(tool))
        self._index = Bm25Index(documents)
        self.entries = entries
        self._signatures = signatures

    def scores(self, query: str) -> dict[str, float]:
        """Each tool's BM25 score for ``query``: its words, and the shapes of its codes."""
        return self._index.scores(query_terms(query))

    def matched(self, name: str, query: str) -> list[str]:
        """The words of ``query`` (stemmed) that tool ``name``'s document holds, and its
        values shaped like the tool's examples (``GBP`` for ``e.g. USD``)."""
        found = self._index.matched(name, query_terms(query))
        codes: dict[str, list[str]] = {}
        for token in query.split():
            for shape in shapes(token):
                codes.setdefault(shape, []).append(token.strip(".,;:!?()\"'"))
        return [", ".join(codes.get(t, [t])) if t.startswith("#") else t for t in found]

    def costs(self, names: Iterable[str]) -> Mapping[str, int]:
        return {n: self.entries[n].cost if n in self.entries else 0 for n in names}
