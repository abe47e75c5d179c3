"""The terms a text is searched by: words, lower-cased, stemmed, without function words.

``"Tell me some jokes about penguins"`` and ``"tell-joke: Tell a joke on a given topic"`` share
the terms ``tell`` and ``joke``: the Snowball (Porter 2) stemmer folds ``jokes``, ``joking`` and
``joke`` together, and ``population``/``populous`` too; names are split at ``-``, ``_``, ``.``
and camelCase, so ``getWeather`` and ``get_weather`` both yield ``weather``. Function words
(``the``, ``what``, ``please`` …) carry nothing about which tool fits, and would let every tool
match every question a little.
"""

from __future__ import annotations

import re
from functools import lru_cache

import snowballstemmer

_CAMEL = re.compile(r"([a-z])([A-Z])")
_WORD = re.compile(r"[^\W_]+")

#: English words that say nothing about what a tool does (questions, pronouns, auxiliaries,
#: politeness, quantifiers)
STOP_WORDS = frozenset("""
a about above after again all also am an and any anything are as at be because been before
being below between both but by can could d did do does doing done down during each else few
for from further get give got had has have he her here him his how i if in into is it its
itself just know let like ll m many may me might mine more most much must my myself need no
nor not now of on once one only or other our ours out over own please re s same shall she
should so some something such t tell than that the their them then there these they thing
this those through to too under until up us ve very want was we were what whats when where
which while who whom whose why will with would you your yours
""".split())

_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(_stemmer.stemWord(word))


def words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, names split (``getWeather`` -> ``get weather``)."""
    return _WORD.findall(_CAMEL.sub(r"\1 \2", text).lower())


def terms(text: str) -> list[str]:
    """The search terms of ``text``, in order, repeats kept (module docstring)."""
    return [_stem(w) for w in words(text) if w not in STOP_WORDS]


_TOKEN = re.compile(r"[^\s,;:!?()\[\]{}\"'“”‘’]+")
#: what a value looks like, when it looks like a code: ``USD`` and ``GBP`` -> ``#AAA``,
#: ``AAPL`` -> ``#AAAA``, ``BA117`` -> ``#AA999``, ``2024-05-01`` -> ``#9999-99-99``
_CODE = re.compile(r"^(?=.*[A-Z]{2}|.*\d)(?=.*[A-Za-z]|.*[-/:.]\d)[A-Za-z0-9][A-Za-z0-9./:-]{1,15}$")


def shapes(text: str) -> list[str]:
    """The shapes of the code-like values in ``text`` (currency and ticker codes, flight
    numbers, dates, times): a question that says ``GBP`` matches a tool whose description
    says ``e.g. USD`` though no word is shared. Plain words and plain numbers have no shape:
    every question has them."""
    out = []
    for token in _TOKEN.findall(text):
        token = token.strip(".")
        if token.isdigit() or not _CODE.match(token):
            continue
        if token[:1].isupper() and token[1:].islower():
            continue  # a capitalised word
        out.append("#" + "".join("A" if c.isupper() else "a" if c.islower()
                                 else "9" if c.isdigit() else c for c in token))
    return out


#: where a description gives examples: "e.g. USD", "for example Paris", "such as km",
#: "format: YYYY-MM-DD"
_EXAMPLES = re.compile(r"(?:\be\.g\.|\bi\.e\.|\bfor example\b|\bfor instance\b|\bsuch as\b"
                       r"|\bformat\b)\s*[:,]?\s*(.+?)(?=[);]|\.(?:\s|$)|$)", re.IGNORECASE)
_LIST = re.compile(r"\s*(?:,|/|\bor\b|\band\b)\s*", re.IGNORECASE)
_EDGES = "\"'“”‘’()[]{}<>.,!?;:*` "


def examples(description: str) -> list[str]:
    """The example values a description gives (``"... (e.g., programming, animals, food)"``
    -> ``["programming", "animals", "food"]``)."""
    out: list[str] = []
    for match in _EXAMPLES.finditer(description):
        for part in _LIST.split(match.group(1)):
            part = part.strip(_EDGES)
            if part and len(part) <= 40 and part not in out:
                out.append(part)
    return out


_EXAMPLE_CLAUSE = re.compile(r",?\s*\(?\s*(?:e\.g\.|for example|for instance|such as)[^)]*\)?",
                             re.IGNORECASE)


def without_examples(description: str) -> str:
    """``description`` without the clauses that give example values (``"The currency to
    convert from, e.g. USD"`` -> ``"The currency to convert from"``)."""
    return _EXAMPLE_CLAUSE.sub("", description).strip()
