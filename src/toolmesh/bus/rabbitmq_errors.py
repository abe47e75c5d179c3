"""Why a connection to RabbitMQ failed, in one line that says what to check.

aiormq's own texts are for its developers: a missing virtual host reads ``Expected one of
['Connection.OpenOk'], got <Connection.Close object at 0x7f…>`` (the broker's reason is lost
on the way), a closed port ``[Errno 111] Connect call failed ('127.0.0.1', 1)``. These
functions turn each failure into the cause and the thing to check; the URL is never part of
them (the caller names it, masked).
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
from urllib.parse import unquote, urlsplit

import aiormq

_DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}
#: getaddrinfo's errors: the host name could not be resolved
_RESOLVE_ERRORS = frozenset(getattr(socket, name) for name in (
    "EAI_NONAME", "EAI_AGAIN", "EAI_FAIL", "EAI_NODATA") if hasattr(socket, name))

#: errors meaning "the connection or channel went away", worth a retry after reconnecting
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionError,
    aiormq.exceptions.AMQPConnectionError,
    aiormq.exceptions.ChannelInvalidStateError,
    aiormq.exceptions.ChannelClosed,
    RuntimeError,  # aio-pika: "Channel is closed" / "connection closed" while reconnecting
    asyncio.TimeoutError,
)
CONNECTION_OR_AMQP_ERRORS: tuple[type[BaseException], ...] = (
    *CONNECTION_ERRORS, aiormq.exceptions.AMQPError)


def connect_failure(url: str, error: BaseException) -> str:
    """Why connecting to ``url`` failed with ``error``, and what to check."""
    host, port, user, vhost = _where(url)
    text = str(error)
    if isinstance(error, aiormq.exceptions.ProbableAuthenticationError) \
            or "ACCESS_REFUSED" in text:
        return f"RabbitMQ refused the login of user {user!r} (check the user and password)"
    if _vhost_refused(error):
        return (f"the virtual host {vhost!r} does not exist or user {user!r} may not use it "
                f"(rabbitmqctl add_vhost {vhost}; rabbitmqctl set_permissions -p {vhost} "
                f"{user} '.*' '.*' '.*')")
    if isinstance(error, aiormq.exceptions.IncompatibleProtocolError):
        return (f"the server at {host}:{port} does not speak AMQP (is that RabbitMQ's AMQP "
                "port, 5672 by default?)")
    cause = _os_cause(error)
    if isinstance(cause, socket.gaierror):
        return f"cannot resolve the host name {host!r} (check the host in the bus URL)"
    if isinstance(cause, ConnectionRefusedError) or _errno(cause) == errno.ECONNREFUSED:
        return f"nothing is listening at {host}:{port} (is RabbitMQ running?)"
    if isinstance(cause, ssl.SSLError):
        return f"the TLS handshake with {host}:{port} failed: {cause.reason or cause}"
    if isinstance(cause, TimeoutError):
        return f"no answer from {host}:{port} (is the host reachable, and is it RabbitMQ?)"
    if cause is not None and getattr(cause, "strerror", None):
        return f"cannot reach {host}:{port}: {cause.strerror}"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def loss_reason(error: BaseException | None) -> str:
    """What ended a working connection, from the exception its close callbacks get."""
    if error is None:
        return "the connection closed"
    args = getattr(error, "args", ())
    # aiormq's ConnectionClosed(320, "CONNECTION_FORCED - broker forced connection closure")
    if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], str):
        return args[1]
    return str(error) or type(error).__name__


def _where(url: str) -> tuple[str, int | str, str, str]:
    """Host, port, user and virtual host of an AMQP URL, with the defaults aiormq uses."""
    parts = urlsplit(url)
    try:
        port: int | str = parts.port or _DEFAULT_PORTS.get(parts.scheme, 5672)
    except ValueError:
        port = "?"
    user = unquote(parts.username) if parts.username else "guest"
    vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
    return parts.hostname or "localhost", port, user, vhost


def _vhost_refused(error: BaseException) -> bool:
    """The broker answered Connection.Open with Connection.Close: the virtual host is missing
    or the user has no permission on it (RabbitMQ's NOT_ALLOWED, reply code 530)."""
    if isinstance(error, aiormq.exceptions.ConnectionNotAllowed):
        return True
    text = str(error)
    # aiormq 7 checks the frame's type before its reply code, so the 530 arrives as this
    return isinstance(error, aiormq.exceptions.InvalidFrameError) \
        and "Connection.OpenOk" in text and "Connection.Close" in text


def _os_cause(error: BaseException) -> BaseException | None:
    """The operating system's error under ``error`` (aiormq wraps it), if any."""
    chain: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in chain and len(chain) < 5:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    # the specific kinds first: aiormq's AMQPConnectionError is an OSError too, wrapping them
    for kind in (socket.gaierror, ConnectionRefusedError, ssl.SSLError, TimeoutError):
        for e in chain:
            if isinstance(e, kind):
                return e
    for e in chain:
        if isinstance(e, OSError) and e.errno is not None:
            if e.errno in _RESOLVE_ERRORS:
                return socket.gaierror(e.errno, e.strerror)
            return e
    return None


def _errno(error: BaseException | None) -> int | None:
    return error.errno if isinstance(error, OSError) else None
