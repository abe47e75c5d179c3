"""Prompt templates: rendering, parsing config values, and the templates toolmesh ships."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolmesh.prompt import DEFAULT_TEMPLATES, PromptError, PromptTemplate, extract_json

# The tools as the agent hands them to agent-react: one per kind the prompt must describe.
TELL_JOKE = {"name": "tell-joke", "description": "Tell a joke on a given topic", "arguments": [
    {"name": "topic", "type": "string",
     "description": "The topic for the joke (e.g., programming, animals, food)", "required": True}]}
SUMMARISE = {"name": "summarise", "description": "Summarise a text with the summary template",
             "arguments": [
                 {"name": "text", "type": "string", "description": "The text to summarise",
                  "required": True},
                 {"name": "max-words", "type": "integer", "description": "Longest summary",
                  "required": False}]}
CLOCK = {"name": "clock", "description": "The current time in UTC", "arguments": []}


def react(**variables: Any) -> str:
    defaults: dict[str, Any] = {"question": "Why?", "tools": [], "history": [], "context": ""}
    system, prompt = DEFAULT_TEMPLATES["agent-react"].render({**defaults, **variables})
    assert system == ""
    return prompt


def test_render_fills_system_and_prompt_verbatim() -> None:
    t = PromptTemplate(id="t", system="You are {{ role }}.", prompt="Say <b>{{ word }}</b> & go\n")
    assert t.render({"role": "terse", "word": "hi"}) == ("You are terse.", "Say <b>hi</b> & go\n")


def test_a_missing_variable_is_an_error_naming_it() -> None:
    t = PromptTemplate(id="greet", prompt="Hello {{ name }}, {{ greeting }}")
    with pytest.raises(PromptError) as e:
        t.render({"greeting": "welcome"})
    assert e.value.type == "prompt-error"
    assert "template 'greet'" in e.value.message and "'name' is undefined" in e.value.message
    assert "variables given: greeting" in e.value.message


def test_a_syntax_error_names_the_template_and_the_line() -> None:
    with pytest.raises(PromptError) as e:
        PromptTemplate(id="broken", prompt="line one\nline two {% if %}\n")
    assert e.value.message.startswith("template 'broken': syntax error in prompt at line 2:")
    with pytest.raises(PromptError, match="syntax error in system at line 1"):
        PromptTemplate(id="broken", system="{{ x", prompt="fine")


def test_the_sandbox_refuses_unsafe_attributes() -> None:
    t = PromptTemplate(id="evil", prompt="{{ ''.__class__.__mro__ }}")
    with pytest.raises(PromptError, match="template 'evil' failed: access to attribute"):
        t.render({})


def test_tojson_keeps_non_ascii_and_html_characters() -> None:
    t = PromptTemplate(id="j", prompt="{{ args | tojson }}")
    assert t.render({"args": {"city": "Zürich", "q": "<a & b>"}})[1] == \
        '{"city": "Zürich", "q": "<a & b>"}'


def test_a_config_value_becomes_a_template() -> None:
    t = PromptTemplate.from_config("extract", json.dumps(
        {"prompt": "Extract {{ what }}", "system": "Be exact", "response-type": "json",
         "schema": {"type": "object"}}))
    assert (t.id, t.response_type) == ("extract", "json")
    assert t.render({"what": "names"}) == ("Be exact", "Extract names")
    plain = PromptTemplate.from_config("p", '{"prompt": "x"}')
    assert (plain.system, plain.response_type) == ("", "text")


@pytest.mark.parametrize(("value", "complaint"), [
    ("{not json", "the config value is not valid JSON"),
    ('["prompt"]', "must be a JSON object with 'prompt', not list"),
    ('{"system": "s"}', "'prompt' is required"),
    ('{"prompt": ""}', "'prompt' is required"),
    ('{"prompt": "p", "system": 3}', "'system' must be a string"),
    ('{"prompt": "p", "response-type": "xml"}', "response-type must be one of text, json"),
    ('{"prompt": "{% for x in y %}"}', "syntax error in prompt at line 1"),
    # Python cannot decode these: refused like any other bad value, never RecursionError
    ("[" * 5000 + "]" * 5000, "the config value is nested more than 100 levels deep"),
    ('{"prompt": "p", "n": 1' + "0" * 5000 + "}",
     "the config value holds an integer of more than 4300 digits"),
    ('{"prompt": "\\ud800"}', "the config value holds a string that is not valid Unicode"),
    # nesting too deep for Jinja's parser (RecursionError) or Python's compiler (SyntaxError)
    (json.dumps({"prompt": "{{ " + "(" * 200 + "1" + ")" * 200 + " }}"}),
     "prompt cannot be compiled, most likely because it is nested too deeply (RecursionError"),
    (json.dumps({"system": "{% for a in b %}" * 30 + "{% endfor %}" * 30, "prompt": "p"}),
     "system cannot be compiled, most likely because it is nested too deeply (SyntaxError"),
])
def test_bad_config_values_are_prompt_errors_naming_the_template(value: str, complaint: str) -> None:
    with pytest.raises(PromptError) as e:
        PromptTemplate.from_config("bad-one", value)
    assert e.value.message.startswith("template 'bad-one'")
    assert complaint in e.value.message


@pytest.mark.parametrize(("answer", "expected"), [
    ('{"a": 1}', {"a": 1}),
    ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
    ('```\n["x"]\n```\n', ["x"]),
    ('Here you are: {"name": "Åsa"} — hope it helps', {"name": "Åsa"}),
    ("42", 42),
])
def test_extract_json_tolerates_fences_and_prose(answer: str, expected: Any) -> None:
    assert json.loads(extract_json(answer, template_id="t")) == expected


@pytest.mark.parametrize("answer", ["Here: " + "[" * 5000 + "]" * 5000,
                                    '{"n": 1' + "0" * 5000 + "}"])
def test_extract_json_refuses_json_python_cannot_decode(answer: str) -> None:
    with pytest.raises(PromptError, match="nested too deep or holds an integer too long"):
        extract_json(answer, template_id="t")


def test_a_recursive_macro_is_a_prompt_error_when_rendered() -> None:
    t = PromptTemplate(id="loop", prompt="{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}")
    with pytest.raises(PromptError, match="template 'loop' failed: RecursionError"):
        t.render({})


def test_extract_json_quotes_an_excerpt_of_a_non_json_answer() -> None:
    with pytest.raises(PromptError) as e:
        extract_json("I am sorry, I cannot do that. " * 10, template_id="extract")
    assert "template 'extract' expects a JSON answer" in e.value.message
    assert "'I am sorry, I cannot do that. I am sorry" in e.value.message
    assert len(e.value.message) < 200


def test_the_shipped_templates() -> None:
    assert set(DEFAULT_TEMPLATES) == {"question", "agent-react", "agent-json", "agent-native"}
    assert DEFAULT_TEMPLATES["question"].render({"question": "What is 2+2?\n"}) == \
        ("", "What is 2+2?\n")


def test_agent_react_lists_every_tool_with_every_argument() -> None:
    prompt = react(tools=[TELL_JOKE, SUMMARISE, CLOCK])
    assert ("Tool: tell-joke\n"
            "Description: Tell a joke on a given topic\n"
            "Arguments:\n"
            "- topic (string): The topic for the joke (e.g., programming, animals, food)\n"
            ) in prompt
    assert ("Tool: summarise\n"
            "Description: Summarise a text with the summary template\n"
            "Arguments:\n"
            "- text (string): The text to summarise\n"
            "- max-words (integer) (optional): Longest summary\n") in prompt
    assert "Tool: clock\nDescription: The current time in UTC\nArguments: none\n" in prompt


def test_agent_react_tolerates_arguments_without_required_or_description() -> None:
    tool = {"name": "lookup", "description": "Look up", "arguments": [
        {"name": "id", "type": "string"}]}
    assert "Tool: lookup\nDescription: Look up\nArguments:\n- id (string)\n" in react(tools=[tool])
    assert "Tool: t\nDescription: d\nArguments: none\n" in react(
        tools=[{"name": "t", "description": "d"}])


def test_agent_react_teaches_the_text_protocol() -> None:
    prompt = react(tools=[CLOCK])
    assert ("Thought: (your reasoning about what to do next)\n"
            "Action: (the name of one tool from the list above)\n"
            "Args: (one JSON object: each argument's name and its value, taken from the "
            "question)\n") in prompt
    assert "Thought: (your reasoning)\nFinal Answer: (the answer to the question)\n" in prompt
    # no example value a model could copy into a call (issue 41)
    assert "<argument value>" not in prompt and '"..."' not in prompt
    assert "Exactly one action per reply." in prompt
    assert "Args is a single JSON object on the Args line(s)" in prompt
    assert "Stop after the Args line(s)" in prompt and "it will be provided" in prompt
    assert prompt.endswith('Question: Why?\n\nYour reply, starting with "Thought:":\n')


def test_agent_react_shows_the_history_and_the_context() -> None:
    history = [
        {"thought": "I need a joke", "action": "tell-joke", "arguments": {"topic": "café"},
         "observation": "Hey alice! Here's a pun for you:\n\nEspresso yourself."},
        {"thought": "Check the time", "action": "clock", "arguments": {}, "observation": "12:00"},
    ]
    prompt = react(question="A joke, then the time?", tools=[TELL_JOKE, CLOCK], history=history,
                   context="The user likes coffee.")
    assert "\nContext:\nThe user likes coffee.\n\nQuestion: A joke, then the time?\n" in prompt
    assert ("Previous steps:\n\n"
            "Thought: I need a joke\n"
            "Action: tell-joke\n"
            'Args: {"topic": "café"}\n'
            "Observation: Hey alice! Here's a pun for you:\n\nEspresso yourself.\n\n"
            "Thought: Check the time\n"
            "Action: clock\n"
            "Args: {}\n"
            "Observation: 12:00\n") in prompt
    # no context and no history: neither section appears
    bare = react(tools=[CLOCK])
    assert "Context:" not in bare and "Previous steps:" not in bare


def test_agent_react_needs_the_question() -> None:
    with pytest.raises(PromptError, match="'question' is undefined"):
        DEFAULT_TEMPLATES["agent-react"].render({"tools": [], "history": [], "context": ""})


def test_a_variable_of_the_wrong_shape_is_a_prompt_error() -> None:
    with pytest.raises(PromptError) as e:
        react(tools=3)
    assert e.value.message.startswith("template 'agent-react' failed: TypeError:")
    assert "not iterable" in e.value.message
