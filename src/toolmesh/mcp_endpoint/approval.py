"""A call that needs a person's approval, asked of the MCP client's person (elicitation).

A tool whose approval policy asks a person (docs/approvals.md) is called through ``/mcp`` only
when the client's person approves that very call: the endpoint asks with a form-mode
``elicitation/create`` — the tool, its exact arguments, "approve?" and a reason — and the agent
runs the call only with the digest of the call that was shown (a changed call needs a new
approval). Who may be asked: a client that declared form elicitation, over a session with a
back channel, holding a token that may ``approve`` in the workspace. Anyone else is told why
the call did not run; so is a person who declines, cancels, says no, or does not answer within
:data:`APPROVAL_TIMEOUT`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types
from mcp.server.context import ServerRequestContext

log = logging.getLogger("toolmesh.mcp_endpoint")

#: asks the caller's person about ``{"tool", "arguments", "digest"}``: ``None`` when they
#: approve, else what the client is told
Ask = Callable[[dict[str, Any]], Awaitable[str | None]]

#: seconds a person has to answer
APPROVAL_TIMEOUT = 300.0

#: what the person fills in
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve this call?"},
        "reason": {"type": "string", "title": "Why not (the caller is told)", "maxLength": 2000},
    },
    "required": ["approve"],
}


class Deferred(Exception):
    """The call needs a person, and this path cannot ask one (the SDK's path can)."""


async def defer(asked: dict[str, Any]) -> str | None:
    """The fast path's :data:`Ask`: hand the request to the path that can ask."""
    raise Deferred(asked.get("tool"))


def asker(ctx: ServerRequestContext[Any, Any], caller: Any) -> Ask | None:
    """How to ask the person behind ``ctx``'s client, or ``None`` if no one can be asked."""
    identity = caller.identity
    if identity is not None and not identity.may("approve"):
        return None
    capabilities = getattr(ctx.session, "client_capabilities", None)
    elicitation = getattr(capabilities, "elicitation", None)
    # an empty elicitation capability means form mode (the revisions before URL mode)
    if elicitation is None or (elicitation.form is None and elicitation.url is not None):
        return None

    async def ask(asked: dict[str, Any]) -> str | None:
        tool = str(asked.get("tool"))
        shown = json.dumps(asked.get("arguments"), ensure_ascii=False, sort_keys=True)
        message = (f"toolmesh asks before each call of {tool!r} (its approval policy). "
                   f"Approve this call?\n\ntool: {tool}\narguments: {shown}")
        try:
            async with asyncio.timeout(APPROVAL_TIMEOUT):
                answer = await ctx.session.elicit_form(message, SCHEMA,
                                                       related_request_id=ctx.request_id)
        except TimeoutError:
            return f"no one approved the call of {tool!r} within {APPROVAL_TIMEOUT:g} s"
        except Exception as e:  # no back channel (a 2026-07-28 exchange), a client error
            log.info("could not ask for approval of %s: %r", tool, e)
            return (f"{tool!r} waits for a person's approval before each call, and this "
                    f"client could not be asked ({e})")
        who = getattr(identity, "id", "local")
        return _decision(tool, answer, who=who, digest=str(asked.get("digest")))

    return ask


def _decision(tool: str, answer: mcp_types.ElicitResult, *, who: str,
              digest: str) -> str | None:
    content = answer.content or {}
    if answer.action == "accept" and content.get("approve") is True:
        log.info("call of %s (%s) approved through MCP by %s", tool, digest, who)
        return None
    reason = content.get("reason") if answer.action == "accept" else None
    log.info("call of %s (%s) not approved through MCP by %s: %s", tool, digest, who,
             answer.action)
    if answer.action == "accept":
        said = f": {str(reason)[:2000]}" if isinstance(reason, str) and reason.strip() else ""
        return f"the person did not approve the call of {tool!r}{said}"
    did = {"decline": "declined", "cancel": "cancelled"}.get(answer.action, answer.action)
    return f"the person {did} the approval of the call of {tool!r}"
