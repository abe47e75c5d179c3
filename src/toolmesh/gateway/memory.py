"""What a request body costs once it has been answered: nothing, and the memory goes back.

Two things kept memory after large bodies (a flood of 15 MiB bodies left the process hundreds
of MiB larger, for good):

* aiohttp keeps the last request of a keep-alive connection until the next one arrives, and
  ``request.read()`` caches the body on it: every idle connection held its last body, outside
  the ``bodies_in_flight`` budget. :func:`read_body` reads without that cache.
* glibc keeps freed memory in its heap: it serves blocks over 128 KiB from their own mappings,
  but raises that threshold to the size of each such block freed (up to 32 MiB), so after one
  large body the next ones come from the heap, which is seldom given back.
  :func:`pin_mmap_threshold` turns that adjustment off; :func:`release_memory` trims the heap.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

from aiohttp import web

MiB = 1024 * 1024
#: a body at least this large is worth trimming the heap for afterwards
LARGE_BODY = MiB
#: glibc's mallopt parameter number for the mmap threshold (malloc.h)
_M_MMAP_THRESHOLD = -3


async def read_body(request: web.BaseRequest, limit: int) -> bytes:
    """The request's body, or :class:`~aiohttp.web.HTTPRequestEntityTooLarge` past ``limit``
    bytes; unlike ``request.read()``, nothing keeps it once the caller lets it go."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.readany():
        size += len(chunk)
        if size > limit:
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=size)
        chunks.append(chunk)
    return b"".join(chunks)


@functools.cache
def _glibc() -> Any:
    """glibc's C library, or ``None`` elsewhere (musl, macOS, Windows): nothing to tune."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
        return ctypes.CDLL("libc.so.6")
    except (AttributeError, OSError, ValueError):
        return None


def pin_mmap_threshold(size: int = LARGE_BODY) -> bool:
    """Serve every allocation of ``size`` bytes or more from its own mapping, unmapped when
    freed (glibc: setting the threshold explicitly stops its upward adjustment); ``False``
    when that cannot be done here. It applies to the whole process, once is enough."""
    libc = _glibc()
    if libc is None:
        return False
    try:
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, size))
    except (AttributeError, OSError):
        return False


def release_memory() -> None:
    """Give the heap's free pages back to the system (glibc ``malloc_trim``); never fails.

    A body arrives in many small chunks that leave the heap fragmented; freed, their pages stay
    the process's until trimmed. A trim costs about a millisecond: worth it after large bodies.
    """
    libc = _glibc()
    if libc is None:
        return
    try:
        libc.malloc_trim(0)
    except (AttributeError, OSError):
        return
