"""Who answered a call that waited for a person, and through which face; the log lines and
metrics of each wait (docs/approvals.md).

Every answer records its approver as ``"by": {"id", "name", "face"}``:

* ``id``: the token's id, ``admin`` (the gateway's own token) or ``local`` (no gateway token
  set), as the gateway stamped the request (``actor``, overwriting whatever the client sent:
  :mod:`toolmesh.gateway.access`); ``bus`` for a request that did not come through the
  gateway and names no one;
* ``name``: the scoped token's name (``""`` for the others);
* ``face``: ``rest`` or ``websocket`` (the route the gateway took the request on), refined by
  the client's own hint ``"via": "workbench"`` or ``"cli"`` (only those two; informational:
  the route is the gateway's); ``mcp`` for a call approved by an MCP client's person through
  ``/mcp``; ``bus`` for a request from inside the deployment.

A request that expires has no ``by``: no one decided.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from toolmesh.approvals.wire import APPROVAL, ELICITATION, now, parse_time
from toolmesh.config.admin import ACTOR_FIELD
from toolmesh.telemetry import metrics

log = logging.getLogger("toolmesh.approvals")

#: beside ``actor`` on approvals requests, stamped by the gateway: the token's name, the face
NAME_FIELD = "actor-name"
FACE_FIELD = "actor-face"
#: a client's hint of the face it is (only :data:`HINTS` are taken)
VIA_FIELD = "via"
HINTS = ("workbench", "cli")
FACES = ("workbench", "cli", "websocket", "rest", "mcp", "bus")
#: the face of each of the gateway's routes
ROUTE_FACES = {"rest": "rest", "socket": "websocket"}


def face_of(route: str, via: Any) -> str:
    """The face of a request the gateway took on ``route`` whose client says ``via``."""
    if via in HINTS:
        return str(via)
    return ROUTE_FACES.get(route, "bus")


def stamped(request: Mapping[str, Any], *, id: str, name: str, route: str) -> dict[str, Any]:
    """``request`` with who sends it and through which face, overwriting the client's own."""
    return {**request, ACTOR_FIELD: id, NAME_FIELD: name,
            FACE_FIELD: face_of(route, request.get(VIA_FIELD))}


def approver(request: Mapping[str, Any]) -> dict[str, str]:
    """The ``by`` of the answer ``request`` gives (see the module docstring)."""
    actor, name, face = (request.get(k) for k in (ACTOR_FIELD, NAME_FIELD, FACE_FIELD))
    return {"id": actor if isinstance(actor, str) and actor else "bus",
            "name": name if isinstance(name, str) else "",
            "face": face if face in FACES else "bus"}


def who(by: Any) -> str:
    """``by`` in words for a log line: ``token 'ci' (t_1a2b) through cli``."""
    if not isinstance(by, Mapping):
        return "no one"
    name = f"token {by.get('name')!r} ({by.get('id')})" if by.get("name") else str(by.get("id"))
    return f"{name} through {by.get('face')}"


def answer_command(request: Mapping[str, Any]) -> str:
    """The command that answers ``request`` from a terminal (the gateway's URL left out)."""
    words = ["toolmesh", "approvals"]
    if request.get("kind") == ELICITATION:
        words += ["answer", str(request.get("call")), "accept|decline|cancel"]
    else:
        words += ["approve", str(request.get("call"))]
    workspace = request.get("workspace")
    if isinstance(workspace, str) and workspace != "default":
        words += ["-w", workspace]
    return " ".join(w if w == "accept|decline|cancel" else shlex.quote(w) for w in words)


def began(request: Mapping[str, Any]) -> None:
    """``request`` begins to wait for a person: logged, and counted as waiting until
    :func:`ended`."""
    log.info("call %s of dialog %s (%s, %s) waits for a person; answer it with: %s",
             request.get("call"), request.get("dialog"), request.get("tool"),
             request.get("digest"), answer_command(request))
    metrics.approval_waiting(kind=str(request.get("kind") or APPROVAL), change=1)


def ended(request: Mapping[str, Any]) -> None:
    """``request`` waits no more (answered, expired, or its dialog stopped)."""
    metrics.approval_waiting(kind=str(request.get("kind") or APPROVAL), change=-1)


@contextmanager
def waiting(request: Mapping[str, Any]) -> Iterator[None]:
    """Around a wait for a person's answer to ``request`` (:func:`began`, :func:`ended`)."""
    began(request)
    try:
        yield
    finally:
        ended(request)


def decided(request: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
    """``request`` was answered with ``answer``: logged and counted, with the time it took."""
    kind = str(request.get("kind") or APPROVAL)
    decision = str(answer.get("decision"))
    asked, at = parse_time(request.get("asked")), parse_time(answer.get("at")) or now()
    seconds = (at - asked).total_seconds() if asked is not None else None
    by = answer.get("by")
    after = f" after {seconds:.1f} s" if seconds is not None else ""
    log.info("call %s of dialog %s (%s): %s by %s%s", request.get("call"),
             request.get("dialog"), request.get("tool"), decision, who(by), after)
    face = str(by.get("face")) if isinstance(by, Mapping) else "none"
    metrics.approval_decided(kind=kind, decision=decision, face=face, seconds=seconds)


def approved_through_mcp(*, tool: str, digest: str, actor: str | None,
                         name: str | None = None) -> None:
    """A call made through ``/mcp`` ran with its person's approval (no dialog records it:
    the log line and the metrics are its audit)."""
    by = {"id": actor or "local", "name": name or "", "face": "mcp"}
    log.info("call of %s (%s) outside any dialog: approve by %s", tool, digest, who(by))
    metrics.approval_decided(kind=APPROVAL, decision="approve", face="mcp", seconds=None)
