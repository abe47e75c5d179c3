"""What a RabbitMQ connection tells the log: each loss once, each reason once, the return
once — and aio-pika's and aiormq's own lines about the same events left out for toolmesh's
connections (:mod:`toolmesh.bus.rabbitmq`)."""

from __future__ import annotations

import contextvars
import logging

from toolmesh.bus.rabbitmq_errors import CONNECTION_ERRORS, connect_failure, loss_reason
from toolmesh.urls import mask_url

log = logging.getLogger("toolmesh.bus.rabbitmq")


class ConnectionReport:
    """What one connection tells the log about losing the broker, each thing once.

    The library's records of the connection's attempts reach it through
    :class:`LibraryConnectionLines`; it tells them in toolmesh's words.
    """

    def __init__(self, url: str, *, reconnect_interval: float) -> None:
        self.url = url
        self.reconnect_interval = reconnect_interval
        #: whether the connection worked once (before, a failure is the connect's BusError)
        self.opened = False
        self.closing = False
        self._lost = False
        self._reason: str | None = None

    def lost(self, error: BaseException | None) -> None:
        if self.closing or self._lost:
            return
        self._lost = True
        log.warning("lost the connection to RabbitMQ at %s (%s); reconnecting every %g s",
                    mask_url(self.url), loss_reason(error), self.reconnect_interval)

    def attempt_failed(self, error: BaseException) -> None:
        if self.closing or not self.opened:
            return
        reason = connect_failure(self.url, error)
        if reason != self._reason:  # a new reason is news; the same one again is not
            self._reason = reason
            log.warning("still no connection to RabbitMQ at %s: %s; retrying every %g s",
                        mask_url(self.url), reason, self.reconnect_interval)

    def reconnected(self) -> None:
        self._lost, self._reason = False, None
        log.info("reconnected to RabbitMQ at %s", mask_url(self.url))


#: the report of the connection whose machinery runs in this context: aio-pika starts the
#: connection's tasks in the task that connects, so they inherit it
current_report: contextvars.ContextVar[ConnectionReport | None] = contextvars.ContextVar(
    "toolmesh_rabbitmq_report", default=None)

#: aio-pika's and aiormq's records of connection attempts and losses (their format strings)
_ATTEMPT_FAILED = 'Connection attempt to "%s" failed'
_CHURN = ("error when creating transport", "Connection to %s closed. Reconnecting",
          _ATTEMPT_FAILED, "Unexpected connection close from remote",
          "Cancelling cause reader exited abnormally")
#: aio-pika's record of a callback that failed: a channel that tried to restore itself
#: while the connection was still down (the connection restores it once it is back)
_CALLBACK_FAILED = "Callback %r error"
_LIBRARY_LOGGERS = ("aiormq.connection", "aio_pika.robust_connection", "aio_pika.tools")


class LibraryConnectionLines(logging.Filter):
    """Leaves out aio-pika's and aiormq's lines about a toolmesh connection's attempts and
    losses (its :class:`ConnectionReport` says the same once); other records, and those of
    connections toolmesh did not open, pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        report = current_report.get()
        if report is None or not isinstance(record.msg, str) or not _is_churn(record):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg.startswith(_ATTEMPT_FAILED) and len(args) > 1 \
                and isinstance(args[1], BaseException):
            report.attempt_failed(args[1])
        return False


def _is_churn(record: logging.LogRecord) -> bool:
    msg = str(record.msg)
    if msg.startswith(_CALLBACK_FAILED):
        args = record.args if isinstance(record.args, tuple) else ()
        return len(args) == 3 and "RobustChannel._on_close" in repr(args[0]) \
            and isinstance(args[2], CONNECTION_ERRORS)
    return msg.startswith(_CHURN)


def quiet_library_lines() -> None:
    for name in _LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, LibraryConnectionLines) for f in logger.filters):
            logger.addFilter(LibraryConnectionLines())
