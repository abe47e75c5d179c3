"""Calls held between the rounds of a 2026-07-28 client: the client that comes back finds its
call and answers it; one that does not has its question cancelled when the window closes, so
the call ends then, not at its deadline."""

from __future__ import annotations

import asyncio

import mcp_types

from toolmesh.mcp_endpoint.held_calls import Held, HeldCalls, Question

LINK = mcp_types.ElicitRequestURLParams(message="sign in", url="https://example.test/")


def asking_call() -> Held[str]:
    """A call that asks one question and ends with the answer's action."""

    async def run(held: Held[str]) -> str:
        answered: asyncio.Future[mcp_types.ElicitResult] = \
            asyncio.get_running_loop().create_future()

        async def answer(result: mcp_types.ElicitResult) -> None:
            answered.set_result(result)

        await held.ask(Question(params=LINK, answer=answer))
        return f"answered {(await answered).action}"

    return Held(run)


async def test_the_client_that_comes_back_answers_its_call() -> None:
    calls = HeldCalls(window=30)
    held = asking_call()
    asked = await held.next()
    assert isinstance(asked, Question) and asked.params == LINK
    id = calls.hold(held, asked)
    taken = calls.take(id)
    assert taken is not None and calls.take(id) is None  # taken once
    await taken[1].answer(mcp_types.ElicitResult(action="accept"))
    assert await taken[0].next() == "answered accept"
    assert calls.take("a-guess") is None and len(calls) == 0


async def test_a_client_that_does_not_come_back_has_its_question_cancelled() -> None:
    calls = HeldCalls(window=0.05)
    held = asking_call()
    asked = await held.next()
    assert isinstance(asked, Question)
    id = calls.hold(held, asked)
    async with asyncio.timeout(5):  # the window, not the call's own time
        assert await held.task == "answered cancel"
    assert calls.take(id) is None  # too late: the call ended


async def test_a_question_sooner_out_of_time_closes_the_window_sooner() -> None:
    calls = HeldCalls(window=300)
    held = asking_call()
    asked = await held.next()
    assert isinstance(asked, Question)
    asked.within = 0.05
    calls.hold(held, asked)
    async with asyncio.timeout(5):
        assert await held.task == "answered cancel"


async def test_a_round_that_is_cancelled_cancels_its_call() -> None:
    started = asyncio.Event()

    async def run(held: Held[str]) -> str:
        started.set()
        await asyncio.Event().wait()  # a call that does not end by itself
        return "never"

    held: Held[str] = Held(run)
    waiting = asyncio.ensure_future(held.next())
    await started.wait()
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await asyncio.gather(held.task, return_exceptions=True)
    assert held.task.cancelled()
