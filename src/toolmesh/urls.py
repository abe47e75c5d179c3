"""URL helpers shared by every part that prints, logs or returns a URL.

A URL can carry secrets in two places: the password of its user-info
(``amqp://user:PW@host``) and query parameters whose names say they hold one
(``?api_key=K``, ``?token=T``, ``?sig=S``). :func:`mask_url` replaces both with ``***`` and
leaves every other character of the URL as it was, so a masked URL still says where it
points, and the same URL always masks to the same text (the config service relies on that
to recognise a masked URL sent back unchanged).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import parse_qsl, unquote_plus, urlsplit

__all__ = ["MASK", "is_loopback", "is_secret_name", "mask_url", "url_has_secret",
           "url_passwords"]

MASK = "***"

#: parameter and field names that hold a secret (compared lower-cased, ``-`` read as ``_``)
SECRET_NAMES = frozenset({
    "token", "key", "api_key", "apikey", "secret", "password", "passwd", "pwd", "sig",
    "signature", "access_token", "auth_token", "refresh_token", "id_token", "client_secret",
    "private_key", "credentials", "auth",
})
SECRET_SUFFIXES = ("_token", "_key", "_secret", "_password", "_apikey")


def is_secret_name(name: str) -> bool:
    """Whether a query parameter or config field called ``name`` holds a secret."""
    n = name.strip().lower().replace("-", "_")
    return n in SECRET_NAMES or n.endswith(SECRET_SUFFIXES)


def _mask_query(query: str) -> str:
    # Done by hand rather than with parse_qsl/urlencode, which would re-encode every other
    # parameter: the masked URL must differ from the original only where a secret was.
    pieces = []
    for piece in query.split("&"):
        name, sep, value = piece.partition("=")
        if sep and value and value != MASK and is_secret_name(unquote_plus(name)):
            piece = f"{name}={MASK}"
        pieces.append(piece)
    return "&".join(pieces)


def mask_url(url: str) -> str:
    """``url`` with its password and secret query parameters replaced by ``***``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            if ":" in userinfo:
                user, _, password = userinfo.partition(":")
                if password:
                    userinfo = f"{user}:{MASK}"
            netloc = f"{userinfo}@{host}"
        query = _mask_query(parts.query) if parts.query else parts.query
        if netloc == parts.netloc and query == parts.query:
            return url  # nothing secret; urlunsplit would drop the // of "memory://"
        scheme = f"{parts.scheme}://" if parts.scheme else "//"
        return (scheme + netloc + parts.path + (f"?{query}" if query else "")
                + (f"#{parts.fragment}" if parts.fragment else ""))
    except ValueError:
        # unparseable (e.g. a bad port): show nothing that could be a secret
        return url.split("://", 1)[0] + "://***" if "://" in url else MASK


def url_has_secret(url: str) -> bool:
    """Whether :func:`mask_url` would hide something in ``url``."""
    return mask_url(url) != url


#: a URL inside free text (a log line, an error message): scheme://, then no whitespace or
#: quote; what it matches is masked by :func:`mask_urls_in`
URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>`]+")


def mask_urls_in(text: str) -> str:
    """``text`` with every URL in it masked."""
    if "://" not in text:
        return text
    return URL_IN_TEXT.sub(lambda m: mask_url(m.group(0)), text)


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` only accepts connections from this machine."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def url_passwords(url: str) -> list[str]:
    """The passwords a database URL carries — its user-info's and any ``password`` query
    parameter's — to keep out of error messages that quote the driver."""
    parts = urlsplit(url)
    return [p for p in [parts.password, *(v for k, v in parse_qsl(parts.query)
                                          if k.lower() == "password")] if p]
