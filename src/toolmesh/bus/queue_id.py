"""Queue ids: the two spellings (``request:tg:joke`` ≡ ``non-persistent://tg/request/joke``), parsed once into one value.

``non-persistent://tg/request/joke`` and ``request:tg:joke`` name the same queue;
``persistent://tg/flow/x`` and ``flow:tg:x`` too. Topic names may contain ``:`` (and, in the
Pulsar spelling, ``/``), which are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, cast, get_args

from toolmesh.errors import QueueIdError

QueueClass = Literal["request", "response", "notify", "flow"]
QUEUE_CLASSES: tuple[str, ...] = get_args(QueueClass)

#: classes whose subscribers compete for messages (one shared queue per subscription)
SHARED_CLASSES = frozenset({"request", "flow"})

_ACCEPTED = (
    "accepted forms: 'CLASS:TOPICSPACE:TOPIC' (e.g. 'request:tg:joke') or "
    "'non-persistent://TOPICSPACE/CLASS/TOPIC' (e.g. 'non-persistent://tg/request/joke', "
    "'persistent://tg/flow/x'), where CLASS is one of " + ", ".join(QUEUE_CLASSES)
)


@dataclass(frozen=True, slots=True)
class QueueId:
    """A parsed queue id: ``(class, topicspace, topic)``."""

    cls: QueueClass
    topicspace: str
    topic: str

    @property
    def shared(self) -> bool:
        """True for classes whose consumers compete (request, flow)."""
        return self.cls in SHARED_CLASSES

    @property
    def persistent(self) -> bool:
        """True for classes whose messages survive a broker restart (flow)."""
        return self.cls == "flow"

    def __str__(self) -> str:
        return f"{self.cls}:{self.topicspace}:{self.topic}"

    @property
    def pulsar(self) -> str:
        """The Pulsar spelling of this queue."""
        scheme = "persistent" if self.persistent else "non-persistent"
        return f"{scheme}://{self.topicspace}/{self.cls}/{self.topic}"


def parse_queue_id(queue: str | QueueId) -> QueueId:
    """Parse either spelling; raise :class:`QueueIdError` naming the id otherwise."""
    if isinstance(queue, QueueId):
        return queue
    if not isinstance(queue, str):
        raise QueueIdError(f"queue id {queue!r} is not a string; {_ACCEPTED}")
    return _parse(queue)


@lru_cache(maxsize=4096)
def _parse(queue: str) -> QueueId:
    if "://" in queue:
        scheme, _, rest = queue.partition("://")
        parts = rest.split("/", 2)
        if scheme not in ("persistent", "non-persistent") or len(parts) != 3:
            raise QueueIdError(f"invalid queue id {queue!r}; {_ACCEPTED}")
        topicspace, cls, topic = parts
    else:
        parts = queue.split(":", 2)
        if len(parts) != 3:
            raise QueueIdError(f"invalid queue id {queue!r}; {_ACCEPTED}")
        cls, topicspace, topic = parts
    if cls not in QUEUE_CLASSES:
        raise QueueIdError(f"invalid queue class {cls!r} in queue id {queue!r}; {_ACCEPTED}")
    if not topicspace or not topic:
        raise QueueIdError(f"empty topicspace or topic in queue id {queue!r}; {_ACCEPTED}")
    return QueueId(cast(QueueClass, cls), topicspace, topic)
