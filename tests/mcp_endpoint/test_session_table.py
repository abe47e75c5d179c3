"""The bookkeeping of /mcp sessions (mcp_endpoint/session_table.py): which session is ended for
room, which opening is refused, and when an idle one expires. The clock is a number the test
moves; everything else is the table itself."""

from __future__ import annotations

import pytest

from toolmesh.mcp_endpoint.session_table import (
    Opener,
    SessionLimits,
    SessionTable,
    Ticket,
)

ALICE = Opener("alice", True, "ws1")
BOB = Opener("bob", True, "ws1")
CAROL = Opener("carol", True, "ws2")
ADMIN = Opener("admin", False, "ws1")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def table(**limits: float) -> tuple[SessionTable, Clock]:
    clock = Clock()
    return SessionTable(SessionLimits(**limits), clock=clock), clock  # type: ignore[arg-type]


def open_idle(sessions: SessionTable, opener: Opener, id: str) -> list[str]:
    """Open session ``id`` as the SDK would and let its opening request end: what was ended
    for its room."""
    admitted = sessions.admit(opener)
    assert admitted.ticket is not None, admitted.refusal
    admitted.ticket.opened(id)
    admitted.ticket.closed()
    return admitted.end


def test_a_token_at_its_limit_ends_its_own_oldest_idle_session() -> None:
    sessions, clock = table(per_token=3)
    for n in range(3):
        clock.now += 1
        assert open_idle(sessions, ALICE, f"a{n}") == []
    assert open_idle(sessions, BOB, "b0") == []
    clock.now += 1
    assert open_idle(sessions, ALICE, "a3") == ["a0"]
    assert open_idle(sessions, ALICE, "a4") == ["a1"]
    assert sessions.holding("alice") == 3 and sessions.owner("b0") == BOB
    assert sessions.owner("a0") is None and sessions.owner("a4") == ALICE


def test_a_session_in_use_is_not_ended_and_with_none_idle_the_opening_is_refused() -> None:
    sessions, _ = table(per_token=2)
    open_idle(sessions, ALICE, "a0")
    open_idle(sessions, ALICE, "a1")
    with sessions.using("a0", ALICE):
        assert open_idle(sessions, ALICE, "a2") == ["a1"]  # a0 is busy: the next oldest
        with sessions.using("a2", ALICE):
            refused = sessions.admit(ALICE)
    assert refused.ticket is None and refused.end == []
    assert refused.refusal is not None and refused.refusal.status == 429
    assert refused.refusal.limit == "--token-mcp-sessions"
    assert "2 MCP sessions" in refused.refusal.message
    assert sessions.holding("alice") == 2  # a refusal holds nothing


def test_a_strangers_request_does_not_keep_a_session_in_use() -> None:
    sessions, _ = table(per_token=1)
    open_idle(sessions, ALICE, "a0")
    with sessions.using("a0", BOB):  # bob names alice's session: the SDK answers 404
        assert open_idle(sessions, ALICE, "a1") == ["a0"]


def test_a_workspace_at_its_limit_ends_the_openers_own_idle_session_first() -> None:
    sessions, clock = table(per_token=10, per_workspace=3)
    open_idle(sessions, BOB, "b0")
    clock.now += 1
    open_idle(sessions, ALICE, "a0")
    open_idle(sessions, BOB, "b1")
    open_idle(sessions, CAROL, "c0")  # another workspace: not counted in ws1
    assert open_idle(sessions, ALICE, "a1") == ["a0"]  # alice's own, though bob's is older
    with sessions.using("a1", ALICE):
        assert open_idle(sessions, ALICE, "a2") == ["b0"]  # then the workspace's oldest
        with sessions.using("a2", ALICE), sessions.using("b1", BOB):
            refused = sessions.admit(ALICE)
    assert refused.refusal is not None and refused.refusal.limit == "--workspace-mcp-sessions"
    assert "'ws1'" in refused.refusal.message
    assert sessions.owner("c0") == CAROL


def test_a_tenant_never_ends_the_admins_sessions_and_the_admin_always_finds_room() -> None:
    sessions, clock = table(per_token=0, per_workspace=0, total=4)
    open_idle(sessions, ADMIN, "x0")
    open_idle(sessions, ADMIN, "x1")
    clock.now += 1
    open_idle(sessions, ALICE, "a0")
    open_idle(sessions, CAROL, "c0")
    assert open_idle(sessions, BOB, "b0") == ["a0"]  # the tenants' oldest, not the admin's
    with sessions.using("b0", BOB), sessions.using("c0", CAROL):
        refused = sessions.admit(ALICE)
        assert open_idle(sessions, ADMIN, "x2") == ["x0"]  # the admin ends anyone's
    assert refused.refusal is not None and refused.refusal.status == 503
    assert refused.refusal.limit == "--mcp-sessions"
    assert len(sessions) == 4


def test_local_and_admin_callers_count_only_in_the_total() -> None:
    sessions, _ = table(per_token=1, per_workspace=1, total=3)
    for n in range(3):
        assert open_idle(sessions, ADMIN, f"x{n}") == []
    assert open_idle(sessions, ADMIN, "x3") == ["x0"]
    assert sessions.holding("admin") == 0


def test_an_opening_in_flight_holds_room_and_gives_it_back_if_nothing_opened() -> None:
    sessions, _ = table(per_token=2)
    first = sessions.admit(ALICE)
    second = sessions.admit(ALICE)
    assert isinstance(first.ticket, Ticket) and isinstance(second.ticket, Ticket)
    assert sessions.admit(ALICE).refusal is not None  # two openings in flight: no room
    first.ticket.closed()  # the SDK refused that initialize: no session
    second.ticket.opened("a0")
    second.ticket.closed()
    second.ticket.closed()
    assert sessions.holding("alice") == 1
    third = sessions.admit(ALICE)
    assert third.ticket is not None and third.end == []


def test_a_session_ended_while_its_opening_is_in_flight_is_counted_once() -> None:
    sessions, _ = table(per_token=2)
    admitted = sessions.admit(ALICE)
    assert admitted.ticket is not None
    admitted.ticket.opened("a0")
    sessions.ended("a0")  # the client deleted it at once
    admitted.ticket.closed()
    assert sessions.holding("alice") == 0 and len(sessions) == 0


def test_idle_sessions_expire_in_the_order_they_went_idle_and_busy_ones_do_not() -> None:
    sessions, clock = table(idle=60)
    open_idle(sessions, ALICE, "a0")
    clock.now += 10
    open_idle(sessions, BOB, "b0")
    open_idle(sessions, ADMIN, "x0")
    assert sessions.next_expiry() == clock.now - 10 + 60
    clock.now += 55
    assert sessions.expire() == ["a0"]
    with sessions.using("b0", BOB):
        clock.now += 100
        assert sessions.expire() == ["x0"]
        assert sessions.next_expiry() is None
    assert sessions.next_expiry() == clock.now + 60  # idle again from now
    assert sessions.owner("b0") == BOB and sessions.owner("a0") is None


def test_no_idle_limit_means_no_expiry() -> None:
    sessions, clock = table(idle=0)
    open_idle(sessions, ALICE, "a0")
    clock.now += 10**9
    assert sessions.next_expiry() is None and sessions.expire() == []


@pytest.mark.parametrize("opener", [ALICE, ADMIN])
def test_the_idle_hook_is_told_when_the_first_session_goes_idle(opener: Opener) -> None:
    told: list[int] = []
    sessions = SessionTable(SessionLimits(), clock=Clock(), on_idle=lambda: told.append(1))
    open_idle(sessions, opener, "s0")
    open_idle(sessions, opener, "s1")  # the reaper's deadline is the first one's still
    assert told == [1]
    sessions.ended("s0")
    sessions.ended("s1")
    open_idle(sessions, opener, "s2")
    assert told == [1, 1]
