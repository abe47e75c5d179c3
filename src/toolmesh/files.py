"""Files only their owner may read: the data folder (0700) and the SQLite config store (0600).

Created that way when missing; tightened, with a log line, when they exist with more access.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("toolmesh.files")

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def _tighten(path: Path, mode: int, what: str) -> None:
    try:
        current = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return
    if current & 0o077:
        try:
            path.chmod(mode)
        except OSError as e:
            log.warning("cannot make %s %s private (mode %o): %s", what, path, current,
                        e.strerror or e)
            return
        log.info("made %s %s private: mode %o -> %o (it held secrets readable by others)",
                 what, path, current, mode)


def private_dir(path: Path, *, tighten: bool = True) -> Path:
    """Create ``path`` (and missing parents) with mode 0700; an existing one is tightened
    when ``tighten``."""
    if not path.exists():
        path.mkdir(parents=True, mode=PRIVATE_DIR, exist_ok=True)
        path.chmod(PRIVATE_DIR)  # mkdir's mode is filtered by the umask
    elif tighten:
        _tighten(path, PRIVATE_DIR, "folder")
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty with mode 0600 if missing, else tighten it to 0600."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE))
    except FileExistsError:
        _tighten(path, PRIVATE_FILE, "file")
    return path
