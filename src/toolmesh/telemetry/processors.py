"""Which services this process runs, as TrustGraph's own metrics say it: ``processor_info``
and ``consumer_state``.

TrustGraph's tools read a deployment's health from two metrics every processor exports:
``tg-verify-system-status`` counts the ``processor_info`` samples, and ``tg-show-flow-state``
lists the ``consumer_state{consumer_state="running", flow=...}`` ones. toolmesh records them
for real: a service is a processor (named by its topic, e.g. ``agent``) while at least one of
its consumers runs, and each consumer (one per queue it serves) is ``running`` between its
service's start and stop. Nothing here is made up for the tools' sake: a process shows only
what it runs, so a gateway alone shows none of the services of other processes.

Services call :func:`consumer_started` and :func:`consumer_stopped`; the metrics are served
like every other (``/metrics``, and ``/api/metrics/query``, :mod:`toolmesh.telemetry.query`).
"""

from __future__ import annotations

import threading
from collections import Counter

from prometheus_client import Enum, Info

processor_info = Info("processor", "A toolmesh service running in this process (TrustGraph's "
                                   "processor)", ["processor"])
consumer_state = Enum("consumer_state", "Whether a service's consumer of one queue runs",
                      ["processor", "flow", "name"], states=["stopped", "running"])

_lock = threading.Lock()
#: processor -> how many of its consumers run
_running: Counter[str] = Counter()


def names(topic: str) -> tuple[str, str]:
    """``(processor, flow)`` of a request queue's topic: ``agent:default`` → ``("agent",
    "default")``; a topic without a flow (``config``) has flow ``""``."""
    processor, _, flow = topic.partition(":")
    return processor, flow


def consumer_started(topic: str, subscription: str, *, kind: str) -> None:
    """The service ``kind`` (its class) consumes the queue of ``topic`` as ``subscription``."""
    processor, flow = names(topic)
    with _lock:
        _running[processor] += 1
        processor_info.labels(processor=processor).info({"kind": kind})
        consumer_state.labels(processor=processor, flow=flow, name=subscription).state("running")


def consumer_stopped(topic: str, subscription: str) -> None:
    """That consumer stopped; the processor goes with its last consumer."""
    processor, flow = names(topic)
    with _lock:
        consumer_state.labels(processor=processor, flow=flow, name=subscription).state("stopped")
        _running[processor] -= 1
        if _running[processor] <= 0:
            del _running[processor]
            processor_info.remove(processor)
