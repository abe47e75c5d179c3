"""Logging for toolmesh processes: one line per record on stderr, and never a secret.

:func:`configure_logging` (called from ``main``, never at import) installs a
:class:`Redactor` on the handler, so every record — toolmesh's own and every library's, at
every level, tracebacks included — is cleaned before it is written:

* each URL loses its password and secret query parameters (:func:`toolmesh.urls.mask_url`);
* ``Bearer <token>`` and ``Authorization: <anything>`` lose the credential;
* a scoped gateway token (``tmk_<id>_<secret>``) keeps its id and loses its secret;
* every value a part registered with :func:`register_secret` (the gateway token, the LLM API
  key, MCP auth tokens and stdio env values as config delivers them) is replaced by ``***``.

The HTTP client libraries' per-request INFO lines (httpx) are quietened to WARNING.
"""

from __future__ import annotations

import logging
import re
import threading

from toolmesh.urls import MASK, mask_urls_in

__all__ = ["Redactor", "configure_logging", "redact", "register_secret"]

#: shorter values are not registered: masking them would garble ordinary words
MIN_SECRET_LENGTH = 6
#: INFO of these is a line per request or per MCP session (the SDK's server logs each one it
#: opens and ends, with its id: thousands of lines, and seconds of a SIGTERM, under a flood)
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "hpack",
                 "mcp.server.streamable_http", "mcp.server.streamable_http_manager")

_BEARER = re.compile(r"\b(Bearer|BEARER|bearer)\s+[A-Za-z0-9._~+/=\-]{8,}")
_SCOPED_TOKEN = re.compile(r"\b(tmk_[0-9a-f]{12}_)[A-Za-z0-9_-]{8,}")
_AUTH_HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key)(['\"]?\s*[:=]\s*['\"]?)"
                          r"[^\s'\",}]+(?:\s+[^\s'\",}]+)?")

_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()
_pattern: re.Pattern[str] | None = None


def register_secret(value: str | None) -> None:
    """Make every later log record show ``value`` as ``***``."""
    global _secrets, _pattern
    if not value or len(value) < MIN_SECRET_LENGTH or value == MASK or value in _secrets:
        return
    with _lock:
        _secrets = _secrets | {value}
        # longest first: a secret that contains another is masked whole
        _pattern = re.compile("|".join(re.escape(s) for s in
                                       sorted(_secrets, key=len, reverse=True)))


def redact(text: str) -> str:
    """``text`` without the secrets this process knows of or can recognise."""
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    text = mask_urls_in(text)
    if "tmk_" in text:
        text = _SCOPED_TOKEN.sub(lambda m: f"{m.group(1)}{MASK}", text)
    if "earer" in text or "EARER" in text:
        text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    if "uthorization" in text or "pi-key" in text or "PI-KEY" in text:
        text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return text


class Redactor(logging.Filter):
    """A handler filter that rewrites each record with :func:`redact` (message, arguments,
    traceback and stack) before any formatter sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a library's bad format string: show it unformatted
            message = f"{record.msg!r} % {record.args!r}"
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def configure_logging(level: str = "INFO") -> None:
    """Log to stderr, one line per record, through a :class:`Redactor`; with tracing on, a
    line written within a span ends with its trace id (:class:`~toolmesh.telemetry.tracing.
    TraceIds`)."""
    from toolmesh.telemetry.tracing import TraceIds

    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, Redactor) for f in handler.filters):
            handler.addFilter(Redactor())
        if not any(isinstance(f, TraceIds) for f in handler.filters):
            handler.addFilter(TraceIds())  # after the redactor: the id is no secret
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
