"""How long the gateway waits for each service, and what it tells a caller who waited.

Each route has a deadline that fits its work: config operations a few seconds, a tool call a
couple of minutes, an agent dialog ten. A request may ask for less (the ``X-Timeout`` header,
or ``"timeout"`` in a WebSocket frame), never more: the operator's figure is the ceiling.
The deadline travels with the request on the bus (:mod:`toolmesh.rpc.deadline`), so every
service behind the gateway gives up first and says why.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toolmesh.errors import ToolmeshError

#: seconds per service; other services get ``fallback``
DEFAULT_DEADLINES: Mapping[str, float] = MappingProxyType({
    "config": 10.0,
    "flow": 10.0,
    "mcp-tool": 130.0,
    "tool-service": 130.0,
    "agent": 600.0,
    # the agent asks each tool whether it can work, within a budget of its own (3 s)
    "agent-tools": 30.0,
    # answered from what the agent holds: nothing to wait for but the agent itself
    "agent-services": 30.0,
    # one read of the dialog journal
    "dialogs": 30.0,
    # a read of the journal, or an answer recorded and announced
    "approvals": 30.0,
    # one LLM answer: a whole one fails at the provider's 120 s first (its error, not ours,
    # reaches the caller); a streamed one may take longer while its pieces keep coming
    "prompt": 300.0,
    "text-completion": 300.0,
})

#: how to check a service that did not answer (ends the 503/504 message)
HINTS: Mapping[str, str] = MappingProxyType({
    "config": "is `toolmesh run config` running? (`toolmesh serve` runs every part)",
    "agent": "is `toolmesh run agent` running for this flow?",
    "mcp-tool": "is `toolmesh run mcp-tool` running for this flow?",
    "agent-tools": "is `toolmesh run agent` running for this flow? (the agent answers it)",
    "agent-services": "is `toolmesh run agent` running for this flow? (the agent answers it)",
    "dialogs": "is `toolmesh run agent` running for this flow, recording dialogs? (the agent "
               "answers it unless started with --dialogs off)",
    "approvals": "is `toolmesh run agent` running for this flow? (the agent answers it)",
    "prompt": "is `toolmesh run prompt` running? (it needs `toolmesh run text-completion`)",
    "text-completion": "is `toolmesh run text-completion` running?",
})


class DeadlineError(ToolmeshError):
    """A deadline given on the command line or in a request is not a usable number."""

    type = "bad-request"


@dataclass(frozen=True, kw_only=True)
class Deadlines:
    """Seconds the gateway waits for each service (the default and the most a request gets)."""

    seconds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_DEADLINES))
    fallback: float = 60.0

    def __post_init__(self) -> None:
        for service, value in self.seconds.items():
            _check(value, f"the deadline of {service!r}")

    def of(self, service: str) -> float:
        """The deadline of ``service``."""
        return self.seconds.get(service, self.fallback)

    def for_request(self, service: str, asked: Any) -> float:
        """The deadline of one request that asked for ``asked`` seconds (``None``: the
        route's); :class:`DeadlineError` if ``asked`` is not a positive number."""
        ceiling = self.of(service)
        if asked is None:
            return ceiling
        if isinstance(asked, str):
            try:
                asked = float(asked.strip())
            except ValueError:
                raise DeadlineError(f"the timeout must be a number of seconds, not "
                                    f"{asked[:40]!r}") from None
        if isinstance(asked, bool) or not isinstance(asked, (int, float)):
            raise DeadlineError(f"the timeout must be a number of seconds, not "
                                f"{type(asked).__name__}")
        _check(float(asked), "the timeout")
        return min(float(asked), ceiling)

    def with_overrides(self, specs: Iterable[str]) -> Deadlines:
        """These deadlines with ``SERVICE=SECONDS`` overrides (``--deadline``)."""
        seconds = dict(self.seconds)
        for spec in specs:
            service, sep, value = spec.partition("=")
            if not sep or not service.strip():
                raise DeadlineError(f"--deadline takes SERVICE=SECONDS (e.g. agent=300), "
                                    f"not {spec!r}")
            try:
                seconds[service.strip()] = float(value)
            except ValueError:
                raise DeadlineError(f"--deadline {spec!r}: {value!r} is not a number of "
                                    "seconds") from None
        return Deadlines(seconds=seconds, fallback=self.fallback)


def _check(value: float, what: str) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise DeadlineError(f"{what} must be a positive number of seconds, not {value:g}")


def hint(service: str) -> str:
    """How to check ``service`` when it did not answer."""
    return HINTS.get(service, f"is a service for {service!r} running?")
