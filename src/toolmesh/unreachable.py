"""What to say when the gateway cannot be reached: one line with the cause and what to do,
for every client of it (the CLI, ``toolmesh mcp serve --stdio``)."""

from __future__ import annotations

import errno
from urllib.parse import urlsplit

from toolmesh.urls import mask_url

__all__ = ["gateway_unreachable"]


def gateway_unreachable(url: str, reason: object) -> str:
    """One line saying the gateway at ``url`` could not be reached, why (``reason``: the
    connection's error), and what to do about it."""
    import socket

    where = f"cannot reach the gateway at {mask_url(url)}"
    cause = os_error(reason)
    if isinstance(cause, ConnectionRefusedError) \
            or getattr(cause, "errno", None) == errno.ECONNREFUSED:
        return (f"{where}: nothing is listening there (start it with `toolmesh serve`, or "
                "give its URL with -u or TOOLMESH_URL)")
    if isinstance(cause, socket.gaierror):
        return (f"{where}: cannot resolve the host name {urlsplit(url).hostname!r} (check "
                "-u or TOOLMESH_URL)")
    detail = getattr(cause, "strerror", None) or str(reason)
    return f"{where}: {' '.join(detail.split())} (is `toolmesh serve` running there?)"


def os_error(reason: object) -> BaseException | None:
    """The operating system's error under a connection error (aiohttp and urllib wrap it)."""
    import socket

    chain: list[BaseException] = []
    seen = reason if isinstance(reason, BaseException) else None
    while seen is not None and seen not in chain and len(chain) < 5:
        chain.append(seen)
        inner = getattr(seen, "os_error", None)  # aiohttp's ClientConnectorError
        seen = inner if isinstance(inner, BaseException) else (seen.__cause__ or seen.__context__)
    for kind in (ConnectionRefusedError, socket.gaierror, OSError):
        for e in chain:
            if isinstance(e, kind):
                return e
    return None
