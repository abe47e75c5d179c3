"""ScriptedLLM: the order answers are chosen in, placeholders, script files, streaming."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from toolmesh.llm import (
    Completion,
    CompletionStream,
    LLMError,
    LLMProvider,
    Rule,
    ScriptedLLM,
)


async def answers(llm: ScriptedLLM, *prompts: str) -> list[str]:
    return [(await llm.complete(system="", prompt=p)).text for p in prompts]


async def test_queued_responses_are_used_in_order_then_the_default() -> None:
    llm = ScriptedLLM(["one", "two"], default="again")
    assert await answers(llm, "a", "b", "c", "d") == ["one", "two", "again", "again"]
    assert llm.remaining == ()


async def test_the_first_matching_rule_wins_over_the_queue() -> None:
    llm = ScriptedLLM(["queued"], rules=[Rule("weather", "sunny"), Rule("weath", "never"),
                                         Rule("joke", "a joke")])
    assert await answers(llm, "the weather?", "tell a joke", "anything") == [
        "sunny", "a joke", "queued"]


async def test_rules_search_the_whole_prompt_across_lines() -> None:
    llm = ScriptedLLM(rules=[Rule(r"Question: (?P<q>.*?)\nEnd", "you asked {q}")])
    prompt = "Intro\nQuestion: first line\nsecond line\nEnd"
    assert await answers(llm, prompt) == ["you asked first line\nsecond line"]


async def test_no_response_raises_an_llm_error_quoting_the_prompt() -> None:
    llm = ScriptedLLM(["only"])
    await llm.complete(system="", prompt="first")
    with pytest.raises(LLMError) as e:
        await llm.complete(system="", prompt="x" * 300)
    assert e.value.type == "llm-error"
    assert e.value.message == ("the scripted LLM has no response for this prompt: "
                               + repr("x" * 200))


async def test_named_groups_and_the_prompt_fill_placeholders() -> None:
    llm = ScriptedLLM(["echo: {prompt} / {system}"],
                      rules=[Rule(r"add (?P<a>\d+) and (?P<b>\d+)(?P<rest> please)?",
                                  "{a}+{b}={rest}")])
    assert (await llm.complete(system="", prompt="add 2 and 3")).text == "2+3="
    assert (await llm.complete(system="be brief", prompt="hi")).text == "echo: hi / be brief"


async def test_json_braces_survive_and_doubled_placeholders_are_literal() -> None:
    response = ('Action: {"name": "weather", "args": {"city": "{city}", "n": {"x": 1}}}'
                " {unknown} {{city}} {{not_a_placeholder}}")
    llm = ScriptedLLM(rules=[Rule(r"in (?P<city>\w+)", response)])
    text = (await llm.complete(system="", prompt="weather in Paris")).text
    assert text == ('Action: {"name": "weather", "args": {"city": "Paris", "n": {"x": 1}}}'
                    " {unknown} {city} {{not_a_placeholder}}")
    assert json.loads(text.split(" {unknown}")[0].removeprefix("Action: "))["args"]["city"] == "Paris"


async def test_every_prompt_is_recorded_even_unanswered_ones() -> None:
    llm = ScriptedLLM(["ok"])
    await llm.complete(system="sys", prompt="p1")
    with pytest.raises(LLMError):
        await llm.complete(system="", prompt="p2")
    with pytest.raises(LLMError):
        llm.stream(system="s3", prompt="p3")  # the answer is chosen when stream() is called
    assert llm.prompts == [("sys", "p1"), ("", "p2"), ("s3", "p3")]


async def test_stream_chunks_are_words_that_join_to_the_text() -> None:
    text = "  Hello,  world!\nThis is\tscripted.  "
    llm = ScriptedLLM([text, text])
    stream = llm.stream(system="", prompt="p")
    assert isinstance(stream, CompletionStream)
    chunks = [c async for c in stream]
    assert chunks == ["  ", "Hello,  ", "world!\n", "This ", "is\t", "scripted.  "]
    assert "".join(chunks) == text == (await llm.complete(system="", prompt="p")).text
    assert stream.completion == Completion(text=text, in_tokens=1, out_tokens=5, model="scripted",
                                           finish_reason="stop")


async def test_chunk_size_gives_fixed_size_chunks() -> None:
    llm = ScriptedLLM(["abcdefghij"], chunk_size=4)
    assert [c async for c in llm.stream(system="", prompt="p")] == ["abcd", "efgh", "ij"]


async def test_stream_picks_its_answer_when_called() -> None:
    llm = ScriptedLLM(["first", "second"])
    s1 = llm.stream(system="", prompt="p1")
    s2 = llm.stream(system="", prompt="p2")
    assert [c async for c in s2] == ["second"]
    assert [c async for c in s1] == ["first"]


async def test_completion_counts_words_as_tokens() -> None:
    llm = ScriptedLLM(["three little words"])
    assert await llm.complete(system="you are kind", prompt="say it") == Completion(
        text="three little words", in_tokens=5, out_tokens=3, model="scripted",
            finish_reason="stop")


async def test_it_is_an_llm_provider() -> None:
    llm = ScriptedLLM()
    assert isinstance(llm, LLMProvider)
    assert llm.name == "scripted (0 responses, 0 rules)"
    await llm.close()


def test_a_bad_rule_pattern_is_an_llm_error() -> None:
    with pytest.raises(LLMError, match=r"invalid rule pattern '\(unclosed'"):
        ScriptedLLM(rules=[Rule("(unclosed", "x")])


async def test_from_file_loads_responses_rules_and_default(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({
        "responses": ["first", "second"],
        "rules": [{"match": "hello (?P<who>\\w+)", "response": "hi {who}"}],
        "default": "dunno", "chunk_size": 2}))
    llm = ScriptedLLM.from_file(path)
    assert llm.name == f"scripted {path}"
    assert await answers(llm, "x", "hello Ann", "y", "z") == ["first", "hi Ann", "second", "dunno"]
    assert [c async for c in llm.stream(system="", prompt="q")] == ["du", "nn", "o"]


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "is not valid JSON"),
    ('["a list"]', "must be a JSON object"),
    ('{"responses": "one"}', "'responses' must be a list of strings"),
    ('{"rules": [{"pattern": "x", "response": "y"}]}', 'rule 0 must be {"match"'),
    ('{"rules": [{"match": "(", "response": "y"}]}', "invalid rule pattern"),
    ('{"default": 3}', "'default' must be a string"),
    ('{"respones": []}', "unknown key(s) 'respones'; accepted: responses, rules"),
    ('{"chunk_size": 0}', "chunk_size must be at least 1"),
])
def test_from_file_says_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(LLMError) as e:
        ScriptedLLM.from_file(path)
    assert str(path) in e.value.message and message in e.value.message


def test_from_file_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match="cannot read the LLM script .*missing.json"):
        ScriptedLLM.from_file(tmp_path / "missing.json")


async def test_delay_waits_before_answering() -> None:
    llm = ScriptedLLM(["slow", "slow too"], delay=0.05)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await llm.complete(system="", prompt="p")
    assert [c async for c in llm.stream(system="", prompt="p")] == ["slow ", "too"]
    assert loop.time() - start >= 0.1


async def test_pace_waits_between_streamed_pieces() -> None:
    llm = ScriptedLLM(["one two three"], pace=0.05)
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert [c async for c in llm.stream(system="", prompt="p")] == ["one ", "two ", "three"]
    assert loop.time() - start >= 0.1  # two pauses; none before the first piece
    with pytest.raises(ValueError, match="pace must be 0 or more"):
        ScriptedLLM(pace=-1)


def test_pace_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"default": "x", "pace": 0.01}')
    assert ScriptedLLM.from_file(path).pace == 0.01
    path.write_text('{"default": "x", "pace": -1}')
    with pytest.raises(LLMError, match="'pace' must be a number of seconds"):
        ScriptedLLM.from_file(path)
