"""URL helpers shared by every part that prints a URL."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["mask_url"]


def mask_url(url: str) -> str:
    """``url`` with any password (user-info or ``password=`` parameter) replaced by ``***``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(k.lower() == "password" for k, _ in pairs):
                query = urlencode([(k, "***" if k.lower() == "password" else v)
                                   for k, v in pairs], safe="*")
        if netloc == parts.netloc and query == parts.query:
            return url  # nothing secret; urlunsplit would drop the // of "memory://"
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    except ValueError:
        # unparseable (e.g. a bad port): show nothing that could be a secret
        return url.split("://", 1)[0] + "://***" if "://" in url else "***"
