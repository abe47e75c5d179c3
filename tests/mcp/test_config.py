"""``McpServer.from_config`` and the request's ``parameters``: values that would fail later
(in an HTTP header, a child's environment, the bus) are refused at once, naming the item."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolmesh.config.errors import ConfigError
from toolmesh.errors import ServiceError
from toolmesh.mcp import McpServer
from toolmesh.mcp.service import parse_parameters

URL = {"url": "http://127.0.0.1:8000/mcp"}


@pytest.mark.parametrize(("value", "complaint"), [
    # as text (how the config service hands items over) and as an object
    (json.dumps({**URL, "auth-token": "\ud800"}),
     'mcp/x: the value holds a string that is not valid Unicode (a lone surrogate, like '
     '\\ud800) at ["auth-token"]'),
    ({**URL, "auth-token": "\ud800"}, 'not valid Unicode (a lone surrogate, like \\ud800) at '
                                      '["auth-token"]'),
    ({"transport": "stdio", "command": "uvx", "env": {"KEY": "\udc80"}}, 'at ["env"]["KEY"]'),
    ({**URL, "auth-token": "a\r\nHost: evil"},
     "mcp/x: 'auth-token' holds a control character (such as a line break)"),
    ({**URL, "auth-token": "t\u00f6ken"},
     "mcp/x: 'auth-token' holds a character that is not ASCII"),
    ("[" * 5000 + "]" * 5000, "mcp/x: the value is nested more than 100 levels deep"),
    ('{"url": "http://h/mcp", "n": 1' + "0" * 5000 + "}",
     "mcp/x: the value holds an integer of more than 4300 digits"),
])
def test_an_item_that_would_fail_later_is_refused_now(value: Any, complaint: str) -> None:
    with pytest.raises(ConfigError) as e:
        McpServer.from_config("x", value)
    assert complaint in e.value.message
    assert "Host: evil" not in e.value.message and "\u00f6" not in e.value.message


def test_an_ordinary_token_is_kept() -> None:
    server = McpServer.from_config("x", json.dumps({**URL, "auth-token": "sk-Abc.123_~+/="}))
    assert server.auth_token == "sk-Abc.123_~+/="


@pytest.mark.parametrize(("parameters", "complaint"), [
    ("[" * 5000 + "]" * 5000, "'parameters' is nested more than 100 levels deep"),
    ('{"city": "\\ud800"}', "'parameters' holds a string that is not valid Unicode"),
    ('{"n": 1' + "0" * 5000 + "}", "'parameters' holds an integer of more than 4300 digits"),
])
def test_parameters_python_cannot_decode_are_a_bad_request(parameters: str,
                                                           complaint: str) -> None:
    with pytest.raises(ServiceError) as e:
        parse_parameters(parameters)
    assert e.value.type == "bad-request" and e.value.message.startswith(complaint)
