"""``toolmesh approvals approve --watch``: ask the person at the terminal about each request of
the workspace as it comes, until stdin ends or Ctrl-C.

The command holds a ``watch`` of the ``approvals`` service on the gateway's WebSocket (what
waits now, then each request and each answer as they happen: :mod:`toolmesh.approvals.service`)
and asks again each time the watch ends before the gateway's deadline. Each request is asked
about once (:class:`~toolmesh.cli.asking.Asker`); one answered elsewhere first is dropped
with a line that says by whom. Nothing polls: the command waits on the socket and on stdin.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from toolmesh.cli.asking import Asker, Notes
from toolmesh.cli.http import MARGIN, CliError, default_token, default_url
from toolmesh.cli.output import printable
from toolmesh.cli.socket import frames, gateway_socket

#: seconds the gateway may stay silent: a watch ends (and is asked again) well within it
SILENCE = 120.0
#: seconds the answers sent get to be confirmed once stdin is at its end
CONFIRM = 30.0


async def watch(args: argparse.Namespace) -> int:
    """Run the watch of ``args`` (the ``approvals approve`` options) until stdin ends."""
    token = args.token if args.token is not None else default_token()
    notes = Notes()
    async with gateway_socket(args.url or default_url(), token) as ws:
        asker = Asker(ws, notes, flow=args.flow, workspace=args.workspace, url=args.url,
                      watching=True)
        asker.lines.start()
        watches = 0

        async def ask() -> None:
            nonlocal watches
            watches += 1
            await ws.send_json({"id": f"w{watches}", "service": "approvals", "flow": args.flow,
                                "workspace": args.workspace,
                                "request": {"operation": "watch"}})

        async def read() -> None:
            first = True
            async for frame in frames(ws, timeout=SILENCE + MARGIN):
                if asker.answered(frame):
                    continue
                response = frame.get("response") or {}
                error = frame.get("error") or response.get("error")
                if error:
                    raise CliError(f"{error.get('type', 'error')}: {error.get('message', '')}")
                if first and "approvals" in response:
                    first = False
                    notes.note(printable(
                        f"watching workspace {args.workspace!r}: "
                        f"{_waiting(len(response['approvals']))}; each request is asked "
                        "about as it comes (end of input or Ctrl-C ends)"))
                _take(asker, response)
                if frame.get("complete"):
                    await ask()  # the watch ended before the gateway's deadline: again

        await ask()
        reading = asyncio.ensure_future(read())
        ending = asyncio.ensure_future(asker.lines.ended())
        try:
            await asyncio.wait({reading, ending}, return_when=asyncio.FIRST_COMPLETED)
            if reading.done():
                reading.result()  # its error ends the command
                raise CliError("the gateway closed the watch")
            try:
                async with asyncio.timeout(CONFIRM):
                    await asker.finish()
            except TimeoutError:
                raise CliError(f"the answers sent were not confirmed within {CONFIRM:g} s"
                               ) from None
        finally:
            for task in (reading, ending):
                task.cancel()
            await asyncio.gather(reading, ending, return_exceptions=True)
            await asker.close()
    return 0


def _take(asker: Asker, response: dict[str, Any]) -> None:
    """What a watch's response says: requests to ask about, answers given."""
    for request in response.get("approvals") or []:
        if isinstance(request, dict):
            asker.take(str(request.get("kind") or "approval"), request)
    asked = response.get("asked")
    if isinstance(asked, dict):
        asker.take(str(asked.get("kind") or "approval"), asked)
    answer = response.get("answer")
    if isinstance(answer, dict):
        asker.settled(answer)


def _waiting(n: int) -> str:
    return "nothing waits now" if n == 0 else f"{n} request{'' if n == 1 else 's'} waiting"
