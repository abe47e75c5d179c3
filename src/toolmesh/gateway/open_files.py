"""Room for every connection the gateway may hold: the process's open-file limit.

Each connection is a file descriptor. With the defaults the gateway may hold 1,024
authenticated connections and 128 strangers at once, besides its own files, the bus's
sockets and the services of ``toolmesh serve``; many systems start a process with a soft
limit of 1,024, where a flood would end in ``EMFILE`` (refused accepts, failed opens
elsewhere in the process) before any of the gateway's own bounds applied.
"""

from __future__ import annotations

import logging

log = logging.getLogger("toolmesh.gateway")

#: descriptors kept for everything but the gateway's connections (the bus, stores, workers)
MARGIN = 256


def make_room(connections: int) -> int:
    """Raise the soft open-file limit to fit ``connections`` and :data:`MARGIN` (up to the
    hard limit, which an unprivileged process cannot pass); the soft limit now. Logs a
    warning naming the flags when it cannot fit."""
    try:
        import resource
    except ImportError:  # not on this platform: nothing to raise
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = connections + MARGIN
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.debug("could not raise the open-file limit to %d: %s", target, e)
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning("the open-file limit (%d) is below what the gateway may hold (%d "
                    "connections and %d more): raise it (ulimit -n) or lower "
                    "--max-connections / --stranger-share", soft, connections, MARGIN)
    return soft
