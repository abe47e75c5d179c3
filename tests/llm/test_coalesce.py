"""The coalescer: fewer messages, the same text in the same order, and nothing held that a
reader is waiting for (the first piece, the end)."""

from __future__ import annotations

import asyncio
from itertools import accumulate

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolmesh.llm.coalesce import OFF, Coalescer, Coalescing

#: long enough that nothing in a test goes out because the window passed
FOREVER = 3600.0


class Sink:
    """Where a coalescer sends: keeps the messages; a slow one takes ``delay`` each."""

    def __init__(self, delay: float = 0.0) -> None:
        self.messages: list[str] = []
        self.delay = delay
        self.arrived = asyncio.Event()
        #: set when a send begins
        self.sending = asyncio.Event()

    async def send(self, text: str) -> None:
        self.sending.set()
        if self.delay:
            await asyncio.sleep(self.delay)
        self.messages.append(text)
        self.arrived.set()

    async def next_message(self) -> str:
        """The next message to arrive (waits for it, within a generous deadline)."""
        count = len(self.messages)
        async with asyncio.timeout(10):
            while len(self.messages) == count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.messages[count]


def boundaries(parts: list[str]) -> set[int]:
    return set(accumulate(len(p) for p in parts))


# -- whatever the timing: the same text, in order, cut only between pieces --------------------

pieces = st.lists(st.text(min_size=0, max_size=8), max_size=40)
#: before each piece, a pause of this many tenths of a millisecond (0: none, the piece was
#: already there)
pauses = st.lists(st.sampled_from([0, 0, 0, 1, 5, 20]), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=pieces, pauses=pauses, window=st.sampled_from([0.0, 0.0005, 0.002, 0.01]),
       max_chars=st.integers(min_value=1, max_value=30),
       send_delay=st.sampled_from([0.0, 0.0, 0.0003]))
def test_the_messages_join_to_the_pieces_in_order(pieces: list[str], pauses: list[int],
                                                  window: float, max_chars: int,
                                                  send_delay: float) -> None:
    async def run() -> list[str]:
        sink = Sink(send_delay)
        out = Coalescer(sink.send, Coalescing(window=window, max_chars=max_chars))
        try:
            for piece, pause in zip(pieces, pauses + [0] * len(pieces)):
                if pause:
                    await asyncio.sleep(pause / 10_000)
                await out.add(piece)
            await out.flush()
        finally:
            out.cancel()
        return sink.messages

    messages = asyncio.run(run())
    assert "".join(messages) == "".join(pieces)
    assert all(messages), "no empty message"
    # every message is whole pieces: it ends where a piece ends
    assert boundaries(messages) <= boundaries(pieces)
    if window == 0:
        assert messages == [p for p in pieces if p]


# -- what goes out when ------------------------------------------------------------------------

async def test_the_first_piece_goes_out_at_once_and_the_next_are_held() -> None:
    sink = Sink()
    out = Coalescer(sink.send, Coalescing(window=FOREVER))
    await out.add("Thought: ")
    assert sink.messages == ["Thought: "]  # sent before add returned: no wait at all
    for word in ("I ", "need ", "a ", "tool"):
        await out.add(word)
    assert sink.messages == ["Thought: "]
    assert out.messages == 1


async def test_the_end_sends_what_is_held_at_once() -> None:
    sink = Sink()
    out = Coalescer(sink.send, Coalescing(window=FOREVER))
    for word in ("The ", "capital ", "of ", "France ", "is ", "Paris."):
        await out.add(word)
    async with asyncio.timeout(10):  # not the window: it would wait an hour
        await out.flush()
    assert sink.messages == ["The ", "capital of France is Paris."]
    await out.flush()  # nothing held: nothing sent
    assert out.messages == 2


async def test_take_hands_over_what_is_held_for_the_last_message() -> None:
    sink = Sink()
    out = Coalescer(sink.send, Coalescing(window=FOREVER))
    for word in ("a ", "b ", "c"):
        await out.add(word)
    assert await out.take() == "b c"
    assert await out.take() == ""
    assert sink.messages == ["a "]


async def test_held_pieces_go_out_when_the_window_has_passed_without_more_coming() -> None:
    sink = Sink()
    out = Coalescer(sink.send, Coalescing(window=0.05))
    await out.add("a")
    await out.add("b")
    await out.add("c")
    assert sink.messages == ["a"]
    # no flush: the timer sends them (within a generous deadline; no poll)
    assert await sink.next_message() == "bc"
    out.cancel()


async def test_a_piece_after_a_pause_goes_out_at_once() -> None:
    sink = Sink()
    out = Coalescer(sink.send, Coalescing(window=0.02))
    await out.add("a")
    await asyncio.sleep(0.1)  # a model thinking: several windows with nothing written
    await out.add("b")
    assert sink.messages == ["a", "b"]


async def test_max_chars_held_go_out_at_once() -> None:
    sink = Sink()
    out = Coalescer(sink.send, Coalescing(window=FOREVER, max_chars=10))
    for word in ["first "] + ["word "] * 7:
        await out.add(word)
    # the first at once; then each time 10 characters are held
    assert sink.messages == ["first ", "word word ", "word word ", "word word "]
    await out.flush()
    assert sink.messages[-1] == "word "


@pytest.mark.parametrize("window", [0.0, 10.0, FOREVER])
async def test_the_window_decides_how_many_messages_a_burst_costs(window: float) -> None:
    sink = Sink()
    out = Coalescer(sink.send, Coalescing(window=window))
    words = [f"w{i} " for i in range(50)]
    for word in words:  # all at once, as from a model whose answer was ready
        await out.add(word)
    await out.flush()
    assert "".join(sink.messages) == "".join(words)
    assert len(sink.messages) == (50 if window == 0 else 2)


async def test_a_zero_window_is_off() -> None:
    assert not OFF.enabled and Coalescing().enabled
    sink = Sink()
    out = Coalescer(sink.send, OFF)
    for word in ("a", "", "b", "c"):
        await out.add(word)
    assert sink.messages == ["a", "b", "c"]


async def test_pieces_that_come_while_a_timed_send_is_in_flight_follow_it() -> None:
    sink = Sink(delay=0.05)
    out = Coalescer(sink.send, Coalescing(window=0.01))
    await out.add("1")  # sent at once (the slow sink: add returns when it is out)
    sink.sending.clear()
    await out.add("2")
    async with asyncio.timeout(10):
        await sink.sending.wait()  # the timer is sending "2"; while it is on its way:
    await out.add("3")
    await out.add("4")
    assert sink.messages == ["1"]
    await out.flush()
    assert sink.messages == ["1", "2", "34"]


async def test_a_failed_timed_send_is_raised_to_the_writer() -> None:
    failed = asyncio.Event()

    async def send(text: str) -> None:
        if text != "first":
            failed.set()
            raise ConnectionError("the bus is gone")

    out = Coalescer(send, Coalescing(window=0.01))
    await out.add("first")
    await out.add("second")
    async with asyncio.timeout(10):
        await failed.wait()
    with pytest.raises(ConnectionError):
        await out.flush()
    with pytest.raises(ConnectionError):
        await out.add("third")


def test_a_window_must_be_zero_or_more() -> None:
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="0 or more seconds"):
            Coalescing(window=bad)
    with pytest.raises(ValueError, match="at least 1"):
        Coalescing(max_chars=0)
