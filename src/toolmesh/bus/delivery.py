"""The acknowledgement policy shared by every backend (see :mod:`toolmesh.bus.base`)."""

from __future__ import annotations

import logging
from typing import Literal

from toolmesh.bus.base import Handler, Message, Requeue
from toolmesh.bus.queue_id import QueueId
from toolmesh.telemetry import metrics

log = logging.getLogger("toolmesh.bus")

Outcome = Literal["ack", "requeue", "drop"]


async def run_handler(handler: Handler, message: Message, queue: QueueId, *,
                      redelivered: bool = False) -> Outcome:
    """Run ``handler`` on ``message`` and say what to do with the message afterwards.

    ``redelivered``: the broker says the message was delivered before (to a consumer that
    failed or vanished); counted apart in the bus metrics."""
    metrics.bus_message(queue, "redelivered" if redelivered else "consumed")
    try:
        await handler(message)
    except Requeue:
        metrics.bus_message(queue, "requeued")
        return "requeue"
    except Exception:
        # Never let one message take the consumer down; the traceback is the bug report.
        log.exception("handler failed on a message from %s (id=%s); message dropped",
                      queue, message.id)
        metrics.bus_message(queue, "dropped")
        return "drop"
    return "ack"
