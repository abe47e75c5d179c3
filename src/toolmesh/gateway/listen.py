"""Listening sockets bound before the gateway starts.

The command line binds the gateway's address first, so a port already in use is reported
before anything else starts (not after the bus, the config store and every service did), and
hands the sockets to the gateway: nothing can take the port in between.
"""

from __future__ import annotations

import socket
import sys

#: the listen backlog, aiohttp's default
BACKLOG = 128


def bind_listeners(host: str, port: int, *, backlog: int = BACKLOG) -> list[socket.socket]:
    """Sockets listening on ``port`` of every address ``host`` resolves to, bound as asyncio's
    ``create_server`` binds them; :class:`OSError` when one cannot be bound (none is left
    open then)."""
    infos = socket.getaddrinfo(host or None, port, family=socket.AF_UNSPEC,
                               type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    addresses = dict.fromkeys((family, kind, proto, address)  # getaddrinfo repeats some
                              for family, kind, proto, _, address in infos)
    listeners: list[socket.socket] = []
    try:
        for family, kind, proto, address in addresses:
            sock = socket.socket(family, kind, proto)
            listeners.append(sock)
            if sys.platform != "win32":
                # as asyncio does: a restarted gateway may bind while old connections linger
                # in TIME_WAIT (a listening socket still refuses a second bind)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                # one socket per family, as asyncio: "::" must not also take IPv4's port
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
    except OSError:
        for sock in listeners:
            sock.close()
        raise
    return listeners
