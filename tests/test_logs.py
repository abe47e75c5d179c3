"""The log redactor: what a record may never carry, whatever logged it."""

from __future__ import annotations

import io
import logging

from toolmesh.gateway.http_log import MalformedRequestLog
from toolmesh.logs import Redactor, register_secret


def emit(logger_name: str, msg: str, *args: object, exc: BaseException | None = None,
         extra_filter: logging.Filter | None = None) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(Redactor())
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    if extra_filter is not None:
        logger.addFilter(extra_filter)
    old_level, logger.propagate = logger.level, False
    logger.setLevel(logging.DEBUG)
    try:
        logger.error(msg, *args, exc_info=(type(exc), exc, exc.__traceback__) if exc else None)
    finally:
        logger.removeHandler(handler)
        if extra_filter is not None:
            logger.removeFilter(extra_filter)
        logger.setLevel(old_level)
        logger.propagate = True
    return stream.getvalue()


def test_urls_bearer_tokens_and_registered_secrets_are_masked() -> None:
    register_secret("s3cret-registered-value")
    out = emit("tests.logs", "connecting to %s with %s; header Authorization: Bearer abcdefgh12345;"
               " key %s", "http://u:pw@h/mcp?api_key=KKKK", "Bearer zyxwvuts9876",
               "s3cret-registered-value")
    for secret in ("pw@", "KKKK", "abcdefgh12345", "zyxwvuts9876", "s3cret-registered-value"):
        assert secret not in out
    assert "http://u:***@h/mcp?api_key=***" in out


def test_a_scoped_token_keeps_its_id_and_loses_its_secret() -> None:
    from toolmesh.config.tokens import mint

    id, token = mint()
    out = emit("tests.logs", "client sent %r", {"type": "auth", "token": token})
    assert token.split("_", 2)[2] not in out and f"tmk_{id}_***" in out


def test_tracebacks_are_masked_too() -> None:
    try:
        raise ValueError("failed for http://u:tb-password@h/x")
    except ValueError as e:
        out = emit("tests.logs", "boom", exc=e)
    assert "tb-password" not in out and "Traceback" in out and "http://u:***@h/x" in out


def test_a_malformed_http_request_is_one_warning_line_without_the_raw_header() -> None:
    from aiohttp.http_exceptions import BadHttpMessage

    error = BadHttpMessage("Invalid header value char:\n\n  b'Authorization: Bearer raw-tok\\x01'\n ^")
    out = emit("aiohttp.server", "Error handling request from %s", "127.0.0.1", exc=error,
               extra_filter=MalformedRequestLog())
    assert out.strip() == ("malformed HTTP request from 127.0.0.1: Invalid header value char "
                           "(HTTP 400)")
