"""The event loop the commands run on: uvloop when it is installed (``pip install
'toolmesh[fast]'``), asyncio's own otherwise.

``TOOLMESH_LOOP`` chooses: ``asyncio`` keeps asyncio's loop even with uvloop installed (to
rule the loop out when something misbehaves); ``uvloop`` insists on uvloop (an error if it is
not installed); unset or empty: uvloop if it can be imported.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from toolmesh.cli.http import CliError

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")

#: the environment variable that chooses the loop
ENV = "TOOLMESH_LOOP"
CHOICES = ("asyncio", "uvloop")


def loop_factory(environ: Mapping[str, str] = os.environ,
                 ) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What makes the loop: uvloop's ``new_event_loop``, or ``None`` for asyncio's default
    (see the module docstring); :class:`CliError` for a ``TOOLMESH_LOOP`` it cannot honour."""
    choice = environ.get(ENV, "").strip().lower()
    if choice not in ("", *CHOICES):
        raise CliError(f"{ENV}={environ[ENV]!r}: use one of {', '.join(CHOICES)}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise CliError(f"{ENV}=uvloop, but uvloop is not installed: pip install "
                           "'toolmesh[fast]'") from None
        return None
    return uvloop.new_event_loop  # type: ignore[no-any-return]


def run(main: Coroutine[Any, Any, T], *, environ: Mapping[str, str] = os.environ) -> T:
    """``asyncio.run(main)`` on the loop :func:`loop_factory` chooses."""
    import asyncio  # here: the commands that run synchronously do without it

    try:
        factory = loop_factory(environ)
    except CliError:
        main.close()  # never awaited: closed, so Python does not warn about it
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
