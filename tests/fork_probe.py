"""A child for tests/test_forkserver.py: reports what it was started with, as JSON on stdout,
then ends as its first argument says (``exit N``, ``raise``, ``interrupt``, ``signal N``,
``wait``: until stdin closes)."""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys

#: read as the module loads, as trustgraph-cli's modules read TRUSTGRAPH_TOKEN
AT_IMPORT = os.environ.get("PROBE")


def main() -> None:
    how = sys.argv[1] if len(sys.argv) > 1 else "exit 0"
    atexit.register(lambda: sys.stdout.write("atexit ran\n"))  # left to the exit to flush
    report = {
        "name": __name__, "argv": sys.argv[1:], "cwd": os.getcwd(), "path": sys.path[:2],
        "probe": os.environ.get("PROBE"), "probe_at_import": AT_IMPORT, "tz": __import__("time").strftime("%Z"),
        "stdin": sys.stdin.read() if how != "wait" else None,
        "stdout": [sys.stdout.encoding, sys.stdout.errors, sys.stdout.line_buffering],
        "stderr": [sys.stderr.encoding, sys.stderr.errors, sys.stderr.line_buffering],
        "session_leader": os.getsid(0) == os.getpid(),
        "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    }
    print(json.dumps(report), flush=True)
    verb, _, number = how.partition(" ")
    if verb == "wait":
        sys.stdin.read()
    elif verb == "raise":
        raise RuntimeError("the probe fails")
    elif verb == "interrupt":
        raise KeyboardInterrupt
    elif verb == "signal":
        os.kill(os.getpid(), int(number))
    sys.exit(int(number or 0))


if __name__ == "__main__":
    main()
