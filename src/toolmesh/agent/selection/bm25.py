"""Okapi BM25 over a few hundred short documents: the lexical half of tool retrieval.

A document is a bag of terms (:mod:`toolmesh.agent.terms`); a query's score for a document sums, over the
query's distinct terms found in it, the term's rarity among the documents (``idf``) times its
frequency in the document, damped (``k1``) and normalised by the document's length (``b``) —
the ranking function of Robertson and Zaragoza, with the parameters most search engines
default to. A document sharing no term with the query scores 0: "no evidence", not "a bad
match".
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

K1 = 1.2
B = 0.75


class Bm25Index:
    """The documents (name -> terms), indexed once; :meth:`scores` ranks them for a query."""

    __slots__ = ("_average", "_idf", "_lengths", "_terms")

    def __init__(self, documents: Mapping[str, Iterable[str]]) -> None:
        self._terms = {name: Counter(terms) for name, terms in documents.items()}
        self._lengths = {name: sum(c.values()) for name, c in self._terms.items()}
        count = len(self._terms)
        self._average = (sum(self._lengths.values()) / count) if count else 1.0
        frequency: Counter[str] = Counter()
        for counts in self._terms.values():
            frequency.update(counts.keys())
        self._idf = {term: math.log(1 + (count - n + 0.5) / (n + 0.5))
                     for term, n in frequency.items()}

    def __len__(self) -> int:
        return len(self._terms)

    def scores(self, query: Iterable[str]) -> dict[str, float]:
        """Every document's score for the query terms (0.0 where none is found)."""
        wanted = {t for t in query if t in self._idf}
        out: dict[str, float] = {}
        for name, counts in self._terms.items():
            score = 0.0
            norm = K1 * (1 - B + B * self._lengths[name] / (self._average or 1.0))
            for term in wanted:
                f = counts.get(term, 0)
                if f:
                    score += self._idf[term] * f * (K1 + 1) / (f + norm)
            out[name] = score
        return out

    def matched(self, name: str, query: Iterable[str]) -> list[str]:
        """The query's terms that document ``name`` holds, in the query's order, once each."""
        counts = self._terms.get(name, Counter())
        return list(dict.fromkeys(t for t in query if t in counts))
