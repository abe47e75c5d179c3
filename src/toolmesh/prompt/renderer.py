"""Rendering templates off the event loop: a small pool of worker processes, reused.

The prompt service shares its process (and, in ``toolmesh serve``, its event loop) with the
gateway and every other service, and a template is code written by whoever holds
``config:write``. So the service never compiles or renders a config template itself: it hands
the texts and variables to :class:`RenderPool`, whose workers (:mod:`toolmesh.prompt.worker`)
render them under :class:`~toolmesh.prompt.sandbox.RenderLimits`. A render that passes its
time limit has its worker killed (a thread could not be: CPython cannot stop one, and it would
hold the GIL the loop needs) and replaced, and fails with a :class:`PromptError` naming the
template. Which workspace a free worker serves next is :class:`~.fair_share.FairShare`'s
decision: workspaces whose renders run long share all workers but one, whatever their number,
so a workspace whose renders are quick never waits behind a long one.

Waiting is on futures only: a worker handed out, a worker's answer, its exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from toolmesh.prompt.fair_share import FairShare, Lease
from toolmesh.prompt.sandbox import RenderLimits
from toolmesh.prompt.templates import PromptError, PromptTemplate
from toolmesh.prompt.worker import HEADER, RETIRE, decode, encode

log = logging.getLogger("toolmesh.prompt")

#: seconds a new worker may take to start (Python and Jinja loading, on a busy machine)
START_TIMEOUT = 60.0


class _Worker:
    """One worker process and its pipes; :meth:`ask` sends one request and reads its answer."""

    def __init__(self, process: asyncio.subprocess.Process, *, max_frame: int) -> None:
        self.process = process
        self.max_frame = max_frame

    async def ask(self, request: Mapping[str, Any]) -> dict[str, Any]:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(encode(request))
        await stdin.drain()
        return await self.answer()

    async def answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        (size,) = HEADER.unpack(await self.process.stdout.readexactly(HEADER.size))
        if size > self.max_frame:
            raise PromptError(f"a render worker answered {size:,} bytes, more than its limits "
                              "allow")
        answer = decode(await self.process.stdout.readexactly(size))
        if not isinstance(answer, dict):
            raise PromptError("a render worker answered something that is not an object")
        return answer

    def kill(self) -> None:
        """Kill the process now (its exit is awaited by :meth:`wait`)."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    async def wait(self) -> None:
        """Wait for the process to exit and its pipes to close (what it still wrote is
        dropped)."""
        with contextlib.suppress(OSError, ValueError):
            await self.process.communicate()
        await self.process.wait()


class _NoWorker:
    """Handed out instead of a worker when one failed to start: the render that gets it fails
    with ``message``, and another start is tried."""

    def __init__(self, message: str) -> None:
        self.message = message


class RenderPool:
    """Worker processes that render templates within ``limits``; :meth:`render` is the way in.

    Workers start when the first render or check needs one (all of them then: a deployment
    that only renders the templates toolmesh ships, in the service itself, never starts one)
    and are replaced as soon as one is killed; :meth:`stop` kills them all.
    """

    def __init__(self, *, limits: RenderLimits | None = None) -> None:
        self.limits = limits or RenderLimits()
        #: who gets the next free worker
        self.share: FairShare[_Worker | _NoWorker] = FairShare(capacity=self.limits.workers)
        self._all: set[_Worker] = set()
        self._starting = 0
        self._tasks: set[asyncio.Task[None]] = set()
        #: the tasks starting a worker (the others wait for a killed one's exit)
        self._starts: set[asyncio.Task[None]] = set()
        self._closed = False
        #: the workers were started (by the first request that needed one)
        self._started = False
        # two texts of max_size characters, each at most 6 bytes as JSON (\uXXXX)
        self._max_frame = 12 * self.limits.max_size + 65536

    async def __aenter__(self) -> RenderPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Open the pool; its workers start with the first request that needs one."""
        if self._closed:
            self._closed, self._started = False, False
            self.share.open()

    def _fill(self) -> None:
        """Start the workers, in the background, the first time one is needed."""
        if self._started or self._closed:
            return
        self._started = True
        for _ in range(self.limits.workers - len(self._all) - self._starting):
            self._replace()

    async def stop(self) -> None:
        """Kill every worker, busy or not; a render in flight or waiting fails."""
        self._closed = True
        for task in list(self._starts):
            task.cancel()  # a worker being started is killed by its task (_launch)
        self.share.close(PromptError("the prompt service is stopping: templates are not "
                                     "rendered"))
        workers = list(self._all)
        self._all.clear()
        for worker in workers:
            worker.kill()
        await asyncio.gather(*self._tasks, *(w.wait() for w in workers),
                             return_exceptions=True)

    async def render(self, template: PromptTemplate, variables: Mapping[str, Any], *,
                     tenant: str) -> tuple[str, str]:
        """``(system, prompt)`` of ``template`` with ``variables``, rendered by a worker on
        behalf of ``tenant`` (a workspace); :class:`PromptError` naming the template if it
        fails or passes a limit."""
        answer = await self._ask({"op": "render", "id": template.id, "system": template.system,
                                  "prompt": template.prompt, "variables": dict(variables)},
                                 tenant=tenant, what=f"template {template.id!r}")
        ok = answer.get("ok")
        if (not isinstance(ok, list) or len(ok) != 2
                or not all(isinstance(text, str) for text in ok)):
            raise PromptError(f"template {template.id!r}: the render worker gave no text")
        return ok[0], ok[1]

    async def check(self, sources: Sequence[tuple[str, str, str]], *,
                    tenant: str) -> list[str | None]:
        """For each ``(owner, part, source)``, the message of its compile error, or ``None``:
        compiled in a worker, since compiling a hostile text can take seconds. All at once;
        when that passes the time limit, one by one, to find which to blame."""
        if not sources:
            return []
        what = ", ".join(sorted({owner for owner, _, _ in sources}))
        try:
            answer = await self._ask({"op": "check", "sources": [list(s) for s in sources]},
                                     tenant=tenant, what=what)
        except PromptError as e:
            if len(sources) == 1:
                return [e.message]
            return [error for source in sources
                    for error in await self.check([source], tenant=tenant)]
        errors = answer.get("errors")
        if not isinstance(errors, list) or len(errors) != len(sources):
            return ["the render worker did not check it"] * len(sources)
        return [e if isinstance(e, str) else None for e in errors]

    async def _ask(self, request: Mapping[str, Any], *, tenant: str,
                   what: str) -> dict[str, Any]:
        try:
            body = encode(request)
        except (TypeError, ValueError) as e:
            raise PromptError(f"{what}: the variables cannot be sent to be rendered: {e}"
                              ) from None
        if len(body) > self._max_frame:
            raise PromptError(f"{what}: the template and its variables are larger than "
                              f"{self._max_frame:,} bytes")
        self._fill()
        lease = await self.share.acquire(tenant)
        worker = lease.item
        if isinstance(worker, _NoWorker):
            self.share.release(lease, returned=None, render=False)
            if not self._closed:
                self._replace()  # try again for the next request
            raise PromptError(worker.message)
        answer: dict[str, Any] | None = None
        render = request.get("op") == "render"
        try:
            async with asyncio.timeout(self.limits.timeout):
                answer = await worker.ask(request)
        except TimeoutError:
            raise PromptError(
                f"{what} took longer than {self.limits.timeout:g} s to render and was "
                "stopped (--prompt-render-timeout): make its loops shorter or less "
                "deeply nested") from None
        except (OSError, asyncio.IncompleteReadError) as e:
            raise PromptError(f"{what}: its render worker died ({type(e).__name__}); "
                              "it may have used more memory than allowed "
                              "(--prompt-max-memory)") from None
        finally:
            if answer is not None and worker in self._all and not answer.get(RETIRE):
                cpu = answer.get("cpu")
                self.share.release(lease, returned=worker,
                                   cost=cpu if isinstance(cpu, (int, float)) else None,
                                   render=render)
            else:
                await self._retire(lease, worker, render=render)
        error = answer.get("error")
        if isinstance(error, str):
            raise PromptError(error)
        return answer

    async def _retire(self, lease: Lease[_Worker | _NoWorker], worker: _Worker, *,
                      render: bool) -> None:
        """Kill ``worker``, whose answer did not come (time limit, cancelled, died), which
        retired itself after an error it did not expect, or whose pool stopped, and start another in its place unless the pool stopped. The workspace it
        served holds ``lease`` until the new one is up: else its next render would take the
        worker kept for others."""
        replace = worker in self._all and not self._closed
        self._all.discard(worker)
        worker.kill()
        self._spawn_task(worker.wait())
        try:
            if replace:
                # not cancelled with the caller, and no error if stop() cancels it
                await asyncio.wait([self._replace()])
        finally:
            # its cost: all the time it held the worker, the new one's start included
            self.share.release(lease, returned=None, render=render)

    def _replace(self) -> asyncio.Task[None]:
        self._starting += 1
        task = self._spawn_task(self._start_one())
        self._starts.add(task)
        task.add_done_callback(self._starts.discard)
        return task

    async def _start_one(self) -> None:
        try:
            worker = await self._launch()
        except Exception as e:
            log.error("a prompt render worker did not start: %s", e)
            self.share.put(_NoWorker(f"templates cannot be rendered: a render worker did not "
                                     f"start ({e})"))
            return
        finally:
            self._starting -= 1
        if self._closed:
            worker.kill()
            await worker.wait()
            return
        self._all.add(worker)
        self.share.put(worker)

    async def _launch(self) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "toolmesh.prompt.worker", json.dumps(asdict(self.limits)),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        worker = _Worker(process, max_frame=self._max_frame)
        try:
            async with asyncio.timeout(START_TIMEOUT):
                if (await worker.answer()).get("ready") is not True:
                    raise PromptError("a render worker did not say it was ready")
        except BaseException:
            worker.kill()
            await asyncio.shield(worker.wait())
            raise
        return worker

    def _spawn_task(self, coroutine: Any) -> asyncio.Task[None]:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
