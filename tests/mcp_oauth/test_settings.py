"""An item's ``auth``: what is taken, what is refused with a message naming the field, and how
it shapes sessions (each person's their own)."""

from __future__ import annotations

import pytest

from toolmesh.config.errors import ConfigError
from toolmesh.mcp.config import McpServer
from toolmesh.schema.mcp_auth import AuthSettingsError, OAuthSettings, principal_of

URL = "https://notes.example.com/mcp"


def test_the_defaults_are_a_person_signing_in_with_a_code() -> None:
    settings = OAuthSettings.parse({"type": "oauth"})
    assert (settings.per, settings.grant, settings.send_resource, settings.scope) == \
        ("user", "authorization-code", True, None)
    assert OAuthSettings.parse({"type": "oauth", "scopes": ["a", "b"]}).scope == "a b"
    assert OAuthSettings.parse({"type": "oauth", "scopes": " a  b "}).scope == "a b"


@pytest.mark.parametrize(("auth", "names"), [
    ("oauth", "must be an object"),
    ({"type": "basic"}, "auth.type"),
    ({"type": "oauth", "per": "team"}, "auth.per"),
    ({"type": "oauth", "grant": "password"}, "auth.grant"),
    ({"type": "oauth", "grant": "client-credentials", "client-id": "c", "client-secret": "s"},
     '"per": "workspace"'),
    ({"type": "oauth", "per": "workspace", "grant": "client-credentials"}, "client-id"),
    ({"type": "oauth", "client-secret": "s"}, "needs 'auth.client-id'"),
    ({"type": "oauth", "resource": "yes"}, "auth.resource"),
    ({"type": "oauth", "authorization-server": "ftp://x"}, "authorization-server"),
    ({"type": "oauth", "scopes": 3}, "auth.scopes"),
    ({"type": "oauth", "client-id": ""}, "auth.client-id"),
    ({"type": "oauth", "token": "x"}, "unknown field(s) token"),
])
def test_a_wrong_auth_is_refused_naming_the_field(auth: object, names: str) -> None:
    with pytest.raises(AuthSettingsError) as refused:
        OAuthSettings.parse(auth)
    assert names in str(refused.value)


def test_an_item_takes_oauth_or_a_static_token_not_both_and_not_on_stdio() -> None:
    server = McpServer.from_config("notes", {"url": URL, "auth": {"type": "oauth"}})
    assert server.oauth is not None and server.oauth.per == "user"
    with pytest.raises(ConfigError, match="cannot both be set"):
        McpServer.from_config("notes", {"url": URL, "auth-token": "t",
                                        "auth": {"type": "oauth"}})
    with pytest.raises(ConfigError, match="stdio server takes its credentials in 'env'"):
        McpServer.from_config("clock", {"transport": "stdio", "command": "python",
                                        "auth": {"type": "oauth"}})
    with pytest.raises(ConfigError, match="mcp/notes: 'auth.per'"):
        McpServer.from_config("notes", {"url": URL, "auth": {"type": "oauth", "per": "x"}})


def test_each_person_has_a_session_of_their_own() -> None:
    server = McpServer.from_config("notes", {"url": URL, "auth": {"type": "oauth"}})
    alice, bob = server.for_principal("user:alice"), server.for_principal("user:bob")
    assert len({server.connection_key, alice.connection_key, bob.connection_key}) == 3
    assert alice.slot != bob.slot and alice.slot[:2] == bob.slot[:2]
    assert "principal='user:alice'" in repr(alice)
    # a change of the client's secret is a change of session too; the secret is not shown
    secret = McpServer.from_config("notes", {"url": URL, "auth": {
        "type": "oauth", "client-id": "c", "client-secret": "s3cr3t"}})
    other = McpServer.from_config("notes", {"url": URL, "auth": {
        "type": "oauth", "client-id": "c", "client-secret": "other"}})
    assert secret.connection_key != other.connection_key
    assert "s3cr3t" not in repr(secret) and "s3cr3t" not in repr(secret.oauth)


def test_whose_grant_a_call_uses() -> None:
    per_user = OAuthSettings.parse({"type": "oauth"})
    shared = OAuthSettings.parse({"type": "oauth", "per": "workspace"})
    assert principal_of(per_user, "alice") == "user:alice"
    assert principal_of(per_user, None) is None  # no identity: no one's grant
    assert principal_of(shared, None) == principal_of(shared, "bob") == "workspace"


def test_the_config_service_refuses_a_wrong_auth_on_put() -> None:
    from toolmesh.config.validation import validate

    validate("mcp", "notes", '{"url": "%s", "auth": {"type": "oauth"}}' % URL)
    for value, said in (
            ('{"url": "%s", "auth": {"type": "oauth", "per": "everyone"}}' % URL,
             "mcp/notes: 'auth.per'"),
            ('{"url": "%s", "auth-token": "t", "auth": {"type": "oauth"}}' % URL,
             "cannot both be set"),
            ('{"url": "%s", "auth": "oauth"}' % URL, "'auth' must be an object")):
        with pytest.raises(ConfigError) as refused:
            validate("mcp", "notes", value)
        assert said in refused.value.message
