"""What a login is for: one ``mcp`` item's server, in one workspace."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from toolmesh.mcp_oauth.discovery import canonical_resource
from toolmesh.schema.mcp_auth import OAuthSettings


@dataclass(frozen=True, kw_only=True)
class LoginTarget:
    """The server an item names, and how the item says to sign in to it."""

    workspace: str
    item: str
    url: str
    settings: OAuthSettings
    #: which addresses the server may be reached at (``any`` or ``public``: mcp/addresses.py);
    #: the authorization server's too
    reach: str = "any"

    @property
    def resource(self) -> str:
        """The server's canonical URL: what its grants are kept under."""
        return canonical_resource(self.url)

    @property
    def host(self) -> str:
        """The server's host, to name it to a person."""
        return urlsplit(self.url).hostname or self.url
