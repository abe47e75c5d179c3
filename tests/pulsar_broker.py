"""A real Pulsar-protocol broker for the tests: pulsar-lite (PyPI), run as its own process.

pulsar-lite is a single binary speaking Pulsar's binary protocol; pulsar-client talks to it
exactly as it talks to an Apache Pulsar cluster. The tests start it on a free loopback port,
restart it on the same port and storage to test recovery, and stop it at the end.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from pathlib import Path

READY_LINE = "Server listening on"


def _binary() -> str:
    import os
    if os.environ.get("PULSAR_LITE_BIN"): return os.environ["PULSAR_LITE_BIN"]
    from pulsar_lite.binary_finder import find_pulsar_lite_binary

    return find_pulsar_lite_binary()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PulsarLite:
    """One pulsar-lite process bound to 127.0.0.1 (metrics endpoint off)."""

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.url = f"pulsar://127.0.0.1:{self.port}"
        self.log_path = data_dir / "pulsar-lite.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._pump: threading.Thread | None = None
        data_dir.mkdir(parents=True, exist_ok=True)
        # Its metrics endpoint would otherwise bind 0.0.0.0:8080.
        (data_dir / "pulsar-lite.toml").write_text("[metrics]\nenabled = false\n")

    def start(self, timeout: float = 30) -> None:
        """Start the broker and return once it accepts connections."""
        ready = threading.Event()
        proc = subprocess.Popen(
            [_binary(), "--config", str(self.data_dir / "pulsar-lite.toml"),
             "--addr", f"127.0.0.1:{self.port}", "--db-path", str(self.data_dir / "db")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=self.data_dir,
            env={**os.environ, "RUST_LOG": "info"})
        self._proc = proc

        def pump() -> None:
            # Drains the pipe for the broker's whole life, so it never blocks on a full pipe.
            assert proc.stdout is not None
            with proc.stdout, open(self.log_path, "ab") as log:
                for line in proc.stdout:
                    log.write(line)
                    log.flush()
                    if READY_LINE.encode() in line:
                        ready.set()
            ready.set()

        self._pump = threading.Thread(target=pump, name="pulsar-lite-log", daemon=True)
        self._pump.start()
        if not ready.wait(timeout) or proc.poll() is not None:
            self.stop()
            raise RuntimeError(f"pulsar-lite did not start; see {self.log_path}")

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        """Stop the broker (SIGKILL to make it die without a goodbye)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._pump is not None:
            self._pump.join(10)  # it closes the pipe once the broker has gone

    def restart(self) -> None:
        """Kill the broker and start it again on the same port and storage."""
        self.stop(signal.SIGKILL)
        self.start()
