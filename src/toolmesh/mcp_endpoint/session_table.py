"""Who holds the ``/mcp`` sessions, within what limits, and which one goes when a limit is hit.

An MCP session outlives the connection that opened it, so the connection quotas never
applied to it: one ``tools:invoke`` token once opened 9,990 sessions over 8 connections, the
MCP SDK's table of 10,000 was full, and every tenant and the admin got ``Too many open
sessions``. Here a session is a resource of its token, counted as the connection quotas count
connections (:mod:`toolmesh.gateway.quotas`):

* a scoped token holds at most ``per_token`` sessions, and the scoped tokens of one workspace
  together at most ``per_workspace`` (a session serves one workspace: it counts there);
* everyone's sessions together — the gateway's own token and local callers included — are at
  most ``total``;
* a session with no request in flight for ``idle`` seconds is ended.

When a new session would pass a limit, the oldest idle session that limit counts is ended to
make room: the opener's own first, then (for the workspace's and the global limit) the
workspace's or anyone's — but a tenant never ends a session of the admin or of a local caller.
A session with a request in flight (an open ``GET`` stream included) is never ended for room;
if every session a limit counts is in use, the new one is refused with the limit named.
Sessions in use are bounded by the connections, so with ``total`` above ``--max-connections``
the admin always finds room.

Pure bookkeeping: the endpoint feeds it (:meth:`SessionTable.admit`, :meth:`Ticket.opened`,
:meth:`SessionTable.using`, :meth:`SessionTable.ended`) and ends what it is told to end.
"""

from __future__ import annotations

import contextlib
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Admission", "Opener", "SessionLimits", "SessionTable", "Ticket", "TooManySessions"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionLimits:
    """The limits of the module docstring; 0 (or an ``idle`` of 0) turns one off."""

    per_token: int = 64
    per_workspace: int = 256
    total: int = 2048
    #: seconds a session may go with no request in flight
    idle: float = 300.0


@dataclass(frozen=True, slots=True)
class Opener:
    """Who opens a session: a token (``admin``, ``local`` or a scoped token's id), whether it
    is scoped (a tenant, counted against the per-token and per-workspace limits), and the
    workspace the session serves."""

    token: str
    scoped: bool
    workspace: str


@dataclass(frozen=True, slots=True)
class TooManySessions:
    """Why a session may not be opened: the HTTP status and a message naming the limit."""

    status: int
    limit: str
    message: str


class _Session:
    __slots__ = ("busy", "opener")

    def __init__(self, opener: Opener) -> None:
        self.opener = opener
        #: requests of the session in flight (an open GET stream is one)
        self.busy = 0


class _Idle:
    """Idle sessions in the order they became idle (the oldest first), overall and by the
    groups a limit counts; each entry is when it became idle."""

    def __init__(self) -> None:
        self.all: OrderedDict[str, float] = OrderedDict()
        self.scoped: OrderedDict[str, float] = OrderedDict()
        self.by_token: dict[str, OrderedDict[str, float]] = {}
        self.by_workspace: dict[str, OrderedDict[str, float]] = {}

    def groups(self, opener: Opener) -> list[OrderedDict[str, float]]:
        groups = [self.all]
        if opener.scoped:
            groups += [self.scoped, self.by_token.setdefault(opener.token, OrderedDict()),
                       self.by_workspace.setdefault(opener.workspace, OrderedDict())]
        return groups

    def add(self, id: str, opener: Opener, since: float) -> None:
        for group in self.groups(opener):
            group[id] = since

    def remove(self, id: str, opener: Opener) -> None:
        self.all.pop(id, None)
        if opener.scoped:
            self.scoped.pop(id, None)
            _drop(self.by_token, opener.token, id)
            _drop(self.by_workspace, opener.workspace, id)

    @staticmethod
    def oldest(group: OrderedDict[str, float] | None) -> str | None:
        return next(iter(group), None) if group else None


def _drop(groups: dict[str, OrderedDict[str, float]], key: str, id: str) -> None:
    group = groups.get(key)
    if group is not None:
        group.pop(id, None)
        if not group:
            del groups[key]


class Ticket:
    """Room for one session being opened (its ``initialize`` in flight): counted from
    :meth:`SessionTable.admit` until the request is over; the session it opened then holds
    the room instead."""

    __slots__ = ("_done", "_table", "opener", "session")

    def __init__(self, table: SessionTable, opener: Opener) -> None:
        self._table = table
        self.opener = opener
        self.session: str | None = None
        self._done = False

    def opened(self, session: str) -> None:
        """The SDK opened ``session`` on this ticket: it holds the ticket's room, in use until
        :meth:`closed` (the end of the request that opened it)."""
        if self.session is None and not self._done:
            self.session = session
            self._table._open(session, self.opener)

    def closed(self) -> None:
        """The request that took the ticket is over: its room goes back if no session came of
        it, else the session becomes idle."""
        if self._done:
            return
        self._done = True
        if self.session is None:
            self._table._release(self.opener)
        else:
            self._table._done(self.session)


@dataclass(frozen=True, slots=True)
class Admission:
    """What :meth:`SessionTable.admit` decided: the ticket (``None``: refused, ``refusal``
    says why) and the sessions to end for room, already gone from the table."""

    ticket: Ticket | None
    end: list[str]
    refusal: TooManySessions | None = None


#: a limit as :meth:`SessionTable.admit` checks it: its cap, its count now, the idle sessions
#: it may end (the best group first) and its refusal
_Check = Callable[[], tuple[int, int, list["OrderedDict[str, float] | None"], TooManySessions]]


class SessionTable:
    """The sessions of one endpoint (see the module docstring). ``clock``: the current time in
    seconds (the event loop's); ``on_idle``: told when the table goes from no idle session to
    one (the reaper then has a deadline to wait for)."""

    def __init__(self, limits: SessionLimits, *, clock: Callable[[], float],
                 on_idle: Callable[[], None] = lambda: None) -> None:
        self.limits = limits
        self._clock = clock
        self._on_idle = on_idle
        self._sessions: dict[str, _Session] = {}
        self._idle = _Idle()
        #: sessions and tickets held, by scoped token, by workspace (scoped only), and in all
        self._by_token: Counter[str] = Counter()
        self._by_workspace: Counter[str] = Counter()
        self._total = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def holding(self, token: str) -> int:
        """Sessions (and openings in flight) scoped token ``token`` holds."""
        return self._by_token[token]

    def owner(self, session: str) -> Opener | None:
        """Who opened ``session``; ``None`` if the table does not hold it."""
        held = self._sessions.get(session)
        return held.opener if held is not None else None

    # -- opening -------------------------------------------------------------------------------

    def admit(self, opener: Opener) -> Admission:
        """Room for a session of ``opener``, ending idle sessions for it if a limit is
        reached (see the module docstring)."""
        end: list[str] = []
        for check in self._checks(opener):
            while True:
                cap, count, groups, refusal = check()
                if not cap or count < cap:
                    break
                victim = next((v for v in map(_Idle.oldest, groups) if v is not None), None)
                if victim is None:
                    # what was ended for an earlier limit stays ended: it was idle and over one
                    return Admission(None, end, refusal)
                end.append(victim)
                self._forget(victim)
        self._hold(opener)
        return Admission(Ticket(self, opener), end)

    def _checks(self, opener: Opener) -> list[_Check]:
        limits = self.limits
        idle = self._idle

        def token() -> tuple[int, int, list[OrderedDict[str, float] | None], TooManySessions]:
            return limits.per_token, self._by_token[opener.token], [
                idle.by_token.get(opener.token)], TooManySessions(
                429, "--token-mcp-sessions",
                f"this token already holds {limits.per_token} MCP sessions, its limit "
                "(--token-mcp-sessions), and every one has a request in flight: end one "
                "(DELETE /mcp with its Mcp-Session-Id) or wait for one to finish")

        def workspace() -> tuple[int, int, list[OrderedDict[str, float] | None],
                                 TooManySessions]:
            return limits.per_workspace, self._by_workspace[opener.workspace], [
                idle.by_token.get(opener.token), idle.by_workspace.get(opener.workspace)
            ], TooManySessions(
                429, "--workspace-mcp-sessions",
                f"the tokens of workspace {opener.workspace!r} already hold "
                f"{limits.per_workspace} MCP sessions, its limit (--workspace-mcp-sessions), "
                "and every one has a request in flight: end some or wait for one to finish")

        def total() -> tuple[int, int, list[OrderedDict[str, float] | None], TooManySessions]:
            # a tenant makes room among tenants' sessions only, the admin among anyone's
            groups = ([idle.by_token.get(opener.token), idle.scoped] if opener.scoped
                      else [idle.all])
            return limits.total, self._total, groups, TooManySessions(
                503, "--mcp-sessions",
                f"the gateway holds {limits.total} MCP sessions, its limit (--mcp-sessions), "
                "and none it may end is idle: try again shortly")

        return [token, workspace, total] if opener.scoped else [total]

    def _hold(self, opener: Opener) -> None:
        self._total += 1
        if opener.scoped:
            self._by_token[opener.token] += 1
            self._by_workspace[opener.workspace] += 1

    def _release(self, opener: Opener) -> None:
        self._total -= 1
        if opener.scoped:
            _decrement(self._by_token, opener.token)
            _decrement(self._by_workspace, opener.workspace)

    def _open(self, id: str, opener: Opener) -> None:
        held = _Session(opener)
        held.busy = 1  # the request that opened it, until its ticket closes
        self._sessions[id] = held

    def _done(self, id: str) -> None:
        held = self._sessions.get(id)
        if held is not None:
            self._finish(id, held)

    # -- use -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def using(self, session: str | None, opener: Opener) -> Iterator[None]:
        """A request of ``session`` in flight while the block runs (only if ``opener`` opened
        it: a stranger's request keeps nothing alive)."""
        held = self._sessions.get(session) if session is not None else None
        if session is None or held is None or held.opener != opener:
            yield
            return
        if held.busy == 0:
            self._idle.remove(session, held.opener)
        held.busy += 1
        try:
            yield
        finally:
            if self._sessions.get(session) is held:
                self._finish(session, held)

    def _finish(self, id: str, held: _Session) -> None:
        held.busy -= 1
        if held.busy == 0:
            first = not self._idle.all
            self._idle.add(id, held.opener, self._clock())
            if first:
                self._on_idle()

    # -- ending --------------------------------------------------------------------------------

    def ended(self, session: str) -> None:
        """``session`` is over (the client deleted it, it was ended, the SDK dropped it)."""
        self._forget(session)

    def next_expiry(self) -> float | None:
        """When the oldest idle session expires; ``None``: none is idle, or none expires."""
        if not self.limits.idle:
            return None
        for since in self._idle.all.values():
            return since + self.limits.idle
        return None

    def expire(self) -> list[str]:
        """The sessions idle for ``idle`` seconds by now, forgotten: the caller ends them."""
        if not self.limits.idle:
            return []
        cutoff = self._clock() - self.limits.idle
        gone: list[str] = []
        for id, since in self._idle.all.items():
            if since > cutoff:
                break
            gone.append(id)
        for id in gone:
            self._forget(id)
        return gone

    def sessions(self) -> list[str]:
        """Every session held now."""
        return list(self._sessions)

    def _forget(self, id: str) -> None:
        held = self._sessions.pop(id, None)
        if held is None:
            return
        if held.busy == 0:
            self._idle.remove(id, held.opener)
        self._release(held.opener)


def _decrement(counter: Counter[str], key: str) -> None:
    left = counter[key] - 1
    if left > 0:
        counter[key] = left
    else:
        del counter[key]
