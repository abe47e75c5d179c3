"""A command whose reader went away (``toolmesh config show | head -1``) ends quietly.

Python ignores SIGPIPE, so writing to a closed pipe raises :class:`BrokenPipeError`, at the
write or at the final flush of stdout; left alone it prints a traceback, or "Exception
ignored ... BrokenPipeError" at exit. Like a program killed by SIGPIPE, the command ends
silently with status 141 (128 + SIGPIPE), as shells report it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

#: the status a shell reports for a program killed by SIGPIPE
CLOSED_PIPE_STATUS = 141


def closed_pipe_safe(command: Callable[[], int]) -> int:
    """Run ``command`` and flush stdout; a closed stdout ends it with status 141, silently.
    A ``SystemExit`` (argparse's ``--help``, its errors) passes through, stdout flushed."""
    try:
        try:
            code = command()
        except SystemExit:
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # here, not at exit, where its failure could not be caught
        return code
    except BrokenPipeError:
        # the interpreter flushes stdout once more on exit: make that write go nowhere
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return CLOSED_PIPE_STATUS
