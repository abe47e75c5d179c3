"""Which of the offered tools a step shows the model, and why.

Every tool shown costs prompt tokens, and a model — a small one most of all — chooses worse
the more it is shown (docs/tool-calling.md has the figures). So each step shows:

1. **the tools the dialog has used** — called earlier, or found by ``find-tools``: a step
   never loses a tool the model is working with;
2. **the tools that match the dialog** — when some tool shares words with the question
   (BM25 over names, descriptions and argument text, :mod:`.catalogue`), only the tools that
   score at least ``relevance`` times the best one: a tool the question gives no sign of is
   left out (measured on SmolLM2-135M, the right tool went from 13 of 32 to 28 of 32 with
   it); when no tool matches at all, every tool is a candidate — until a call has answered:
   then the tools the dialog used are (a small model otherwise tries every tool shown, one
   after the other, each answering something new);
3. **within the budget** — if the candidates' schemas take more than ``budget`` prompt tokens
   (estimated), the best-ranked that fit: used tools first, then by score (with embeddings,
   the ranks of both scores fused), then by name.

The tools shown are in name order whatever their ranks, so that a step that shows the same
tools as the last one sends the same prompt prefix (the server's prompt cache holds). When a
tool was left out, ``find-tools`` (:mod:`.find_tools`) is shown too, so that a model that
knows what it needs can ask for it in its own words.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolmesh.agent.selection.catalogue import Catalogue
from toolmesh.agent.selection.embeddings import Embedder, VectorCache, cosine
from toolmesh.agent.tools import Tool
from toolmesh.errors import RequestError

log = logging.getLogger("toolmesh.agent")

Method = Literal["bm25", "embeddings", "off"]
METHODS: tuple[str, ...] = ("bm25", "embeddings", "off")

#: prompt tokens (estimated) the tools of one step may take. Measured on SmolLM2-135M, whose
#: choice among tools that match nothing in the question falls with every tool added, in a
#: context of 2,048 tokens (llama-cpp-python's default): about eight typical tools
DEFAULT_BUDGET = 600
#: the share of the best score a tool needs to be shown, when the best one has evidence
DEFAULT_RELEVANCE = 0.5
#: the tools one ``find-tools`` query adds
FOUND_PER_QUERY = 3
#: reciprocal rank fusion's constant (Cormack et al.: 60)
RRF_K = 60


@dataclass(frozen=True, kw_only=True)
class SelectionOptions:
    """How steps select their tools (module docstring); ``method="off"``: every offered tool
    is shown."""

    method: Method = "bm25"
    budget: int = DEFAULT_BUDGET
    relevance: float = DEFAULT_RELEVANCE
    #: when ``find-tools`` is shown beside a selection that left tools out: ``auto``, to
    #: models asked for native tool calls (measured on SmolLM2-135M in ``json`` steps, it
    #: called it with nonsense instead of the tool it was shown); ``on``; ``off``
    find_tools: Literal["auto", "on", "off"] = "auto"


@dataclass(frozen=True, kw_only=True)
class DialogView:
    """What selection reads of a dialog: its question, the tools called so far (in order),
    and what the model asked ``find-tools`` for."""

    question: str
    called: Sequence[str] = ()
    searches: Sequence[str] = ()
    #: some call has run and answered
    answered: bool = False


@dataclass(frozen=True, kw_only=True)
class Offer:
    """The tools a step shows, by name in name order, each with why; ``available``: how many
    it could have shown; ``finder``: whether ``find-tools`` is shown beside them."""

    tools: Mapping[str, Tool]
    reasons: Mapping[str, str]
    available: int
    method: str
    finder: bool = False
    #: each shown tool's retrieval score (the BM25 score, or the fused rank score)
    scores: Mapping[str, float] = field(default_factory=dict)

    @property
    def left_out(self) -> int:
        return self.available - len(self.tools)

    def wire(self) -> dict[str, Any]:
        """As a message and the journal carry it."""
        return {"method": self.method, "available": self.available, "shown": len(self.tools),
                "find_tools": self.finder,
                "tools": [{"name": n, "reason": self.reasons.get(n, ""),
                           "score": round(self.scores.get(n, 0.0), 3)} for n in self.tools]}

    def describe(self) -> str:
        """One line: ``2 of 60 tools (bm25): tell-joke (matched: joke), ...``."""
        shown = ", ".join(f"{n} ({self.reasons[n]})" if self.reasons.get(n) else n
                          for n in self.tools) or "none"
        finder = "; find-tools for the rest" if self.finder else ""
        return f"{len(self.tools)} of {self.available} tools ({self.method}): {shown}{finder}"


class ToolSelector:
    """Selects each step's tools (module docstring); ``embedder``: where embeddings come from
    for ``method="embeddings"`` (without one, or when it fails, BM25 alone)."""

    def __init__(self, options: SelectionOptions = SelectionOptions(), *,
                 embedder: Embedder | None = None) -> None:
        self.options = options
        self.embedder = embedder
        self._vectors = VectorCache()
        self._embeddings_failed = False

    async def select(self, tools: Mapping[str, Tool], *, catalogue: Catalogue,
                     dialog: DialogView) -> Offer:
        """The offer of one step among ``tools`` (those the request's groups and state allow
        and that can work now); ``catalogue``: the tool set's, refreshed."""
        names = sorted(tools)
        options = self.options
        if options.method == "off" or not names:
            return Offer(tools={n: tools[n] for n in names}, available=len(names),
                         reasons={}, method="off")
        scores = catalogue.scores(dialog.question)
        reasons: dict[str, str] = {}
        kept: list[str] = []
        for name in dialog.called:
            if name in tools and name not in kept:
                kept.append(name)
                reasons[name] = "called earlier"
        for search in dialog.searches:
            for name in found(catalogue, search, names):
                if name not in kept:
                    kept.append(name)
                    reasons[name] = f"found by find-tools ({search!r})"
        method = "bm25"
        ranking = dict(scores)
        if options.method == "embeddings":
            fused = await self._fused(tools, catalogue, dialog.question, scores)
            if fused is not None:
                ranking, method = fused, "bm25+embeddings"
        best = max((scores.get(n, 0.0) for n in names), default=0.0)
        if best > 0 and options.relevance > 0:
            candidates = [n for n in names
                          if n in kept or scores.get(n, 0.0) >= options.relevance * best]
            for name in candidates:
                if name not in reasons:
                    matched = catalogue.matched(name, dialog.question)
                    reasons[name] = "matched: " + ", ".join(matched)
        elif dialog.answered and kept:
            candidates = kept
        else:
            candidates = names
        costs = catalogue.costs(candidates)
        if sum(costs.values()) > options.budget:
            ranked = sorted(candidates, key=lambda n: (n not in kept, -ranking.get(n, 0.0), n))
            chosen: list[str] = []
            total = 0
            for name in ranked:
                if chosen and total + costs[name] > options.budget:
                    continue
                chosen.append(name)
                total += costs[name]
            candidates = sorted(chosen)
            for name in candidates:
                reasons.setdefault(name, "ranked within the budget")
        elif len(candidates) == len(names):
            for name in candidates:
                reasons.setdefault(name, "no tool matched: all shown" if best == 0
                                   else "all fit")
        shown = {n: tools[n] for n in sorted(candidates)}
        return Offer(tools=shown, reasons={n: reasons.get(n, "") for n in shown},
                     available=len(names), method=method, finder=len(shown) < len(names),
                     scores={n: ranking.get(n, 0.0) for n in shown})

    async def _fused(self, tools: Mapping[str, Tool], catalogue: Catalogue, question: str,
                     scores: Mapping[str, float]) -> dict[str, float] | None:
        """BM25 and embedding ranks fused (reciprocal rank fusion), or ``None`` when there
        are no embeddings."""
        if self.embedder is None or self._embeddings_failed:
            return None
        names = sorted(tools)
        texts = [catalogue.entries[n].text if n in catalogue.entries else n for n in names]
        try:
            vectors = await self._vectors.vectors(self.embedder, [question, *texts])
        except (RequestError, ValueError) as e:
            self._embeddings_failed = True
            log.warning("tool selection by embeddings is off: the LLM's server gave none (%s); "
                        "BM25 alone selects tools", getattr(e, "message", e))
            return None
        similarity = {n: cosine(vectors[0], v) for n, v in zip(names, vectors[1:], strict=True)}
        fused: dict[str, float] = {n: 0.0 for n in names}
        for ranking in (scores, similarity):
            # a tool a ranking has no evidence for (score 0) gets nothing from it
            order = sorted((n for n in names if ranking.get(n, 0.0) > 0),
                           key=lambda n: (-ranking[n], n))
            for rank, name in enumerate(order):
                fused[name] += 1.0 / (RRF_K + rank + 1)
        return fused


def found(catalogue: Catalogue, query: str, names: Sequence[str]) -> list[str]:
    """The tools (of ``names``) a ``find-tools`` search for ``query`` finds: the best
    :data:`FOUND_PER_QUERY` that match it at all, best first."""
    scores = catalogue.scores(query)
    ranked = sorted((n for n in names if scores.get(n, 0.0) > 0), key=lambda n: (-scores[n], n))
    return ranked[:FOUND_PER_QUERY]
