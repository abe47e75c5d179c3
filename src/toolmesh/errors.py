"""The error types of toolmesh, one per boundary.

Every error carries a short machine-readable ``type`` (the same strings travel on the wire in
``{"error": {"type": ..., "message": ...}}``) and a message a user can act on.
"""

from __future__ import annotations

from typing import Any


class ToolmeshError(Exception):
    """Base of every error toolmesh raises on purpose."""

    type: str = "toolmesh-error"

    def __init__(self, message: str, *, type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if type is not None:
            self.type = type

    def to_wire(self) -> dict[str, str]:
        """The ``{"type", "message"}`` object used in error responses."""
        return {"type": self.type, "message": self.message}


class QueueIdError(ToolmeshError, ValueError):
    """A queue id in neither of the accepted spellings."""

    type = "queue-id-error"


class BusError(ToolmeshError):
    """The message bus could not do what was asked (connect, publish, subscribe)."""

    type = "bus-error"


class NoConsumer(BusError):
    """A request was published where nothing can receive it: no queue is bound to its
    exchange, or (on the in-memory bus) no consumer reads any of them."""

    type = "no-consumer"


class MalformedMessage(BusError):
    """A message whose body is not the JSON object the receiver expects."""

    type = "malformed-message"


class RequestError(ToolmeshError):
    """A request/response call failed: the service answered with an error, or no answer came.

    ``type`` and ``message`` are the service's own when it sent an error response.
    """

    type = "request-error"

    @classmethod
    def from_wire(cls, error: Any) -> RequestError:
        """Build from the ``error`` field of a response (tolerating odd shapes)."""
        if isinstance(error, dict):
            return cls(str(error.get("message", "")), type=str(error.get("type") or cls.type))
        return cls(str(error))


class RequestTimeout(RequestError, TimeoutError):
    """No (complete) response arrived before the call's deadline."""

    type = "timeout"


class ServiceError(ToolmeshError):
    """Raised inside a service handler to send an error response of a chosen type."""

    type = "service-error"
