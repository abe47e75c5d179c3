"""Secrets in config values: masked on read, kept on a put that sends the mask back, and
never kept for a new destination."""

from __future__ import annotations

import json

import pytest

from toolmesh.config.errors import ConfigError
from toolmesh.secrets import MASK, keep_secrets, mask_value

MCP = {"url": "http://bob:PW-123@mcp.example:9000/mcp?api_key=K-456&city=Paris%20Nord",
       "remote-name": "weather", "auth-token": "T-789"}
STDIO = {"transport": "stdio", "command": "uvx", "args": ["mcp-server-time"],
         "env": {"API_KEY": "E-111", "TZ": "UTC"}}


def masked(type: str, item: dict) -> dict:
    return json.loads(mask_value(type, json.dumps(item)))


def test_mcp_token_url_credentials_and_env_read_masked() -> None:
    shown = masked("mcp", MCP)
    assert shown == {"url": "http://bob:***@mcp.example:9000/mcp?api_key=***&city=Paris%20Nord",
                     "remote-name": "weather", "auth-token": MASK}
    assert masked("mcp", STDIO)["env"] == {"API_KEY": MASK, "TZ": MASK}
    assert masked("mcp", STDIO)["args"] == ["mcp-server-time"]


def test_secret_looking_config_params_of_tools_and_urls_in_any_type_read_masked() -> None:
    tool = {"type": "tool-service", "name": "n", "description": "d", "service": "s",
            "api-key": "sk-1", "collection": "c"}
    assert masked("tool", tool) == {**tool, "api-key": MASK}
    note = {"see": ["https://x.example/a?sig=abc&page=2"]}
    assert masked("note", note) == {"see": ["https://x.example/a?sig=***&page=2"]}
    assert mask_value("note", "plain text with https://u:p@h.example/ inside") == \
        "plain text with https://u:***@h.example/ inside"


def test_values_without_secrets_are_returned_byte_for_byte() -> None:
    text = '{ "type": "tool-service",  "name": "x" }'
    assert mask_value("tool", text) is text
    assert mask_value("prompt", "not json") == "not json"


def test_a_put_of_what_was_read_keeps_every_secret() -> None:
    for type, item in (("mcp", MCP), ("mcp", STDIO)):
        stored = json.dumps(item)
        kept = keep_secrets(type, "k", mask_value(type, stored), stored)
        assert json.loads(kept) == item


def test_read_modify_write_keeps_the_secrets_and_applies_the_change() -> None:
    stored = json.dumps(MCP)
    edited = {**json.loads(mask_value("mcp", stored)), "remote-name": "forecast"}
    assert json.loads(keep_secrets("mcp", "w", json.dumps(edited), stored)) == \
        {**MCP, "remote-name": "forecast"}


def test_a_new_secret_replaces_the_stored_one() -> None:
    stored = json.dumps(MCP)
    new = {**MCP, "auth-token": "NEW-TOKEN"}
    assert json.loads(keep_secrets("mcp", "w", json.dumps(new), stored))["auth-token"] == \
        "NEW-TOKEN"


def test_a_stored_token_is_not_kept_for_another_server() -> None:
    stored = json.dumps({"url": "http://good.example/mcp", "auth-token": "T-789"})
    moved = json.dumps({"url": "http://evil.example/mcp", "auth-token": MASK})
    with pytest.raises(ConfigError, match=r"invalid mcp/w: 'auth-token' is '\*\*\*'.*somewhere "
                                          r"else.*give the secret itself"):
        keep_secrets("mcp", "w", moved, stored)
    # the same server under another path keeps it
    same = json.dumps({"url": "http://good.example/mcp2", "auth-token": MASK})
    assert json.loads(keep_secrets("mcp", "w", same, stored))["auth-token"] == "T-789"


def test_stored_env_is_not_kept_for_another_command() -> None:
    stored = json.dumps(STDIO)
    other = {**json.loads(mask_value("mcp", stored)), "args": ["-c", "print(env)"]}
    with pytest.raises(ConfigError, match="'env.API_KEY'"):
        keep_secrets("mcp", "c", json.dumps(other), stored)


def test_a_masked_url_must_be_the_stored_url_as_read() -> None:
    stored = json.dumps(MCP)
    other = {**json.loads(mask_value("mcp", stored))}
    other["url"] = other["url"].replace("mcp.example", "evil.example")
    with pytest.raises(ConfigError, match="a URL in 'url'"):
        keep_secrets("mcp", "w", json.dumps(other), stored)


def test_a_mask_with_nothing_stored_is_refused() -> None:
    with pytest.raises(ConfigError, match="no stored value to keep"):
        keep_secrets("mcp", "new", json.dumps({"url": "http://h/mcp", "auth-token": MASK}), None)


def test_three_stars_outside_secret_places_are_plain_text() -> None:
    text = json.dumps({"type": "tool-service", "name": "n", "description": "rated ***",
                       "service": "s"})
    assert keep_secrets("tool", "t", text, None) is text


@pytest.mark.parametrize("depth", [150, 5000])
def test_a_value_too_deep_to_decode_is_masked_as_text(depth: int) -> None:
    # any type may be stored unvalidated; reading it must not raise RecursionError
    text = "[" * depth + '"http://bob:pw-DEEP@h.example/x"' + "]" * depth
    masked = mask_value("notes", text)
    assert "pw-DEEP" not in masked and "http://bob:***@h.example/x" in masked
