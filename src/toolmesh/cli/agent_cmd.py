"""``toolmesh agent "question"``: ask the agent through the gateway's WebSocket and print the
answer as it streams (with ``-v`` also each thought, tool call and observation).

A call that waits for a person (docs/approvals.md) is asked about at the terminal: the call
(tool and exact arguments) on stderr, then ``Approve? [y/N]`` read from stdin; the answer goes
on the same WebSocket (:mod:`toolmesh.cli.asking`). ``y`` or ``yes`` approves; anything else
denies, and a second line, ``Reason (optional):``, is what the model is told. An MCP server's
question: each field of its form is asked (Enter on the first field declines, ``decline`` or
``cancel`` at any field does that), or, in URL mode, the page to open and ``Done? [y/N]``.
With nothing to read on stdin (``< /dev/null``, a closed pipe), the command says how to answer
from elsewhere (``toolmesh approvals approve CALL``) and waits for the dialog. A request
answered elsewhere (another terminal, the Workbench) is asked about no more, and the command
says who answered it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from toolmesh.cli.asking import Asker, Notes
from toolmesh.cli.http import MARGIN, CliError, default_token, default_url
from toolmesh.cli.socket import frames, gateway_socket


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


class Printer(Notes):
    """Prints messages as they come: the answer on stdout, the rest (with -v) on stderr.

    With -v, each step shows as: 🧰 the tools it shows the model when it leaves some out
    (and why each), 🤔 the thought (streamed), 🔧 the tool called with its arguments, ⏳ its
    progress reports, then 💡 what it answered or ❌ why it failed.
    """

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self.verbose = verbose

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
            asker = Asker(ws, printer, flow=args.flow, workspace=args.workspace, url=args.url)
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
                    kind = response.get("message_type")
                    if kind in ASKING:
                        asker.take(ASKING[kind], response.get(kind.split("-")[0]) or {})
                    elif kind == "approval-answer" and isinstance(response.get("answer"), dict):
                        asker.settled(response["answer"])
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
#: the messages that wait for the person at the terminal, and the kind each asks
ASKING = {"approval-request": "approval", "elicitation-request": "elicitation"}
