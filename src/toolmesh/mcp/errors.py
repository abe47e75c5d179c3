"""The error of the MCP layer, and how a transport failure reads to a user."""

from __future__ import annotations

from typing import Any

import errno
from collections.abc import Iterator

from toolmesh.errors import ToolmeshError
from toolmesh.urls import mask_urls_in


class McpError(ToolmeshError):
    """An MCP server could not be reached, failed, or did not answer in time.

    Travels on the wire as ``{"type": "mcp-error", "message": ...}``; the message names the
    server (never its token) and says what to check.
    """

    type = "mcp-error"


class InvalidArguments(McpError):
    """The server refused a call's arguments (JSON-RPC "invalid params", or a validation
    error result): the caller's copy of the tool's schema may be stale."""

    type = "invalid-arguments"


class McpUnreachable(McpError):
    """An MCP server could not be reached or did not speak MCP: one message whatever the
    cause (refused, closed, timed out, not MCP, an address the item may not use), so that an
    item cannot be used to learn what listens where. The cause goes to the operator's log.
    On the wire: ``mcp-error``, like every failure here."""

    @classmethod
    def at(cls, server_id: str, where: str) -> McpUnreachable:
        return cls(f"cannot connect to MCP server {server_id!r} at {where}: it cannot be "
                   "reached as an MCP server this item may use (the operator's log says "
                   "why); check the item's url, or ask the operator")


class McpTokenRefused(McpError):
    """An MCP server answered the handshake with HTTP 401 or 403 (``mcp-error`` on the
    wire)."""

    @classmethod
    def at(cls, server_id: str, where: str, status: str, *,
           has_token: bool) -> McpTokenRefused:
        fix = ("check the item's auth-token" if has_token
               else "it needs one: set the item's auth-token")
        return cls(f"cannot connect to MCP server {server_id!r} at {where}: it refused the "
                   f"token ({status}); {fix}")


class McpSignInRefused(McpError):
    """A server that wants OAuth refused the caller's grant (401: none, expired beyond
    refresh, revoked; 403: too narrow). The service asks the person to sign in, or says
    how to (``login-required`` on the wire)."""

    type = "login-required"

    def __init__(self, message: str, *, challenge: Any) -> None:
        super().__init__(message)
        #: the server's answer (an ``httpx2.Response``: its ``WWW-Authenticate``)
        self.challenge = challenge


def leaves(error: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, or ``error`` itself."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error


def never_reached_server(error: BaseException | None) -> bool:
    """Whether a transport failure proves no request got through (connection refused)."""
    if error is None:
        return False
    import httpx2  # here, not at the top: a CLI that only names McpError need not load it

    return any(isinstance(e, httpx2.ConnectError)
               or (isinstance(e, OSError) and e.errno == errno.ECONNREFUSED)
               for e in leaves(error))


def describe(error: BaseException) -> str:
    """A transport failure in one line (the first meaningful leaf of an exception group),
    with any URL in it masked: library messages may quote the URL with its credentials."""
    return mask_urls_in(_describe(error))


def _describe(error: BaseException) -> str:
    # here, not at the top: the MCP SDK takes ~1 s to import, and a CLI that only reads
    # progress reports (toolmesh mcp invoke) needs McpError but never a transport failure
    import httpx2
    from mcp.shared.exceptions import MCPError

    for leaf in leaves(error):
        if isinstance(leaf, httpx2.HTTPStatusError):
            response = leaf.response
            return f"HTTP {response.status_code} {response.reason_phrase}".strip()
        if isinstance(leaf, httpx2.ConnectError):
            return f"connection refused or unreachable ({leaf})"
        if isinstance(leaf, httpx2.TimeoutException):
            return f"the HTTP request timed out ({type(leaf).__name__})"
        if isinstance(leaf, MCPError):
            return f"{leaf.error.message} (MCP error {leaf.error.code})"
        if isinstance(leaf, OSError):
            return leaf.strerror and f"{leaf.strerror} ({leaf.filename or leaf.errno})" or str(leaf)
        text = str(leaf)
        if text:
            return f"{type(leaf).__name__}: {text}" if not isinstance(leaf, ToolmeshError) else text
    return type(error).__name__


def needs_task_augmentation(name: str) -> str:
    """Why a tool whose server runs it only as a task cannot be called (nor offered)."""
    return (f"MCP tool {name!r} can only be run as a task (its execution.taskSupport is "
            "\"required\"), and toolmesh's MCP client does not support task augmentation; "
            "use a tool the server runs directly")
