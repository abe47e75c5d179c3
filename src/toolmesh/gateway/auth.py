"""The gateway's optional bearer token."""

from __future__ import annotations

import hmac


class Auth:
    """Accepts everything when no token is set; otherwise exactly that token."""

    def __init__(self, token: str | None) -> None:
        self._token = token or None

    @property
    def required(self) -> bool:
        return self._token is not None

    def accepts(self, token: str | None) -> bool:
        if self._token is None:
            return True
        # constant-time comparison: the token is a secret. surrogateescape: a header that was
        # not UTF-8 reaches us with escaped bytes; it is simply not the token.
        return token is not None and hmac.compare_digest(
            token.encode("utf-8", "surrogateescape"),
            self._token.encode("utf-8", "surrogateescape"))

    def accepts_header(self, header: str | None) -> bool:
        """Check an ``Authorization: Bearer <token>`` header."""
        if self._token is None:
            return True
        scheme, _, token = (header or "").partition(" ")
        return scheme.lower() == "bearer" and self.accepts(token.strip())
