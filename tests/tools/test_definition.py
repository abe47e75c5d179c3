"""A tool service's definition: the config items it declares, checked as a put is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.examples.loading import EXAMPLES, example_module
from toolmesh.bus import connect
from toolmesh.bus.memory import new_memory_url
from toolmesh.tools import Argument, ConfigParam, DynamicToolService, Tool, ToolServiceDefinition
from toolmesh.tools.definition import DefinitionError
from toolmesh.tools.services.joke import DEFINITION as JOKE, JokeService


def example_items(folder: str, files: dict[tuple[str, str], str]) -> dict[tuple[str, str], object]:
    return {key: json.loads((EXAMPLES / folder / name).read_text()) for key, name in files.items()}


def test_the_joke_definition_is_the_seeds_two_items() -> None:
    # examples/joke holds the seed's files, which the docs load with tg-put-config-item
    assert JOKE.items() == example_items("joke", {
        ("tool-service", "joke-service"): "joke-service.json",
        ("tool", "tell-joke"): "tell-joke.json"})


def test_the_word_count_example_files_are_what_its_class_declares() -> None:
    word_count = example_module("wordcount", "wordtools").WordCount
    assert word_count.definition.items() == example_items("wordcount", {
        ("tool-service", "word-count"): "word-count.json",
        ("tool", "count-words"): "count-words.json"})


def test_overrides_change_the_id_and_queues_and_the_tools_follow() -> None:
    items = JOKE.items(id="jokes-2", topic="jokes2")
    assert items[("tool-service", "jokes-2")]["request-queue"] == \
        "non-persistent://tg/request/jokes2"
    assert items[("tool", "tell-joke")]["service"] == "jokes-2"
    explicit = JOKE.descriptor(request_queue="request:tg:a", response_queue="response:tg:b")
    assert (explicit["request-queue"], explicit["response-queue"]) == \
        ("request:tg:a", "response:tg:b")


def test_argument_schema_group_and_states_reach_the_tool_item() -> None:
    definition = ToolServiceDefinition(id="s", tools=[Tool(
        "pick", "Pick one", key="picker", group=["g"], applicable_states=["start"], state="done",
        arguments=[Argument("colour", "string", "A colour", required=True,
                            schema={"enum": ["red", "blue"]})])])
    item = definition.items()[("tool", "picker")]
    assert item["arguments"] == [{"name": "colour", "type": "string", "description": "A colour",
                                  "required": True, "enum": ["red", "blue"]}]
    assert (item["group"], item["applicable-states"], item["state"]) == (["g"], ["start"], "done")


@pytest.mark.parametrize(("definition", "words"), [
    (ToolServiceDefinition(id="s", tools=[Tool("t", "d", config={"colour": "red"})]),
     "config value(s) colour are not config_params of the service (it has: none)"),
    (ToolServiceDefinition(id="s", config_params=[ConfigParam("colour", required=True)],
                           tools=[Tool("t", "d")]),
     "the required config param(s) colour have no value"),
    (ToolServiceDefinition(id="s", config_params=[ConfigParam("name")],
                           tools=[Tool("t", "d", config={"name": "x"})]),
     "would overwrite fields of its tool item"),
    (ToolServiceDefinition(id="s", tools=[Tool("t", "d"), Tool("t", "other")]),
     "two tools of 's' have the key 't'"),
    (ToolServiceDefinition(id="s", tools=[Tool("t", "d", arguments=[Argument("n", "int")])]),
     "invalid field 'arguments[0].type' of tool/t"),
    (ToolServiceDefinition(id="s", tools=[Tool("t", "")]),
     "invalid field 'description' of tool/t"),
    (ToolServiceDefinition(id=" ", topic="t", tools=[Tool("t", "d")]),
     "invalid field 'id' of tool-service/ "),
])
def test_a_definition_the_config_service_would_refuse_is_refused_first(
        definition: ToolServiceDefinition, words: str) -> None:
    with pytest.raises(DefinitionError) as refused:
        definition.items()
    assert words in refused.value.message
    assert refused.value.type == "definition-error"


def test_explicit_queues_are_checked_like_a_put() -> None:
    with pytest.raises(DefinitionError, match="field 'request-queue' of tool-service/joke-service"):
        JOKE.items(request_queue="nowhere", response_queue="response:tg:joke")


async def test_a_service_with_a_definition_needs_no_topic_or_id() -> None:
    bus = await connect(new_memory_url())
    try:
        service = JokeService(bus)
        assert service.id == "joke-service"
        assert str(service.request_queue) == "request:tg:joke"
        overridden = JokeService(bus, topic="other", id="joke-2")
        assert (overridden.id, str(overridden.request_queue)) == ("joke-2", "request:tg:other")

        class Plain(DynamicToolService):
            pass

        with pytest.raises(ValueError, match="give topic="):
            Plain(bus)
    finally:
        await bus.close()


def test_the_definition_module_does_not_load_jsonschema() -> None:
    # a running service never checks its definition; importing it must stay cheap
    import subprocess
    import sys

    code = ("import sys, toolmesh.tools; "
            "print('jsonschema' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parent).stdout
    assert out.strip() == "False"
