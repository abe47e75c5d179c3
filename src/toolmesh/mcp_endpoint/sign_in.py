"""A tool's MCP server wants its caller to sign in, and the caller came through ``/mcp``: the
sign-in link goes to the MCP client's person as a URL-mode question, whose client shows the
host and asks before opening it: an ``elicitation/create`` request during the call (MCP
2025-11-25), or the call's ``InputRequiredResult`` to a 2026-07-28 client, whose call is held
until it comes back with the answer (:mod:`.input_required`). The call waits for the sign-in
to finish (the mcp-tool service hears it: :mod:`toolmesh.mcp.signin`) and then goes on; a
person who declines or cancels is answered through the ``approvals`` service, and the tool's
result says so.

A client that did not declare URL elicitation cannot be asked: its call fails at once with
``login-required``, naming ``toolmesh mcp login ITEM`` and the Workbench's Connect button.
The fast path (:mod:`.fast_calls`) asks no one: a call it finds needing a sign-in goes to the
SDK's path, which can (:data:`DEFER`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.context import ServerRequestContext

from toolmesh.approvals.wire import seconds_left

log = logging.getLogger("toolmesh.mcp_endpoint")

#: takes a sign-in question (the mcp-tool service's URL-mode request) to the caller's person
SignInAsk = Callable[[dict[str, Any]], Awaitable[None]]
#: answers a question through the approvals service: ``(question, action)``
Answer = Callable[[dict[str, Any], str], Awaitable[None]]


async def DEFER(question: dict[str, Any]) -> None:  # noqa: N802 (a sentinel, named as one)
    """The fast path's :data:`SignInAsk`: it asks no one (see the module docstring)."""
    raise AssertionError("the fast path asks no questions")


def takes_links(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether ``ctx``'s client declared URL elicitation."""
    capabilities = getattr(ctx.session, "client_capabilities", None)
    elicitation = getattr(capabilities, "elicitation", None)
    return elicitation is not None and getattr(elicitation, "url", None) is not None


def url_asker(ctx: ServerRequestContext[Any, Any], answer: Answer) -> SignInAsk | None:
    """How to send a sign-in link to the person behind ``ctx``'s client, or ``None`` when its
    client declared no URL elicitation."""
    if not takes_links(ctx):
        return None

    async def ask(question: dict[str, Any]) -> None:
        if question.get("mode") != "url":
            # a server's form question: this endpoint takes only links to MCP clients
            await answer(question, "decline")
            return
        try:
            async with asyncio.timeout(max(seconds_left(question), 0.0)):
                result = await ctx.session.elicit_url(
                    str(question.get("message") or "Sign in to go on"), str(question["url"]),
                    str(question.get("elicitation_id") or question["call"]),
                    related_request_id=ctx.request_id)
        except TimeoutError:
            await answer(question, "cancel")
            return
        except Exception as e:  # no back channel, a client that failed to answer
            log.info("could not send a sign-in link to the MCP client: %r", e)
            await answer(question, "cancel")
            return
        if result.action != "accept":
            await answer(question, result.action)
        # accepted: the person signs in; the call goes on when the sign-in is kept

    return ask
