"""What approvals look like on the wire and in the journal (docs/approvals.md).

A call that waits for a person is told to the dialog's client as an agent message
``{"message_type": "approval-request", "approval": REQUEST, ...}`` (an MCP server's question:
``"elicitation-request"``, ``"elicitation": REQUEST``), and recorded as a journal entry of
kind ``approval`` with the same body; its answer is an entry of kind ``answer``.

REQUEST: ``{"kind": "approval" | "elicitation", "dialog", "call", "step", "workspace",
"user", "tool", "arguments", "digest", "asked"?, "expires"}`` (``call``: the call's
idempotency key, unique in the deployment, ``DIALOG/STEP/CALL`` for a dialog's call; ``asked``
and ``expires``: ISO 8601, UTC); an elicitation adds ``"mode": "form" | "url"``,
``"message"``, and ``"schema"`` (form) or ``"url"`` (url).

ANSWER: ``{"dialog", "call", "workspace", "digest", "decision", "reason"?, "content"?, "at",
"by"?}``, where ``decision`` is ``approve`` / ``deny`` / ``expired`` for an approval and
``accept`` / ``decline`` / ``cancel`` / ``expired`` for an elicitation, and ``by`` who gave it:
``{"id", "name", "face"}`` (:mod:`toolmesh.approvals.audit`; none for ``expired``, nor in
answers recorded before it was kept).

Once an answer is in, the dialog tells its client ``{"message_type": "approval-answer",
"answer": ANSWER}`` (without ``content``): a client that waits on a request answered elsewhere
learns by whom.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

APPROVAL = "approval"
ELICITATION = "elicitation"
#: the journal entry of a request, and of its answer
REQUEST_ENTRY = "approval"
ANSWER_ENTRY = "answer"
#: the agent message that tells a dialog's client an answer came
ANSWER_MESSAGE = "approval-answer"
APPROVAL_DECISIONS = ("approve", "deny")
ELICITATION_DECISIONS = ("accept", "decline", "cancel")
EXPIRED = "expired"
#: the longest reason kept (it goes into the model's prompt)
MAX_REASON = 2000


def now() -> datetime:
    return datetime.now(UTC)


def iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_time(text: Any) -> datetime | None:
    """The time of an ISO 8601 text (``None`` for anything else)."""
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def seconds_left(request: dict[str, Any]) -> float:
    """Seconds until ``request`` expires (0 when it has, or says no time)."""
    expires = parse_time(request.get("expires"))
    return max((expires - now()).total_seconds(), 0.0) if expires else 0.0


def open_requests(entries: Iterable[tuple[str, dict[str, Any]]]) -> tuple[
        dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """From a dialog's journal entries ``(kind, body)``: the requests asked, and the first
    answer of each answered one, by call."""
    asked: dict[str, dict[str, Any]] = {}
    answers: dict[str, dict[str, Any]] = {}
    for kind, body in entries:
        call = body.get("call")
        if not isinstance(call, str):
            continue
        if kind == REQUEST_ENTRY:
            asked[call] = body
            answers.pop(call, None)  # asked again (a changed call): the old answer is spent
        elif kind == ANSWER_ENTRY and call not in answers:
            answers[call] = body
    return asked, answers


def request_text(request: dict[str, Any]) -> str:
    """A line for a person: what waits for them."""
    if request.get("kind") == ELICITATION:
        return f"{request.get('tool')} asks: {request.get('message') or ''}".strip()
    arguments = json.dumps(request.get("arguments"), ensure_ascii=False)
    return f"{request.get('tool')} wants to run with {arguments}"
