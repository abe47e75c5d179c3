"""The tools and questions of the tool-choice benchmark (see the package docstring).

A tool is a ``tool`` config item's fields (name, description, arguments) and the function that
answers its calls; a case is a question, the tool it needs (``None``: none, the model should
answer itself), the arguments it should be called with, and the fact the answer should pass
on (the result of the right call, worked out by the same function).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Result = Callable[[Mapping[str, Any]], tuple[str, str]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    arguments: list[dict[str, Any]]
    #: arguments -> (the observation, the fact an answer grounded in it repeats)
    answer: Result


@dataclass(frozen=True)
class Case:
    question: str
    tool: str | None
    arguments: Mapping[str, Any] = field(default_factory=dict)


def arg(name: str, type: str, description: str, *, required: bool = True,
        **schema: Any) -> dict[str, Any]:
    out = {"name": name, "type": type, "description": description, **schema}
    if required:
        out["required"] = True
    return out


def _digest(*parts: Any) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:8], 16)


def _words(text: Any) -> str:
    return " ".join(str(text).split())


# -- the bench set: reported, never tuned on ----------------------------------------------

CAPITALS = {"kenya": "Nairobi", "peru": "Lima", "norway": "Oslo", "vietnam": "Hanoi",
            "chile": "Santiago", "egypt": "Cairo", "portugal": "Lisbon",
            "australia": "Canberra", "canada": "Ottawa", "morocco": "Rabat"}
UNITS = {"millimetres": 0.001, "centimetres": 0.01, "metres": 1.0, "kilometres": 1000.0,
         "inches": 0.0254, "feet": 0.3048, "yards": 0.9144, "miles": 1609.344}


def _local_time(a: Mapping[str, Any]) -> tuple[str, str]:
    city = _words(a.get("city", ""))
    clock = f"{_digest(city.lower()) % 24:02d}:{_digest(city.lower(), 1) % 60:02d}"
    return f"It is {clock} in {city} now.", clock


def _convert_length(a: Mapping[str, Any]) -> tuple[str, str]:
    value = float(a["value"])
    got = value * UNITS[a["from_unit"]] / UNITS[a["to_unit"]]
    shown = f"{got:.4g}"
    return f"{value:g} {a['from_unit']} is {shown} {a['to_unit']}.", shown


def _roll_dice(a: Mapping[str, Any]) -> tuple[str, str]:
    count, sides = int(a["count"]), int(a["sides"])
    rolls = [_digest(count, sides, i) % sides + 1 for i in range(count)]
    total = str(sum(rolls))
    return f"Rolled {count}d{sides}: {', '.join(map(str, rolls))} (total {total}).", total


def _split_bill(a: Mapping[str, Any]) -> tuple[str, str]:
    total, people = float(a["total"]), int(a["people"])
    tip = float(a.get("tip_percent") or 0)
    each = f"{total * (1 + tip / 100) / people:.2f}"
    return f"With a {tip:g}% tip, each of the {people} pays {each}.", each


def _capital(a: Mapping[str, Any]) -> tuple[str, str]:
    country = _words(a.get("country", ""))
    capital = CAPITALS.get(country.lower())
    if capital is None:
        return f"No capital is known for {country!r}.", "-"
    return f"The capital of {country} is {capital}.", capital


def _spell_check(a: Mapping[str, Any]) -> tuple[str, str]:
    text = _words(a.get("text", ""))
    wrong = [w for w in text.replace(",", " ").split()
             if any(w.lower().count(c * 3) for c in "abcdefghijklmnopqrstuvwxyz")
             or w.lower().strip(".!?") in ("teh", "recieve", "seperate", "definately",
                                          "occured", "wierd", "untill", "beleive")]
    if not wrong:
        return f"No spelling mistakes in: {text}", "No spelling mistakes"
    return f"Misspelled: {', '.join(wrong)}", ", ".join(wrong)


LENGTH_UNITS = list(UNITS)

BENCH_TOOLS = [
    ToolSpec("local-time", "Tell the current local time in a city",
             [arg("city", "string", "The city, e.g. London")], _local_time),
    ToolSpec("convert-length", "Convert a length or distance from one unit to another",
             [arg("value", "number", "The length to convert"),
              arg("from_unit", "string", "The unit it is in", enum=LENGTH_UNITS),
              arg("to_unit", "string", "The unit to convert it to", enum=LENGTH_UNITS)],
             _convert_length),
    ToolSpec("roll-dice", "Roll dice and add up the result",
             [arg("count", "integer", "How many dice to roll", minimum=1, maximum=20),
              arg("sides", "integer", "How many sides each die has", minimum=2, maximum=100)],
             _roll_dice),
    ToolSpec("split-bill", "Split a restaurant bill between people, with an optional tip",
             [arg("total", "number", "The bill's total amount"),
              arg("people", "integer", "How many people share it", minimum=1),
              arg("tip_percent", "number", "The tip in percent, e.g. 15", required=False)],
             _split_bill),
    ToolSpec("capital-of", "Find the capital city of a country",
             [arg("country", "string", "The country's name")], _capital),
    ToolSpec("spell-check", "Check the spelling of a text and list the misspelled words",
             [arg("text", "string", "The text to check")], _spell_check),
]

BENCH_CASES = [
    Case("Tell me a joke about pirates", "tell-joke", {"topic": "pirates"}),
    Case("I'd like to hear something funny about dentists", "tell-joke", {"topic": "dentists"}),
    Case("Got a good joke on the subject of cheese?", "tell-joke", {"topic": "cheese"}),
    Case("Make me laugh with a joke about trains", "tell-joke", {"topic": "trains"}),
    Case("What time is it in Nairobi right now?", "local-time", {"city": "Nairobi"}),
    Case("Is it morning or evening in Lima at the moment?", "local-time", {"city": "Lima"}),
    Case("What's the local time in Oslo?", "local-time", {"city": "Oslo"}),
    Case("Could you check the clock in Hanoi for me?", "local-time", {"city": "Hanoi"}),
    Case("How many feet are in 12 metres?", "convert-length",
         {"value": 12, "from_unit": "metres", "to_unit": "feet"}),
    Case("Convert 5 miles to kilometres", "convert-length",
         {"value": 5, "from_unit": "miles", "to_unit": "kilometres"}),
    Case("What is 30 centimetres in inches?", "convert-length",
         {"value": 30, "from_unit": "centimetres", "to_unit": "inches"}),
    Case("I ran 10 kilometres today, how far is that in miles?", "convert-length",
         {"value": 10, "from_unit": "kilometres", "to_unit": "miles"}),
    Case("Roll 3 dice with 6 sides", "roll-dice", {"count": 3, "sides": 6}),
    Case("Throw two 20-sided dice for me", "roll-dice", {"count": 2, "sides": 20}),
    Case("Can you roll 4 eight-sided dice?", "roll-dice", {"count": 4, "sides": 8}),
    Case("Roll a single 12 sided die", "roll-dice", {"count": 1, "sides": 12}),
    Case("Split a bill of 120 between 4 people", "split-bill", {"total": 120, "people": 4}),
    Case("We are 3 friends and dinner cost 90 dollars, plus a 10 percent tip. What does "
         "each of us pay?", "split-bill", {"total": 90, "people": 3, "tip_percent": 10}),
    Case("How much does each person owe if 5 people share a 200 bill?", "split-bill",
         {"total": 200, "people": 5}),
    Case("Divide a restaurant bill of 64.50 among 2 people with a 20% tip", "split-bill",
         {"total": 64.5, "people": 2, "tip_percent": 20}),
    Case("What is the capital of Kenya?", "capital-of", {"country": "Kenya"}),
    Case("Which city is the capital of Peru?", "capital-of", {"country": "Peru"}),
    Case("Name the capital city of Norway", "capital-of", {"country": "Norway"}),
    Case("What's Vietnam's capital?", "capital-of", {"country": "Vietnam"}),
    Case("Tell me the capital of Morocco", "capital-of", {"country": "Morocco"}),
    Case("Check the spelling of 'I beleive we will recieve it'", "spell-check",
         {"text": "I beleive we will recieve it"}),
    Case("Are there any typos in this: 'the meeting occured untill noon'", "spell-check",
         {"text": "the meeting occured untill noon"}),
    Case("Please spell-check the sentence 'teh cat sat on the mat'", "spell-check",
         {"text": "teh cat sat on the mat"}),
    Case("Is 'definately' spelled right?", "spell-check", {"text": "definately"}),
    Case("Find spelling mistakes in 'a wierd day at the beach'", "spell-check",
         {"text": "a wierd day at the beach"}),
    Case("Tell me something funny about penguins", "tell-joke", {"topic": "penguins"}),
    Case("What time is it in Cairo?", "local-time", {"city": "Cairo"}),
]

BENCH_PLAIN = ["What is 2 plus 2?", "Who painted the Mona Lisa?", "What color is the sky?"]


# -- the tuning set: what the prompts and selection were designed against --------------------

def _stock(a: Mapping[str, Any]) -> tuple[str, str]:
    price = f"{_digest(str(a.get('symbol', '')).upper()) % 900 + 10}.{_digest(1) % 100:02d}"
    return f"{str(a.get('symbol', '')).upper()} trades at {price}.", price


def _temperature(a: Mapping[str, Any]) -> tuple[str, str]:
    value = float(a["value"])
    got = value * 9 / 5 + 32 if a["to"] == "fahrenheit" else (value - 32) * 5 / 9
    shown = f"{got:.1f}"
    return f"That is {shown} degrees {a['to']}.", shown


def _population(a: Mapping[str, Any]) -> tuple[str, str]:
    millions = str(_digest(str(a.get("country", "")).lower()) % 300 + 1)
    return f"{_words(a.get('country', ''))} has about {millions} million people.", millions


def _timer(a: Mapping[str, Any]) -> tuple[str, str]:
    label = f" for {a['label']}" if a.get("label") else ""
    return f"Timer set: {int(a['minutes'])} minutes{label}.", f"{int(a['minutes'])} minutes"


def _translate(a: Mapping[str, Any]) -> tuple[str, str]:
    text = _words(a.get("text", ""))
    fake = " ".join(w[::-1] for w in text.split())
    return f"In {a['language']}: {fake}", fake


def _define(a: Mapping[str, Any]) -> tuple[str, str]:
    word = _words(a.get("word", "")).lower()
    return f"{word}: a word with {len(word)} letters, meaning something.", f"{len(word)} letters"


def _distance(a: Mapping[str, Any]) -> tuple[str, str]:
    km = _digest(str(a.get("origin", "")).lower(), str(a.get("destination", "")).lower()) % 2000
    unit = a.get("unit") or "km"
    value = str(km if unit == "km" else round(km / 1.609))
    return f"It is {value} {unit} from {a.get('origin')} to {a.get('destination')}.", value


TUNING_TOOLS = [
    ToolSpec("stock-price", "Look up the latest share price of a company",
             [arg("symbol", "string", "The stock ticker symbol, e.g. AAPL")], _stock),
    ToolSpec("convert-temperature", "Convert a temperature between Celsius and Fahrenheit",
             [arg("value", "number", "The temperature to convert"),
              arg("to", "string", "The scale to convert to", enum=["celsius", "fahrenheit"])],
             _temperature),
    ToolSpec("country-population", "Get the population of a country",
             [arg("country", "string", "The country's name, e.g. France")], _population),
    ToolSpec("set-timer", "Start a countdown timer",
             [arg("minutes", "integer", "How many minutes the timer runs"),
              arg("label", "string", "What the timer is for", required=False)], _timer),
    ToolSpec("translate", "Translate a text into another language",
             [arg("text", "string", "The text to translate"),
              arg("language", "string", "The language to translate into",
                  enum=["French", "Spanish", "German", "Italian", "Japanese"])], _translate),
    ToolSpec("define-word", "Give the dictionary definition of an English word",
             [arg("word", "string", "The word to define")], _define),
    ToolSpec("travel-distance", "Find the distance between two cities",
             [arg("origin", "string", "The city to start from"),
              arg("destination", "string", "The city to go to"),
              arg("unit", "string", "The unit of the distance", required=False,
                  enum=["km", "miles"])], _distance),
]

TUNING_CASES = [
    Case("Tell me a joke about penguins", "tell-joke", {"topic": "penguins"}),
    Case("I could use a laugh, something about cats", "tell-joke", {"topic": "cats"}),
    Case("Do you know any funny jokes about pizza?", "tell-joke", {"topic": "pizza"}),
    Case("What's Apple trading at right now? Ticker AAPL", "stock-price", {"symbol": "AAPL"}),
    Case("How much is one share of MSFT?", "stock-price", {"symbol": "MSFT"}),
    Case("Give me the current stock price for TSLA", "stock-price", {"symbol": "TSLA"}),
    Case("What is 100 degrees Fahrenheit in Celsius?", "convert-temperature",
         {"value": 100, "to": "celsius"}),
    Case("Convert 30 C to fahrenheit please", "convert-temperature",
         {"value": 30, "to": "fahrenheit"}),
    Case("It's 72 degrees F outside, what's that in celsius?", "convert-temperature",
         {"value": 72, "to": "celsius"}),
    Case("How many people live in Brazil?", "country-population", {"country": "Brazil"}),
    Case("What is the population of Canada?", "country-population", {"country": "Canada"}),
    Case("How populous is Nigeria?", "country-population", {"country": "Nigeria"}),
    Case("Set a timer for 15 minutes", "set-timer", {"minutes": 15}),
    Case("Start a 5 minute timer for the eggs", "set-timer", {"minutes": 5, "label": "eggs"}),
    Case("Remind me in 20 minutes with a countdown for my tea", "set-timer",
         {"minutes": 20, "label": "tea"}),
    Case("Translate 'good morning' into Spanish", "translate",
         {"text": "good morning", "language": "Spanish"}),
    Case("How do you say 'thank you very much' in Japanese?", "translate",
         {"text": "thank you very much", "language": "Japanese"}),
    Case("Can you put 'where is the train station' into German?", "translate",
         {"text": "where is the train station", "language": "German"}),
    Case("What does the word 'ephemeral' mean?", "define-word", {"word": "ephemeral"}),
    Case("Define serendipity", "define-word", {"word": "serendipity"}),
    Case("I don't know what 'ubiquitous' means, can you explain it?", "define-word",
         {"word": "ubiquitous"}),
    Case("How far is it from Paris to Berlin?", "travel-distance",
         {"origin": "Paris", "destination": "Berlin"}),
    Case("What's the distance between Tokyo and Osaka in km?", "travel-distance",
         {"origin": "Tokyo", "destination": "Osaka", "unit": "km"}),
    Case("How many miles from Chicago to Denver?", "travel-distance",
         {"origin": "Chicago", "destination": "Denver", "unit": "miles"}),
    Case("Got a joke about dentists?", "tell-joke", {"topic": "dentists"}),
    Case("Convert minus 10 celsius to fahrenheit", "convert-temperature",
         {"value": -10, "to": "fahrenheit"}),
    Case("What's the share price of NVDA today?", "stock-price", {"symbol": "NVDA"}),
    Case("How many people are there in Japan?", "country-population", {"country": "Japan"}),
    Case("Please time 45 minutes for my workout", "set-timer",
         {"minutes": 45, "label": "workout"}),
    Case("Say 'I love books' in French", "translate",
         {"text": "I love books", "language": "French"}),
    Case("What is the meaning of 'gregarious'?", "define-word", {"word": "gregarious"}),
    Case("Distance from Madrid to Lisbon?", "travel-distance",
         {"origin": "Madrid", "destination": "Lisbon"}),
]

TUNING_PLAIN = ["What is the capital of France?", "How many legs does a spider have?",
                "Who wrote Romeo and Juliet?"]

# -- the issue's kind: four tools as issue 41 describes its held-out check (other wordings) ---

RATES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.0, "CHF": 0.88, "CAD": 1.36,
         "INR": 83.0, "AUD": 1.52}


def _weather(a: Mapping[str, Any]) -> tuple[str, str]:
    city = _words(a.get("city", ""))
    degrees = str(_digest(city.lower()) % 35)
    return f"{city}: {degrees} degrees C, light wind.", f"{degrees} degrees"


def _currency(a: Mapping[str, Any]) -> tuple[str, str]:
    source, target = str(a["source"]).upper(), str(a["target"]).upper()
    got = f"{float(a['amount']) / RATES[source] * RATES[target]:.2f}"
    return f"{float(a['amount']):g} {source} = {got} {target}", got


def _count_words(a: Mapping[str, Any]) -> tuple[str, str]:
    count = str(len(str(a.get("text", "")).split()))
    return f"{count} words", f"{count} words"


ISSUE_TOOLS = [
    ToolSpec("get-weather", "Look up the current weather in a city",
             [arg("city", "string", "The city's name")], _weather),
    ToolSpec("convert-currency", "Convert an amount of money from one currency to another",
             [arg("amount", "number", "The amount to convert"),
              arg("source", "string", "The currency to convert from, e.g. USD"),
              arg("target", "string", "The currency to convert to, e.g. EUR")], _currency),
    ToolSpec("count-words", "Count the words in a text",
             [arg("text", "string", "The text whose words to count")], _count_words),
]

ISSUE_CASES = [
    Case("What's the weather like in Nairobi today?", "get-weather", {"city": "Nairobi"}),
    Case("How warm is it in Reykjavik?", "get-weather", {"city": "Reykjavik"}),
    Case("Is it raining in Lima?", "get-weather", {"city": "Lima"}),
    Case("Convert 250 GBP to JPY", "convert-currency",
         {"amount": 250, "source": "GBP", "target": "JPY"}),
    Case("How much is 40 EUR in USD?", "convert-currency",
         {"amount": 40, "source": "EUR", "target": "USD"}),
    Case("I have 1000 INR, what is that in CAD?", "convert-currency",
         {"amount": 1000, "source": "INR", "target": "CAD"}),
    Case("How many words are in 'the quick brown fox jumps over the lazy dog'?",
         "count-words", {"text": "the quick brown fox jumps over the lazy dog"}),
    Case("Count the words of this sentence: I think therefore I am", "count-words",
         {"text": "I think therefore I am"}),
    Case("What is the word count of 'to be or not to be'?", "count-words",
         {"text": "to be or not to be"}),
    Case("Tell me a joke about umbrellas", "tell-joke", {"topic": "umbrellas"}),
    Case("Something funny about cows, please", "tell-joke", {"topic": "cows"}),
    Case("Weather report for Montreal?", "get-weather", {"city": "Montreal"}),
    Case("Change 75 CHF into AUD", "convert-currency",
         {"amount": 75, "source": "CHF", "target": "AUD"}),
]

SETS: dict[str, tuple[list[ToolSpec], list[Case], list[str]]] = {
    "issue": (ISSUE_TOOLS, ISSUE_CASES, TUNING_PLAIN),
    "bench": (BENCH_TOOLS, BENCH_CASES, BENCH_PLAIN),
    "tuning": (TUNING_TOOLS, TUNING_CASES, TUNING_PLAIN),
}
