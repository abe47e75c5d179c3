"""A call that needs a person's approval, asked of the MCP client's person (elicitation).

A tool whose approval policy asks a person (docs/approvals.md) is called through ``/mcp`` only
when the client's person approves that very call: the endpoint asks with a form-mode
question — the tool, its exact arguments, "approve?" and a reason — and the agent runs the
call only with the digest of the call that was shown (a changed call needs a new approval).
The question goes as an ``elicitation/create`` request during the call (the ``initialize``
revisions), or as the call's ``InputRequiredResult`` to a 2026-07-28 client, which calls again
with the answer (:mod:`.input_required`). Who may be asked: a client that declared form
elicitation, holding a token that may ``approve`` in the workspace. Anyone else is told why
the call did not run and what to do (:func:`cannot_ask`); so is a person who declines,
cancels, says no, or does not answer within :data:`APPROVAL_TIMEOUT`.
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


def cannot_ask(ctx: ServerRequestContext[Any, Any], caller: Any) -> str | None:
    """Why the person behind ``ctx``'s client cannot be asked to approve a call, and what to
    do about it (the end of a sentence); ``None`` when they can."""
    identity = caller.identity
    if identity is not None and not identity.may("approve"):
        return ("this token may not approve calls: give the MCP client a token that may "
                f"(`toolmesh token create -w {caller.workspace} -c tools:invoke,approve`)")
    if not takes_forms(ctx):
        return ("this MCP client cannot put a question to its person (it declared no form "
                "elicitation): use a client that supports elicitation, or call the tool "
                "from a toolmesh dialog (`toolmesh agent`, the Workbench)")
    return None


def takes_forms(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether ``ctx``'s client declared form elicitation (an empty elicitation capability
    means form mode: the revisions before URL mode)."""
    capabilities = getattr(ctx.session, "client_capabilities", None)
    elicitation = getattr(capabilities, "elicitation", None)
    return elicitation is not None and not (elicitation.form is None
                                            and elicitation.url is not None)


def refused(tool: str, reason: str) -> str:
    """What the client is told of a call of ``tool`` that needs a person no one could ask."""
    return f"{tool!r} waits for a person's approval before each call (its approval policy), " \
        f"and {reason}"


def question(asked: dict[str, Any]) -> str:
    """The question put to the person about ``asked`` (``{"tool", "arguments", ...}``)."""
    tool = str(asked.get("tool"))
    shown = json.dumps(asked.get("arguments"), ensure_ascii=False, sort_keys=True)
    return (f"toolmesh asks before each call of {tool!r} (its approval policy). "
            f"Approve this call?\n\ntool: {tool}\narguments: {shown}")


def asker(ctx: ServerRequestContext[Any, Any], caller: Any) -> Ask:
    """How to ask the person behind ``ctx``'s client over its session's back channel (a
    client that cannot be asked is told why, at once)."""
    identity = caller.identity
    reason = cannot_ask(ctx, caller)

    async def ask(asked: dict[str, Any]) -> str | None:
        tool = str(asked.get("tool"))
        if reason is not None:
            return refused(tool, reason)
        try:
            async with asyncio.timeout(APPROVAL_TIMEOUT):
                answer = await ctx.session.elicit_form(question(asked), SCHEMA,
                                                       related_request_id=ctx.request_id)
        except TimeoutError:
            return f"no one approved the call of {tool!r} within {APPROVAL_TIMEOUT:g} s"
        except Exception as e:  # a client that failed to answer: its words stay in our log
            log.info("could not ask for approval of %s: %r", tool, e)
            return refused(tool, "the MCP client did not answer the question put to its "
                                 "person: check that it shows elicitation questions, or call "
                                 "the tool from a toolmesh dialog (`toolmesh agent`, the "
                                 "Workbench)")
        who = getattr(identity, "id", "local")
        return decide(tool, answer, who=who, digest=str(asked.get("digest")))

    return ask


def decide(tool: str, answer: mcp_types.ElicitResult, *, who: str,
           digest: str) -> str | None:
    """The person's ``answer`` about the call of ``tool`` whose digest is ``digest``:
    ``None`` when they approved it, else what the client is told."""
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
