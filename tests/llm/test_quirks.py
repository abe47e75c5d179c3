"""The quirk table: which server is which, and what each is sent."""

from __future__ import annotations

from toolmesh.cli.options import LLM_SERVERS
from toolmesh.llm.quirks import TABLE, identify, quirks_of


def test_the_cli_offers_exactly_the_servers_of_the_table() -> None:
    assert sorted(LLM_SERVERS) == sorted(TABLE)


def test_servers_are_recognised_by_who_owns_their_models() -> None:
    def models(owner: str) -> dict[str, object]:
        return {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": owner}]}

    assert identify(models("me")) == "llama-cpp-python"
    assert identify(models("library")) == "ollama"
    assert identify(models("vllm")) == "vllm"
    assert identify(models("llamacpp")) == "llama.cpp"
    assert identify(models("openai")) == "openai"
    assert identify({"unexpected": True}) == identify("not json") == "openai"


def test_an_unknown_server_is_spoken_to_as_openai() -> None:
    assert quirks_of("something-new") == quirks_of("openai")


def test_each_server_gets_its_own_form_of_a_response_schema() -> None:
    schema = {"type": "object"}
    assert quirks_of("llama-cpp-python").response_format(schema) == {
        "type": "json_object", "schema": schema}
    assert quirks_of("vllm").response_format(schema, name="step") == {
        "type": "json_schema", "json_schema": {"name": "step", "schema": schema}}
