"""Tool selection (issue 41, item 1): which tools a step shows, why, and in what order —
against real tool objects and the real BM25 index; embeddings from a fixed table."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from tests.agent.named import tool
from toolmesh.agent.selection import (
    Catalogue,
    DialogView,
    FindTools,
    SelectionOptions,
    ToolSelector,
)
from toolmesh.agent.selection.bm25 import Bm25Index
from toolmesh.agent.selection.catalogue import cost
from toolmesh.agent.terms import examples, shapes, terms, without_examples
from toolmesh.agent.tools import Tool
from toolmesh.agent.tools.base import Call
from toolmesh.errors import RequestError




def arg(name: str, description: str = "", **extra: object) -> dict:  # type: ignore[type-arg]
    return {"name": name, "type": "string", "description": description, **extra}


TOOLS = {t.name: t for t in [
    tool("tell-joke", "Tell a joke on a given topic",
         arg("topic", "The topic for the joke (e.g., programming, animals, food)")),
    tool("get-weather", "Look up the current weather in a city", arg("city", "The city")),
    tool("convert-currency", "Convert an amount of money from one currency to another",
         {"name": "amount", "type": "number", "description": "How much"},
         arg("source", "The currency to convert from, e.g. USD"),
         arg("target", "The currency to convert to, e.g. EUR")),
    tool("count-words", "Count the words in a text", arg("text", "The text")),
    tool("translate", "Translate a text", arg("language", "Into which", enum=["French",
                                                                              "German"])),
]}


def catalogue(tools: dict[str, Tool] = TOOLS) -> Catalogue:
    c = Catalogue()
    c.refresh(tools.values())
    return c


async def select(question: str, *, tools: dict[str, Tool] = TOOLS,
                 options: SelectionOptions = SelectionOptions(), called: Sequence[str] = (),
                 searches: Sequence[str] = (), embedder: object = None,
                 answered: bool = False) -> dict[str, str]:
    offer = await ToolSelector(options, embedder=embedder).select(  # type: ignore[arg-type]
        tools, catalogue=catalogue(tools),
        dialog=DialogView(question=question, called=called, searches=searches,
                          answered=answered))
    return dict(offer.reasons)


def test_terms_fold_word_forms_and_drop_function_words() -> None:
    assert terms("Tell me some jokes about penguins") == ["joke", "penguin"]
    assert terms("getWeather get_weather tell-joke") == ["weather", "weather", "joke"]
    assert terms("How populous is Nigeria?")[0] == terms("population")[0]


def test_codes_are_matched_by_their_shape_and_examples_are_read_from_descriptions() -> None:
    assert shapes("Convert 250 GBP to JPY on 2024-05-01, flight BA117") == [
        "#AAA", "#AAA", "#9999-99-99", "#AA999"]
    assert shapes("Hello World, 42 times, e.g. this") == []
    assert examples("The topic (e.g., programming, animals, food)") == [
        "programming", "animals", "food"]
    assert examples("Date (optional, format: YYYY-MM-DD)") == ["YYYY-MM-DD"]
    assert without_examples("The currency to convert from, e.g. USD") == \
        "The currency to convert from"


def test_bm25_scores_rare_shared_words_highest_and_no_shared_word_zero() -> None:
    index = Bm25Index({"a": ["joke", "topic"], "b": ["weather", "city", "topic"],
                       "c": ["weather", "forecast"]})
    scores = index.scores(["weather", "forecast"])
    assert scores["c"] > scores["b"] > scores["a"] == 0.0
    assert index.matched("b", ["weather", "forecast", "weather"]) == ["weather"]


async def test_a_question_with_evidence_is_shown_the_tools_that_match_it() -> None:
    assert await select("Tell me a joke about penguins") == {"tell-joke": "matched: joke"}
    # a code shaped like a description's example is evidence too
    assert await select("I have 1000 INR, what is that in CAD?") == {
        "convert-currency": "matched: INR, CAD"}
    # an enum value is part of a tool's text
    assert list(await select("Say it in German")) == ["translate"]


async def test_without_evidence_every_tool_that_fits_is_shown_in_name_order() -> None:
    reasons = await select("How warm is it in Reykjavik?")
    assert list(reasons) == sorted(TOOLS)
    assert set(reasons.values()) == {"no tool matched: all shown"}
    # once a call has answered, a dialog without evidence keeps to the tools it used
    assert await select("How warm is it in Reykjavik?", called=["get-weather"],
                        answered=True) == {"get-weather": "called earlier"}
    assert list(await select("How warm is it in Reykjavik?", called=["count-words"])) == \
        sorted(TOOLS)  # its call failed: the model may try another
    # with the relevance cut off, every tool is shown even when one matches
    assert list(await select("Tell me a joke", options=SelectionOptions(relevance=0))) == \
        sorted(TOOLS)
    off = await ToolSelector(SelectionOptions(method="off")).select(
        TOOLS, catalogue=catalogue(), dialog=DialogView(question="Tell me a joke"))
    assert list(off.tools) == sorted(TOOLS) and off.left_out == 0 and off.method == "off"


async def test_the_budget_keeps_the_best_ranked_and_the_tools_the_dialog_used() -> None:
    costs = {name: cost(t) for name, t in TOOLS.items()}
    budget = costs["convert-currency"] + costs["tell-joke"]
    options = SelectionOptions(budget=budget, relevance=0)
    reasons = await select("Convert 5 USD into EUR, then a joke", options=options)
    assert list(reasons) == ["convert-currency", "tell-joke"]
    assert all(r == "ranked within the budget" for r in reasons.values())
    # a tool the dialog called stays, whatever the question scores it
    reasons = await select("Convert 5 USD into EUR, then a joke", options=options,
                           called=["count-words"])
    assert reasons["count-words"] == "called earlier" and "convert-currency" in reasons


async def test_a_find_tools_search_adds_what_it_found() -> None:
    reasons = await select("Tell me a joke", searches=["count words"])
    assert reasons == {"count-words": "found by find-tools ('count words')",
                       "tell-joke": "matched: joke"}
    finder = FindTools(TOOLS, catalogue())
    found = await finder.invoke({"query": "convert money"}, Call(user="u", timeout=1))
    assert found.startswith("Found 1 tool(s) for 'convert money'") and "convert-currency:" in found
    assert "amount (number, " not in found or "source (string" in found
    assert (await finder.invoke({"query": "zebra"}, Call(user="u", timeout=1))).startswith(
        "No tool matches 'zebra'")


async def test_the_offer_says_what_was_shown_and_why() -> None:
    offer = await ToolSelector().select(TOOLS, catalogue=catalogue(),
                                        dialog=DialogView(question="count the words please"))
    assert offer.left_out == 4 and offer.finder
    assert offer.describe() == ("1 of 5 tools (bm25): count-words (matched: count, word); "
                                "find-tools for the rest")
    wire = offer.wire()
    assert wire["tools"][0]["name"] == "count-words" and wire["tools"][0]["score"] > 0
    assert json.loads(json.dumps(wire)) == wire


class Table:
    """Embeddings from a fixed table: a vector per word, a text's the sum of its words'."""

    VECTORS = {"warm": (1.0, 0.0), "weather": (1.0, 0.0), "raining": (0.9, 0.1),
               "money": (0.0, 1.0), "currency": (0.0, 1.0)}

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.asked: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.asked.append(list(texts))
        if self.fail:
            raise RequestError("no /embeddings here", type="llm-refused")
        out = []
        for text in texts:
            x = y = 0.0
            for word in text.lower().replace("?", " ").replace("-", " ").split():
                dx, dy = self.VECTORS.get(word, (0.0, 0.0))
                x, y = x + dx, y + dy
            out.append([x, y])
        return out


async def test_embeddings_rank_what_no_word_matches_and_are_asked_once_per_tool() -> None:
    table = Table()
    options = SelectionOptions(method="embeddings", budget=cost(TOOLS["get-weather"]) + 1,
                               relevance=0)
    selector = ToolSelector(options, embedder=table)
    offer = await selector.select(TOOLS, catalogue=catalogue(),
                                  dialog=DialogView(question="How warm is it?"))
    assert list(offer.tools) == ["get-weather"] and offer.method == "bm25+embeddings"
    await selector.select(TOOLS, catalogue=catalogue(),
                          dialog=DialogView(question="Is it raining?"))
    # the tools' vectors were kept: the second step asked for its question's alone
    assert len(table.asked[0]) == 1 + len(TOOLS) and table.asked[1] == ["Is it raining?"]


async def test_without_embeddings_bm25_alone_selects(caplog: pytest.LogCaptureFixture) -> None:
    table = Table(fail=True)
    selector = ToolSelector(SelectionOptions(method="embeddings"), embedder=table)
    for _ in range(2):
        offer = await selector.select(TOOLS, catalogue=catalogue(),
                                      dialog=DialogView(question="a joke please"))
        assert offer.method == "bm25" and list(offer.tools) == ["tell-joke"]
    assert len(table.asked) == 1  # not asked again after it failed
    assert "tool selection by embeddings is off" in caplog.text


def test_the_index_is_rebuilt_only_when_a_tool_changes() -> None:
    c = catalogue()
    index = c._index
    c.refresh(TOOLS.values())
    assert c._index is index
    changed = {**TOOLS, "count-words": tool("count-words", "Count the letters of a text")}
    c.refresh(changed.values())
    assert c._index is not index and c.scores("letters")["count-words"] > 0
