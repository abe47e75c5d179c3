"""How the HTTP server logs a malformed request: one WARNING line, without the raw request.

aiohttp logs a request it cannot parse with a traceback whose message quotes the offending
line verbatim — which may be ``Authorization: Bearer <token>`` or a request line carrying
``?token=...``. :class:`MalformedRequestLog` rewrites such records to
``malformed HTTP request from PEER: REASON``.
"""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import HttpProcessingError

SERVER_LOGGER = "aiohttp.server"


def reason(error: HttpProcessingError) -> str:
    """What was wrong, without the bytes that were wrong: ``Invalid header value char``."""
    text = str(getattr(error, "message", "") or "").strip().splitlines()
    first = text[0] if text else type(error).__name__
    for quote in (": b'", ': b"', " b'", ' b"'):
        first = first.split(quote, 1)[0]
    return first.rstrip(" :.") or type(error).__name__


class MalformedRequestLog(logging.Filter):
    """Turns aiohttp's traceback for an unparsable request into one WARNING line."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            peer = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg = "malformed HTTP request from %s: %s (HTTP %s)"
            record.args = (peer, reason(error), getattr(error, "code", 400))
            record.exc_info, record.exc_text, record.stack_info = None, None, None
            if record.levelno > logging.WARNING:  # aiohttp logs some at DEBUG: keep those
                record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def quiet_malformed_requests() -> None:
    """Install :class:`MalformedRequestLog` on aiohttp's server logger (once)."""
    logger = logging.getLogger(SERVER_LOGGER)
    if not any(isinstance(f, MalformedRequestLog) for f in logger.filters):
        logger.addFilter(MalformedRequestLog())
