"""Config validation of values Python cannot decode safely, and of MCP tokens that cannot be
sent in an HTTP header: a config-error naming the item (and the field), never a
RecursionError or ValueError, and never the secret itself."""

from __future__ import annotations

import json

import pytest

from toolmesh.config.errors import ConfigError
from toolmesh.config.validation import header_value_problem, validate

DEEP = "[" * 5000 + "]" * 5000
DEEP_OBJECT = '{"a": ' * 5000 + "1" + "}" * 5000
HUGE_INT = '{"name": 1' + "0" * 5000 + "}"
MCP = {"url": "http://127.0.0.1:8000/mcp"}


def refusal(type: str, value: str) -> str:
    with pytest.raises(ConfigError) as e:
        validate(type, "bad", value)
    assert e.value.type == "config-error"
    return e.value.message


@pytest.mark.parametrize("type", ["tool", "mcp", "tool-service"])
@pytest.mark.parametrize(("value", "complaint"), [
    (DEEP, "the value is nested more than 100 levels deep"),
    (DEEP_OBJECT, "the value is nested more than 100 levels deep"),
    (HUGE_INT, "the value holds an integer of more than 4300 digits"),
    ('{"name": "\\ud800"}', "the value holds a string that is not valid Unicode (a lone "
                            'surrogate, like \\ud800) at ["name"]'),
    ("{not json", "the value is not valid JSON"),
], ids=["deep-arrays", "deep-objects", "integer-too-long", "lone-surrogate", "not-json"])
def test_a_value_python_cannot_parse_is_refused_naming_the_item(type: str, value: str,
                                                                complaint: str) -> None:
    assert refusal(type, value).startswith(f"invalid {type}/bad: {complaint}")


def test_types_without_a_schema_are_not_parsed() -> None:
    validate("prompt", "deep", DEEP)  # the prompt service copes with it (tests/prompt)


@pytest.mark.parametrize("token", ["\ud800", "tok\udc80en"])
def test_an_auth_token_with_a_lone_surrogate_is_refused_without_showing_it(token: str) -> None:
    # json.dumps writes the surrogate as the escape \ud800, which decodes back to it
    message = refusal("mcp", json.dumps({**MCP, "auth-token": token}))
    assert message == ("invalid mcp/bad: the value holds a string that is not valid Unicode "
                       '(a lone surrogate, like \\ud800) at ["auth-token"]')


@pytest.mark.parametrize(("token", "problem"), [
    ("abc\r\nX-Injected: 1", "holds a control character (such as a line break)"),
    ("abc\x00", "holds a control character"),
    ("t\u00f6ken", "holds a character that is not ASCII"),
])
def test_an_auth_token_that_cannot_go_in_a_header_is_refused(token: str, problem: str) -> None:
    message = refusal("mcp", json.dumps({**MCP, "auth-token": token}))
    assert message.startswith(f"invalid field 'auth-token' of mcp/bad: {problem}")
    assert "abc" not in message and "t\u00f6" not in message  # the secret is not repeated


def test_an_ordinary_auth_token_is_accepted() -> None:
    validate("mcp", "good", json.dumps({**MCP, "auth-token": "sk-Abc.123_~+/= x"}))
    assert header_value_problem("sk-Abc.123_~+/=") is None


def test_a_stdio_env_value_with_a_lone_surrogate_is_refused_naming_it() -> None:
    value = json.dumps({"transport": "stdio", "command": "uvx", "env": {"API_KEY": "\ud800"}})
    assert refusal("mcp", value).endswith('at ["env"]["API_KEY"]')


@pytest.mark.parametrize(("tool_type", "service"), [
    ("knowledge-query", "graph-rag"), ("structured-query", "structured-query"),
    ("row-embeddings-query", "row-embeddings-query")])
def test_a_trustgraph_query_tool_is_refused_saying_what_would_make_it_work(
        tool_type: str, service: str) -> None:
    # no service here implements these types: stored, such a tool could only ever fail
    message = refusal("tool", json.dumps({"type": tool_type, "name": "ask", "description": "d",
                                          "collection": "docs"}))
    assert message.startswith(f"invalid field 'type' of tool/bad: tool type {tool_type!r} is "
                              "not available in this deployment")
    assert f"TrustGraph's {service} service" in message
    assert "store this tool with type 'tool-service'" in message


def test_the_tool_types_toolmesh_implements_are_accepted() -> None:
    for item in ({"type": "text-completion"}, {"type": "prompt", "template": "t"},
                 {"type": "mcp-tool", "mcp-tool": "m"}, {"type": "tool-service", "service": "s"}):
        validate("tool", "ok", json.dumps({**item, "name": "n", "description": "d"}))


@pytest.mark.parametrize("type", ["tool", "tool-service"])
def test_a_disabled_item_needs_no_other_field(type: str) -> None:
    validate(type, "k", json.dumps({"enabled": False}))
    with pytest.raises(ConfigError, match="field 'enabled' of .*: must be true or false"):
        validate(type, "k", json.dumps({"enabled": "no"}))
    # enabled, it is held to every field as before
    with pytest.raises(ConfigError, match="is required"):
        validate(type, "k", json.dumps({"enabled": True}))


@pytest.mark.parametrize("field", ["request-queue", "response-queue"])
def test_a_tool_service_may_not_answer_on_a_broadcast_queue(field: str) -> None:
    descriptor = {"id": "x", "request-queue": "request:tg:x", "response-queue": "response:tg:x",
                  field: "non-persistent://tg/notify/tool-descriptors"}
    with pytest.raises(ConfigError, match=f"field '{field}' of tool-service/x: .* is a notify "
                                          r"\(broadcast\) queue"):
        validate("tool-service", "x", json.dumps(descriptor))


def test_workspace_settings_are_checked() -> None:
    validate("settings", "workspace", json.dumps({"accept-announcements": False}))
    with pytest.raises(ConfigError, match="'accept-announcements' of settings/workspace: must "
                                          "be true or false"):
        validate("settings", "workspace", json.dumps({"accept-announcements": "off"}))
    with pytest.raises(ConfigError, match="must be a JSON object"):
        validate("settings", "workspace", "[]")
    for strategy in ("auto", "native", "json", "react"):
        validate("settings", "workspace", json.dumps({"tool-calling": strategy}))
    with pytest.raises(ConfigError, match="'tool-calling' of settings/workspace: must be auto, "
                                          "native, json or react, not \"xml\""):
        validate("settings", "workspace", json.dumps({"tool-calling": "xml"}))
