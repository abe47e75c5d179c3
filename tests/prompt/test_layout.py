"""TrustGraph's prompt layout: which ``prompt`` items give which templates and system prompt."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from toolmesh.prompt import DEFAULT_TEMPLATES, PromptError, shipped_items
from toolmesh.prompt.layout import SHIPPED, Prompts, load
from toolmesh.prompt.templates import system_from_config


def tg_template(prompt: str, **extra: Any) -> str:
    """A value as the real tg-set-prompt writes it."""
    return json.dumps({"id": "ignored", "prompt": prompt, "response-type": "text", **extra})


def load_items(values: dict[str, str], previous: Prompts = SHIPPED, version: int = 1) -> Prompts:
    return load(values, version=version, workspace="ws", previous=previous)


def test_no_items_are_the_shipped_templates_without_a_system_prompt() -> None:
    prompts = load_items({})
    assert prompts.version == 1 and prompts.system == ""
    assert dict(prompts.templates) == dict(DEFAULT_TEMPLATES)


def test_trustgraphs_items_give_templates_and_the_system_prompt_goes_with_each() -> None:
    prompts = load_items({
        "system": json.dumps("You are {{ persona }}."),
        "template-index": json.dumps(["summarise"]),
        "template.summarise": tg_template("Summarise: {{ text }}"),
        "template.extract": json.dumps({"prompt": "Names in {{ text }}", "response-type": "json",
                                        "schema": {"type": "array"}}),
        "template.own-system": tg_template("Hi", system="Only mine."),
    })
    assert set(prompts.templates) == {"agent-react", "agent-json", "agent-native", "question",
                                      "summarise", "extract", "own-system"}  # template-index is no template
    summarise = prompts.templates["summarise"]
    assert summarise.id == "summarise"  # the key's id, not the value's "id" field
    # the system prompt is a template too, rendered with the request's variables
    assert summarise.render({"persona": "terse", "text": "a b"}) == \
        ("You are terse.", "Summarise: a b")
    assert prompts.templates["extract"].response_type == "json"
    # shipped templates get it as well; a template's own system prompt wins
    assert prompts.templates["question"].render({"question": "Q", "persona": "kind"}) == \
        ("You are kind.", "Q")
    assert prompts.templates["own-system"].render({}) == ("Only mine.", "Hi")
    # as configured, before the system prompt: what a later broken value falls back to
    assert prompts.configured["summarise"].system == ""


def test_our_items_are_an_alias_and_trustgraphs_key_wins(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "toolmesh.prompt"):
        prompts = load_items({
            "greet": json.dumps({"prompt": "Hello {{ name }}"}),
            "question": json.dumps({"prompt": "Alias: {{ question }}"}),
            "template.question": tg_template("TrustGraph: {{ question }}"),
        })
    assert prompts.templates["greet"].render({"name": "Ana"}) == ("", "Hello Ana")
    assert prompts.templates["question"].render({"question": "x"}) == ("", "TrustGraph: x")
    assert ("config prompt/question (version 1, workspace 'ws') is not used: "
            "prompt/template.question takes its place") in caplog.text


def test_a_broken_value_keeps_what_its_template_or_system_prompt_had(
        caplog: pytest.LogCaptureFixture) -> None:
    before = load_items({"system": json.dumps("Be brief."),
                         "template.greet": tg_template("Hello {{ name }}")})
    with caplog.at_level(logging.WARNING, "toolmesh.prompt"):
        after = load_items({"system": "Be brief.",  # not JSON text
                            "template.greet": tg_template("Hello {{ name"),
                            "template.new": "{",
                            "template.": tg_template("no id"),
                            "template.fine": tg_template("fine")},
                           previous=before, version=2)
    assert after.system == "Be brief."
    assert after.templates["greet"].render({"name": "Ana"}) == ("Be brief.", "Hello Ana")
    assert after.templates["fine"].render({}) == ("Be brief.", "fine")
    assert "new" not in after.templates and "" not in after.templates
    for complaint in [
            ("config prompt/system (version 2, workspace 'ws') not applied, keeping the system "
             "prompt it had: the system prompt is not valid JSON"),
            ("config prompt/template.greet (version 2, workspace 'ws') not applied, keeping the "
             "template it had: template 'greet': syntax error in prompt"),
            "config prompt/template.new (version 2, workspace 'ws') not applied, no such template",
            ("config prompt/template. (version 2, workspace 'ws') not applied, no template: the "
             "key names no id")]:
        assert complaint in caplog.text
    # a system prompt that is deleted is gone; a broken one with nothing before is none
    assert load_items({}, previous=after).system == ""
    assert load_items({"system": "3"}).system == ""


@pytest.mark.parametrize(("value", "complaint"), [
    ("Be brief.", "the system prompt is not valid JSON"),
    ('{"prompt": "x"}', "the system prompt must be a JSON string, not dict"),
    ('"{{ unclosed"', "prompt/system: syntax error in the system prompt at line 1"),
    ('"\\ud800"', "the system prompt holds a string that is not valid Unicode"),
])
def test_bad_system_prompts_are_prompt_errors(value: str, complaint: str) -> None:
    with pytest.raises(PromptError) as e:
        system_from_config(value)
    assert complaint in e.value.message


def test_a_null_system_prompt_is_none() -> None:
    assert system_from_config("null") == ""
    assert system_from_config(json.dumps("Sé breve.")) == "Sé breve."


def test_shipped_items_are_what_a_fresh_workspace_is_served() -> None:
    shipped = shipped_items({})
    assert set(shipped) == {"system", "template.question", "template.agent-react",
                            "template.agent-json", "template.agent-native", "template-index"}
    assert json.loads(shipped["system"]) == ""
    assert json.loads(shipped["template-index"]) == ["agent-json", "agent-native", "agent-react",
                                                     "question"]
    # read back through the layout, they are exactly the shipped templates
    prompts = load_items(shipped)
    assert prompts.system == ""
    assert dict(prompts.templates) == dict(DEFAULT_TEMPLATES)
    # each as tg-set-prompt writes one, so TrustGraph's readers take them
    assert json.loads(shipped["template.question"]) == {
        "id": "question", "prompt": "{{question}}", "response-type": "text"}


def test_shipped_items_never_hide_or_repeat_stored_ones() -> None:
    stored = {"system": json.dumps("Mine."), "question": json.dumps({"prompt": "alias"}),
              "template.summarise": tg_template("S")}
    shipped = shipped_items(stored)
    # the alias prompt/question is served: a shipped template.question would take its place
    assert set(shipped) == {"template.agent-react", "template.agent-json",
                            "template.agent-native", "template-index"}
    assert json.loads(shipped["template-index"]) == ["agent-json", "agent-native", "agent-react",
                                                     "summarise"]
    prompts = load_items({**shipped, **stored})
    assert prompts.templates["question"].render({}) == ("Mine.", "alias")
    assert shipped_items({**stored, "template-index": "[]"}).keys() == {
        "template.agent-react", "template.agent-json", "template.agent-native"}
