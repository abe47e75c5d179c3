"""Queue naming for tool services."""

from __future__ import annotations


def topic_queues(topic: str) -> tuple[str, str]:
    """The default request and response queues of a short topic name."""
    return f"non-persistent://tg/request/{topic}", f"non-persistent://tg/response/{topic}"


def resolve_queues(*, topic: str | None, request_queue: str | None,
                   response_queue: str | None) -> tuple[str, str]:
    """Either a ``topic`` or both explicit queues; anything else is a usage error."""
    if topic is not None:
        if request_queue is not None or response_queue is not None:
            raise ValueError("give either topic= or request_queue=/response_queue=, not both")
        return topic_queues(topic)
    if request_queue is None or response_queue is None:
        raise ValueError("give topic= or both request_queue= and response_queue=")
    return request_queue, response_queue
