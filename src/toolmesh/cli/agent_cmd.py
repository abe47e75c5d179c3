"""``toolmesh agent "question"``: ask the agent through the gateway's WebSocket and print the
answer as it streams (with ``-v`` also each thought, tool call and observation).

A call that waits for a person (docs/approvals.md) is asked about at the terminal: the call
(tool and exact arguments) on stderr, then ``Approve? [y/N]`` read from stdin; the answer goes
on the same WebSocket. ``y`` or ``yes`` approves; anything else denies, and a second line,
``Reason (optional):``, is what the model is told. An MCP server's question: each field of its
form is asked (Enter on the first field declines, ``decline`` or ``cancel`` at any field does
that), or, in URL mode, the page to open and ``Done? [y/N]``. With nothing to read on stdin
(``< /dev/null``, a closed pipe), the command says how to answer from elsewhere (``toolmesh
approvals approve DIALOG CALL``) and waits for the dialog.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from toolmesh.cli.approvals_cmd import (
    DONE,
    NO,
    YES,
    answer_command,
    choices,
    describe,
    field_value,
)
from toolmesh.cli.http import MARGIN, CliError, default_token, default_url
from toolmesh.cli.output import printable
from toolmesh.cli.socket import frames, gateway_socket

if TYPE_CHECKING:
    import asyncio

    import aiohttp


def add_parser(commands: Any) -> None:
    p = commands.add_parser("agent", help="ask the agent a question through the gateway",
                            epilog="exit status: 0 the answer came whole; 3 it came cut short "
                                   "by the model's limit (marked at its end); 1 an error")
    p.add_argument("question")
    p.add_argument("-u", "--url", default=None,
                   help="gateway URL (env TOOLMESH_URL; default http://localhost:8888/)")
    p.add_argument("-t", "--token", default=None, help="bearer token (env TOOLMESH_TOKEN)")
    p.add_argument("-f", "--flow", default="default")
    p.add_argument("-w", "--workspace", default="default",
                   help="the workspace whose tools the dialog uses (default: %(default)s)")
    p.add_argument("-g", "--group", nargs="+", help="tool groups to offer (default: default)")
    p.add_argument("-s", "--state", help="the state the dialog starts in")
    p.add_argument("--user", default=None, help="the user tools run for")
    p.add_argument("--no-streaming", action="store_true", help="wait for whole messages")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show each thought, tool call and observation, and the tools a step "
                        "shows when it leaves some out (on stderr)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds the dialog may take (the gateway's agent deadline caps it; "
                        "default: %(default)s)")
    p.set_defaults(run=run)


#: the start of an observation that reports a failure (agent/calls.py writes them so)
ERROR_PREFIX = "Error: "
#: the most characters of a tool call's line shown: arguments can be a whole document
CALL_WIDTH = 300
#: the most characters of an offer's line shown (the reasons of many tools)
OFFER_WIDTH = 600
#: the exit status of a dialog whose answer the model's limit cut short (it is printed, and
#: ends with a note saying so)
CUT_STATUS = 3


class Printer:
    """Prints messages as they come: the answer on stdout, the rest (with -v) on stderr.

    With -v, each step shows as: 🧰 the tools it shows the model when it leaves some out
    (and why each), 🤔 the thought (streamed), 🔧 the tool called with its arguments, ⏳ its
    progress reports, then 💡 what it answered or ❌ why it failed.
    """

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose
        self.current: str | None = None

    def show(self, m: dict[str, Any]) -> None:
        kind, content = m.get("message_type"), m.get("content") or ""
        if kind == "answer":
            if self.current not in (None, "answer"):
                print(file=sys.stderr, flush=True)
            self.current = "answer"
            print(content, end="", flush=True)
        elif not self.verbose or not content:
            return
        elif kind == "thought":
            self._stream("🤔 ", content, m)
        elif kind == "observation":
            if content.startswith(ERROR_PREFIX):
                self._line("❌ ", content[len(ERROR_PREFIX):], m)
            else:
                self._stream("💡 ", content, m)
        elif kind == "tool-call":
            self._line("🔧 ", shorten(content, CALL_WIDTH), m)
        elif kind == "offer":
            self._line("🧰 ", shorten(content, OFFER_WIDTH), m)
        elif kind == "progress":
            self._line("⏳ ", content, m)

    def _stream(self, mark: str, content: str, m: dict[str, Any]) -> None:
        """A message that may come in pieces: its first piece starts a line."""
        if self.current != m.get("message_id"):
            print(("\n" if self.current else "") + mark, end="", file=sys.stderr)
            self.current = m.get("message_id")
        print(content, end="", file=sys.stderr, flush=True)

    def _line(self, mark: str, content: str, m: dict[str, Any]) -> None:
        """A whole message: a line of its own."""
        print(("\n" if self.current else "") + mark + content, end="", file=sys.stderr,
              flush=True)
        self.current = m.get("message_id")

    def note(self, text: str) -> None:
        """A line of its own on stderr, with or without -v: what waits for the person."""
        print(("\n" if self.current else "") + text, file=sys.stderr, flush=True)
        self.current = None

    def done(self) -> None:
        print(flush=True)


def shorten(text: str, width: int) -> str:
    """``text``, cut to ``width`` characters with an ellipsis when longer."""
    return text if len(text) <= width else text[:width - 1] + "…"


async def run(args: argparse.Namespace) -> int:
    token = args.token if args.token is not None else default_token()
    request: dict[str, Any] = {"question": args.question, "streaming": not args.no_streaming}
    if args.group:
        request["group"] = args.group
    if args.state:
        request["state"] = args.state
    if args.user:
        request["user"] = args.user
    printer = Printer(args.verbose)
    cut = False
    try:
        async with gateway_socket(args.url or default_url(), token) as ws:
            await ws.send_json({"id": QUESTION, "service": "agent", "flow": args.flow,
                                "workspace": args.workspace, "request": request,
                                "timeout": args.timeout})
            asker = Asker(ws, args, printer)
            try:
                # the gateway's timeout error, which says what to check, comes first
                async for frame in frames(ws, timeout=args.timeout + MARGIN):
                    if frame.get("id") != QUESTION:
                        asker.answered(frame)
                        continue
                    response = frame.get("response") or {}
                    error = frame.get("error") or response.get("error")
                    if error:
                        raise CliError(f"{error.get('type', 'error')}: "
                                       f"{error.get('message', '')}")
                    if response.get("message_type") in ASKING:
                        asker.take(response)
                    else:
                        printer.show(response)
                    if response.get("end_of_dialog") and response.get("cut"):
                        cut = True
                    if frame.get("complete") or response.get("end_of_dialog"):
                        break
            finally:
                await asker.close()
    except TimeoutError:
        raise CliError(f"no answer from the gateway within {args.timeout + MARGIN:g} s: is "
                       "it `toolmesh serve` (or `toolmesh run gateway`) that listens there?"
                       ) from None
    printer.done()
    if cut:
        print(f"toolmesh agent: the answer was cut short by the model's limit (exit status "
              f"{CUT_STATUS}); raise --max-answer-tokens on the agent, or the model's context",
              file=sys.stderr)
        return CUT_STATUS
    return 0


#: the frame id of the question; the answers to requests are ``a1``, ``a2``...
QUESTION = "q1"
#: the messages that wait for the person at the terminal
ASKING = ("approval-request", "elicitation-request")
#: :attr:`Printer.current` while a prompt waits for its line
PROMPT = "prompt"


class Lines:
    """The lines of stdin, read on a thread of their own so the event loop goes on reading the
    dialog while a person thinks; ``None`` once stdin is at its end.

    The thread reads the file descriptor (``os.read``), not ``sys.stdin``: a daemon thread
    blocked in it holds no lock the interpreter needs at exit, so the command can end (the
    dialog answered from elsewhere) while it still waits for a line."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str | None] | None = None

    async def next(self) -> str | None:
        import asyncio

        if self._queue is None:
            import threading

            self._queue = asyncio.Queue()
            threading.Thread(target=self._read, args=(asyncio.get_running_loop(), self._queue),
                             name="stdin", daemon=True).start()
        line = await self._queue.get()
        if line is None:
            self._queue.put_nowait(None)  # at its end it stays there
        return line

    @staticmethod
    def _read(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        def put(line: str | None) -> bool:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, line)
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
    """Asks the person at the terminal about each request of the dialog, one at a time, and
    sends their answer to the ``approvals`` service on the dialog's socket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, args: argparse.Namespace,
                 printer: Printer) -> None:
        import asyncio

        self.ws = ws
        self.args = args
        self.printer = printer
        self.lines = Lines()
        self.echo = not _interactive()
        self._turn = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        #: the answers sent, by frame id: what was done, and to which request
        self._sent: dict[str, tuple[str, dict[str, Any]]] = {}
        self._prompting = False
        self._count = 0

    def take(self, message: dict[str, Any]) -> None:
        """Ask about ``message`` (an approval or elicitation request) when its turn comes."""
        import asyncio

        task = asyncio.ensure_future(self._ask(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def answered(self, frame: dict[str, Any]) -> None:
        """The ``approvals`` service's response to an answer sent: an error is shown."""
        sent = self._sent.pop(str(frame.get("id")), None)
        if sent is None:
            return
        what, request = sent
        response = frame.get("response") or {}
        error = frame.get("error") or response.get("error")
        if error:
            self.printer.note(printable(f"❌ could not {what}: {error.get('type', 'error')}: "
                                        f"{error.get('message', '')}"))
            if error.get("type") == "bad-request":  # the request still waits
                self._waits(request, why="it still waits")
        else:
            decision = (response.get("answer") or {}).get("decision")
            self.printer.note(f"✔ {DONE.get(decision, decision)}")

    async def close(self) -> None:
        import asyncio

        if self._prompting and self.printer.current == PROMPT:
            # a prompt no one answered: the dialog went on without it
            print(file=sys.stderr, flush=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _ask(self, message: dict[str, Any]) -> None:
        async with self._turn:
            if message.get("message_type") == "approval-request":
                await self._approval(message.get("approval") or {})
            else:
                await self._elicitation(message.get("elicitation") or {})

    async def _approval(self, request: dict[str, Any]) -> None:
        expires = str(request.get("expires", ""))[:19].replace("T", " ")
        self.printer.note(f"✋ {describe(request)}  waits for your approval " + printable(
            f"(call {request.get('call')}, expires {expires} UTC)"))
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
        self.printer.note(f"❓ {describe(request)}")
        body: dict[str, Any] = {"operation": "answer", "dialog": request.get("dialog"),
                                "call": request.get("call")}
        if request.get("mode") == "url":
            # only the link: what the server wants (a login, a payment) is done on its page,
            # never typed here
            self.printer.note(f"   open {printable(str(request.get('url')))}")
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
        self.printer.note("   (Enter on the first field declines; 'decline' or 'cancel' at "
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
                    self.printer.note("   an answer is required")
                    continue
                elif text:
                    try:
                        content[name] = field_value(prop, text)
                    except ValueError as e:
                        self.printer.note(f"   {e}")
                        continue
                break
        return "accept", content

    async def _line(self, prompt: str) -> str | None:
        print(prompt, end="", file=sys.stderr, flush=True)
        self._prompting = True
        self.printer.current = PROMPT  # what the dialog shows meanwhile starts a new line
        try:
            line = await self.lines.next()
        finally:
            self._prompting = False
        if self.printer.current == PROMPT:
            self.printer.current = None
        if line is None or self.echo:  # typed at a terminal, the line is there already
            print(printable(line or ""), file=sys.stderr, flush=True)
        return line

    async def _send(self, what: str, request: dict[str, Any], body: dict[str, Any]) -> None:
        """Send ``body`` to the approvals service: ``what`` it does to ``request``."""
        self._count += 1
        id = f"a{self._count}"
        self._sent[id] = (what, request)
        await self.ws.send_json({"id": id, "service": "approvals", "flow": self.args.flow,
                                 "workspace": self.args.workspace, "request": body})

    def _waits(self, request: dict[str, Any], *, why: str = "nothing to read on stdin") -> None:
        """Say how to answer ``request`` from elsewhere: the dialog goes on waiting."""
        command = answer_command(request, url=self.args.url, workspace=self.args.workspace)
        other = "" if request.get("kind") == "elicitation" else " (or deny)"
        self.printer.note(printable(f"{why}: the dialog waits; answer from another terminal "
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
