"""The errors of MCP logins: one type per thing the user can act on differently."""

from __future__ import annotations

from toolmesh.errors import ToolmeshError


class OAuthError(ToolmeshError):
    """A login could not be made or used: the server's metadata, the authorization server's
    answer, or a stored grant is unusable. The message says which and what to do."""

    type = "oauth-error"


class LoginRequired(OAuthError):
    """The caller has no usable grant for the item's server (none yet, expired beyond
    refresh, revoked, or too narrow for what the server now asks)."""

    type = "login-required"

    def __init__(self, message: str, *, item: str = "", scope: str | None = None) -> None:
        super().__init__(message)
        self.item = item
        #: the scopes the server asked for (a step-up), when it named them
        self.scope = scope


class LoginRefused(OAuthError):
    """A login was refused for safety: the authorization server offers no S256 PKCE, its
    answer names another issuer, the state matches no login of the caller, the server names
    a resource other than itself."""

    type = "login-refused"


class LoginDeclined(OAuthError):
    """The person was asked to sign in and said no (or did not answer in time)."""

    type = "login-declined"


class GrantStoreError(OAuthError):
    """The store of grants cannot be opened or used (an unknown URL, a database down, no
    key to encrypt with where one is needed)."""

    type = "grant-store-error"
