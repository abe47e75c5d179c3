"""Rendering templates off the event loop: a small pool of worker processes, reused.

The prompt service shares its process (and, in ``toolmesh serve``, its event loop) with the
gateway and every other service, and a template is code written by whoever holds
``config:write``. So the service never compiles or renders a config template itself: it hands
the texts and variables to :class:`RenderPool`, whose workers (:mod:`toolmesh.prompt.worker`)
render them under :class:`~toolmesh.prompt.sandbox.RenderLimits`. A render that passes its
time limit has its worker killed (a thread could not be: CPython cannot stop one, and it would
hold the GIL the loop needs) and replaced, and fails with a :class:`PromptError` naming the
template. One workspace may hold all workers but one at a time, so another workspace always
finds one free (or soon free: within the time limit).

Waiting is on futures and conditions only: a free worker, a worker's answer, its exit.
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

from toolmesh.prompt.sandbox import RenderLimits
from toolmesh.prompt.templates import PromptError, PromptTemplate
from toolmesh.prompt.worker import HEADER, decode, encode

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
    """Put in the idle queue instead of a worker: one failed to start, or the pool stops."""

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
        #: workers one tenant may hold at once: all but one (when there is more than one)
        self.per_tenant = max(1, self.limits.workers - 1)
        self._idle: asyncio.Queue[_Worker | _NoWorker] = asyncio.Queue()
        self._all: set[_Worker] = set()
        self._starting = 0
        self._tenants: dict[str, asyncio.Semaphore] = {}
        self._holders: dict[str, int] = {}
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
            self._closed, self._idle, self._started = False, asyncio.Queue(), False

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
        workers = list(self._all)
        self._all.clear()
        for worker in workers:
            worker.kill()
        self._idle.put_nowait(_NoWorker("the prompt service is stopping: templates are not "
                                        "rendered"))
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
        seat = self._tenants.get(tenant)
        if seat is None:
            seat = self._tenants[tenant] = asyncio.Semaphore(self.per_tenant)
        self._holders[tenant] = self._holders.get(tenant, 0) + 1
        try:
            async with seat:
                worker = await self._acquire()
                answer: dict[str, Any] | None = None
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
                    replacement = self._release(worker, healthy=answer is not None)
                    if replacement is not None:
                        # the tenant whose worker was killed holds its seat until the new one
                        # is up: else its next render would take another tenant's worker
                        await asyncio.shield(replacement)
        finally:
            self._holders[tenant] -= 1
            if not self._holders[tenant]:
                del self._holders[tenant], self._tenants[tenant]
        error = answer.get("error")
        if isinstance(error, str):
            raise PromptError(error)
        return answer

    async def _acquire(self) -> _Worker:
        worker = await self._idle.get()
        if isinstance(worker, _NoWorker):
            if self._closed:
                self._idle.put_nowait(worker)  # for the next one waiting
            else:
                self._replace()  # try again for the next request
            raise PromptError(worker.message)
        return worker

    def _release(self, worker: _Worker, *, healthy: bool) -> asyncio.Task[None] | None:
        """Give ``worker`` back, or, when its answer did not come (time limit, cancelled,
        died), kill it and start another in its place: the task starting it."""
        if healthy and not self._closed:
            self._idle.put_nowait(worker)
            return None
        self._all.discard(worker)
        worker.kill()
        self._spawn_task(worker.wait())
        return None if self._closed else self._replace()

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
            self._idle.put_nowait(_NoWorker(f"templates cannot be rendered: a render worker "
                                            f"did not start ({e})"))
            return
        finally:
            self._starting -= 1
        if self._closed:
            worker.kill()
            await worker.wait()
            return
        self._all.add(worker)
        self._idle.put_nowait(worker)

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
