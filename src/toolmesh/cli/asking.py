"""Asking the person at the terminal about calls that wait for them, over the gateway's
WebSocket: ``toolmesh agent`` (its own dialog's requests) and ``toolmesh approvals approve
--watch`` (every request of a workspace, as it comes).

An approval: the call on stderr, ``Approve? [y/N]`` read from stdin; ``y`` or ``yes``
approves, anything else denies, and ``Reason (optional):`` is what the model is told. An MCP
server's question: each field of its form (Enter on the first field declines, ``decline`` or
``cancel`` at any field does that), or, in URL mode, the page to open and ``Done? [y/N]``.
The answer goes to the ``approvals`` service on the same socket, saying ``"via": "cli"`` (the
face the audit records). A request someone else answers meanwhile is no longer asked about:
the line says who answered (docs/approvals.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from toolmesh.cli.approvals_cmd import (
    DONE,
    NO,
    YES,
    answer_command,
    approver_text,
    choices,
    describe,
    field_value,
)
from toolmesh.cli.output import local_time, printable

if TYPE_CHECKING:
    import asyncio

    import aiohttp

#: :attr:`Notes.current` while a prompt waits for its line
PROMPT = "prompt"
#: the face the answers sent from here are recorded with
VIA = "cli"


class Notes:
    """Lines for the person on stderr, each on a line of its own; ``current``: what the last
    line left open (a streamed message's id, :data:`PROMPT`), ``None`` when it was ended."""

    def __init__(self) -> None:
        self.current: str | None = None

    def note(self, text: str) -> None:
        """A line of its own on stderr: what waits for the person, what became of it."""
        print(("\n" if self.current else "") + text, file=sys.stderr, flush=True)
        self.current = None


class Lines:
    """The lines of stdin, read on a thread of their own so the event loop goes on reading the
    socket while a person thinks; ``None`` once stdin is at its end.

    The thread reads the file descriptor (``os.read``), not ``sys.stdin``: a daemon thread
    blocked in it holds no lock the interpreter needs at exit, so the command can end (the
    dialog answered from elsewhere) while it still waits for a line."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str | None] | None = None
        self._ended: asyncio.Event | None = None
        self._at_end = False

    def start(self) -> None:
        """Begin reading stdin (else the first :meth:`next` does)."""
        import asyncio

        if self._queue is None:
            import threading

            self._queue = asyncio.Queue()
            self._ended = asyncio.Event()
            threading.Thread(target=self._read, args=(asyncio.get_running_loop(), self._put),
                             name="stdin", daemon=True).start()

    async def next(self) -> str | None:
        self.start()
        assert self._queue is not None
        line = await self._queue.get()
        if line is None:
            self._queue.put_nowait(None)  # at its end it stays there
        self._check_end()
        return line

    async def ended(self) -> None:
        """Wait until every line is read and stdin is at its end: no answer can come."""
        self.start()
        assert self._ended is not None
        await self._ended.wait()

    def _put(self, line: str | None) -> None:
        assert self._queue is not None
        self._queue.put_nowait(line)
        if line is None:
            self._at_end = True
            self._check_end()

    def _check_end(self) -> None:
        assert self._queue is not None and self._ended is not None
        if self._at_end and self._queue.qsize() == 1:  # only the end is left
            self._ended.set()

    @staticmethod
    def _read(loop: asyncio.AbstractEventLoop, deliver: Callable[[str | None], None]) -> None:
        def put(line: str | None) -> bool:
            try:
                loop.call_soon_threadsafe(deliver, line)
            except RuntimeError:  # the loop is closed: the command has ended
                return False
            return True

        pending = b""
        while True:
            try:
                chunk = os.read(sys.stdin.fileno(), 4096) if sys.stdin is not None else b""
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                if pending:
                    put(pending.decode(errors="replace"))
                put(None)
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if not put(line.decode(errors="replace").rstrip("\r")):
                    return


class Asker:
    """Asks the person at the terminal about each request taken, one at a time, and sends
    their answer to the ``approvals`` service on ``ws``.

    ``watching``: stdin at its end says nothing of how to answer from elsewhere (the watch
    ends with it: :meth:`Lines.ended`)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, notes: Notes, *, flow: str,
                 workspace: str, url: str | None, watching: bool = False) -> None:
        import asyncio

        self.ws = ws
        self.notes = notes
        self.flow = flow
        self.workspace = workspace
        self.url = url
        self.watching = watching
        self.lines = Lines()
        self.echo = not _interactive()
        #: set while no answer sent from here waits for the service's response
        self.confirmed = asyncio.Event()
        self.confirmed.set()
        self._turn = asyncio.Lock()
        #: the request of each call taken, and the task that asks about it
        self._taken: dict[str, asyncio.Task[None]] = {}
        #: the answers sent, by frame id: what was done, and to which request
        self._sent: dict[str, tuple[str, dict[str, Any]]] = {}
        #: the calls this terminal answered: True once the service took the answer
        self._mine: dict[str, bool] = {}
        #: answers heard for calls whose answer from here is not confirmed yet
        self._heard: dict[str, dict[str, Any]] = {}
        self._settled: set[str] = set()
        #: the task whose prompt waits for a line
        self._prompter: asyncio.Task[Any] | None = None
        self._count = 0

    def take(self, kind: str, request: dict[str, Any]) -> None:
        """Ask about ``request`` (``kind``: ``approval`` or ``elicitation``) when its turn
        comes; one already taken, or answered, is not asked about again."""
        import asyncio

        call = str(request.get("call"))
        if call in self._taken or call in self._settled:
            return
        task = asyncio.ensure_future(self._ask(kind, request))
        self._taken[call] = task

    def answered(self, frame: dict[str, Any]) -> bool:
        """The ``approvals`` service's response to an answer sent from here (an error is
        shown); whether ``frame`` was one."""
        sent = self._sent.pop(str(frame.get("id")), None)
        if sent is None:
            return False
        if not self._sent:
            self.confirmed.set()
        what, request = sent
        call = str(request.get("call"))
        response = frame.get("response") or {}
        error = frame.get("error") or response.get("error")
        if error:
            self._mine.pop(call, None)
            heard = self._heard.pop(call, None)
            if heard is not None:  # someone else was first: say who
                self._tell(heard)
                return True
            self.notes.note(printable(f"❌ could not {what}: {error.get('type', 'error')}: "
                                      f"{error.get('message', '')}"))
            if error.get("type") == "bad-request":  # the request still waits
                self._waits(request, why="it still waits")
        else:
            self._mine[call] = True
            self._heard.pop(call, None)
            decision = (response.get("answer") or {}).get("decision")
            self.notes.note(f"✔ {DONE.get(decision, decision)}")
        return True

    def settled(self, answer: Mapping[str, Any]) -> None:
        """An answer given to a call (an ``approval-answer`` of the dialog, a watch's
        event): when it was not given from here, the call is asked about no more, and the
        person is told who answered it."""
        call = str(answer.get("call"))
        self._settled.add(call)
        if self._mine.get(call):
            return  # this terminal's own answer: its confirmation said so
        if call in self._mine:  # answered from here too: whose came first is still unknown
            self._heard[call] = dict(answer)
            return
        task = self._taken.get(call)
        if task is None:
            return
        task.cancel()
        self._tell(answer)

    def _tell(self, answer: Mapping[str, Any]) -> None:
        decision = str(answer.get("decision"))
        if decision == "expired":
            self.notes.note(printable(f"⌛ call {answer.get('call')} expired: no one answered "
                                      "in time"))
            return
        self.notes.note(printable(f"✔ {DONE.get(decision, decision)} "
                                  f"{approver_text(answer.get('by'))} (call {answer.get('call')})"))

    async def finish(self) -> None:
        """Stdin is at its end: let each request taken end (none waits: there is no line to
        read), then wait for the service's responses to the answers sent from here."""
        import asyncio

        await asyncio.gather(*self._taken.values(), return_exceptions=True)
        await self.confirmed.wait()

    async def close(self) -> None:
        import asyncio

        # a prompt no one answered (the dialog went on without it) is ended by its task
        tasks = list(self._taken.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _ask(self, kind: str, request: dict[str, Any]) -> None:
        import asyncio

        try:
            async with self._turn:
                if kind == "approval":
                    await self._approval(request)
                else:
                    await self._elicitation(request)
        except asyncio.CancelledError:
            if self._prompter is asyncio.current_task() and self.notes.current == PROMPT:
                print(file=sys.stderr, flush=True)  # the prompt it left open ends here
                self.notes.current = None
            raise

    async def _approval(self, request: dict[str, Any]) -> None:
        expires = local_time(request.get("expires"), zone=True)
        self.notes.note(f"✋ {describe(request)}  waits for your approval " + printable(
            f"(call {request.get('call')}, expires {expires})"))
        line = await self._line("Approve? [y/N] ")
        if line is None:
            return self._waits(request)
        body: dict[str, Any] = {"dialog": request.get("dialog"), "call": request.get("call")}
        if line.strip().lower() in ("y", "yes"):
            await self._send("approve", request, {"operation": "approve", **body,
                                                  "digest": request.get("digest")})
            return
        reason = (await self._line("Reason (optional): ") or "").strip()
        await self._send("deny", request, {"operation": "deny", **body,
                                           "digest": request.get("digest"),
                                           **({"reason": reason} if reason else {})})

    async def _elicitation(self, request: dict[str, Any]) -> None:
        self.notes.note(f"❓ {describe(request)}")
        body: dict[str, Any] = {"operation": "answer", "dialog": request.get("dialog"),
                                "call": request.get("call")}
        if request.get("mode") == "url":
            # only the link: what the server wants (a login, a payment) is done on its page,
            # never typed here
            self.notes.note(f"   open {printable(str(request.get('url')))}")
            line = await self._line("Done? [y/N] ")
            if line is None:
                return self._waits(request)
            action = "accept" if line.strip().lower() in ("y", "yes") else "decline"
            await self._send("answer", request, {**body, "action": action})
            return
        schema = request.get("schema") if isinstance(request.get("schema"), dict) else {}
        form = await self._form(schema)
        if form is None:
            return self._waits(request)
        action, content = form
        await self._send("answer", request, {
            **body, "action": action, **({"content": content} if action == "accept" else {})})

    async def _form(self, schema: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """The action and the values of a form, asked field by field (``None``: stdin ended)."""
        properties = schema.get("properties")
        fields = [(k, v if isinstance(v, dict) else {}) for k, v in properties.items()] \
            if isinstance(properties, dict) else []
        required = set(schema.get("required") or [])
        self.notes.note("   (Enter on the first field declines; 'decline' or 'cancel' at "
                        "any field does that)")
        content: dict[str, Any] = {}
        for n, (name, prop) in enumerate(fields):
            label = _field_label(name, prop, name in required)
            while True:
                line = await self._line(label)
                if line is None:
                    return None
                text = line.strip()
                if text.lower() in ("decline", "cancel"):
                    return text.lower(), {}
                if not text and "default" in prop:
                    content[name] = prop["default"]
                elif not text and n == 0:
                    return "decline", {}
                elif not text and name in required:
                    self.notes.note("   an answer is required")
                    continue
                elif text:
                    try:
                        content[name] = field_value(prop, text)
                    except ValueError as e:
                        self.notes.note(f"   {e}")
                        continue
                break
        return "accept", content

    async def _line(self, prompt: str) -> str | None:
        import asyncio

        print(prompt, end="", file=sys.stderr, flush=True)
        self._prompter = asyncio.current_task()
        self.notes.current = PROMPT  # what the socket shows meanwhile starts a new line
        line = await self.lines.next()
        self._prompter = None
        if self.notes.current == PROMPT:
            self.notes.current = None
        if line is None or self.echo:  # typed at a terminal, the line is there already
            print(printable(line or ""), file=sys.stderr, flush=True)
        return line

    async def _send(self, what: str, request: dict[str, Any], body: dict[str, Any]) -> None:
        """Send ``body`` to the approvals service: ``what`` it does to ``request``."""
        self._count += 1
        id = f"a{self._count}"
        self._sent[id] = (what, request)
        self.confirmed.clear()
        self._mine[str(request.get("call"))] = False
        await self.ws.send_json({"id": id, "service": "approvals", "flow": self.flow,
                                 "workspace": self.workspace,
                                 "request": {**body, "via": VIA}})

    def _waits(self, request: dict[str, Any], *, why: str = "nothing to read on stdin") -> None:
        """Say how to answer ``request`` from elsewhere: the dialog goes on waiting (when
        watching and stdin ended, the watch ends: nothing to say)."""
        if self.watching and why == "nothing to read on stdin":
            return
        command = answer_command(request, url=self.url, workspace=self.workspace)
        other = "" if request.get("kind") == "elicitation" else " (or deny)"
        self.notes.note(printable(f"{why}: the dialog waits; answer from another terminal "
                                  f"with: {command}{other}"))


def _field_label(name: str, prop: dict[str, Any], required: bool) -> str:
    """The prompt of a form field: its title, description, what it takes, its default."""
    title = str(prop.get("title") or name)
    label = f"  {title}" + (f" ({name})" if title != name else "")
    if prop.get("description"):
        label += f" — {prop['description']}"
    allowed = choices(prop)
    if allowed:
        label += " [" + " / ".join(str(v) + (f" ({t})" if t else "") for v, t in allowed) + "]"
        if prop.get("type") == "array":
            label += " (one or more, comma-separated)"
    elif prop.get("type") == "boolean":
        label += " [y/n]"
    elif prop.get("type") in ("number", "integer"):
        label += " [a whole number" if prop["type"] == "integer" else " [a number"
        low, high = prop.get("minimum"), prop.get("maximum")
        if low is not None or high is not None:
            label += f", {'' if low is None else low}..{'' if high is None else high}"
        label += "]"
    if "default" in prop:
        default = prop["default"]
        shown = (YES[0] if default else NO[0]) if isinstance(default, bool) \
            else ", ".join(map(str, default)) if isinstance(default, list) else default
        label += f" (default: {shown})"
    elif required:
        label += " (required)"
    return printable(label) + ": "


def _interactive() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        return False
