"""The usage meter: what it adds up, and that it is per block and per task."""

from __future__ import annotations

import asyncio

from toolmesh.llm.usage import Usage, metering, record


def test_a_meter_sums_final_responses_and_keeps_the_last_model() -> None:
    with metering() as usage:
        record({"response": "a", "in_token": 3, "out_token": 1, "model": "m1",
                "end_of_stream": True})
        record({"response": "piece", "in_token": 100, "end_of_stream": False})  # a piece: no
        record({"text": "b", "in_token": 4, "out_token": 2, "model": "m2"})  # final by default
        record({"text": "c", "in_token": None, "out_token": True, "model": ""})  # no counts
    assert usage == Usage(in_token=7, out_token=3, model="m2")
    assert usage.wire() == {"in_token": 7, "out_token": 3, "model": "m2"}


def test_nothing_reported_is_not_zero_and_outside_a_meter_nothing_is_kept() -> None:
    record({"in_token": 5})  # no meter: ignored
    with metering() as usage:
        pass
    assert usage.wire() == {"in_token": None, "out_token": None, "model": None}


async def test_concurrent_meters_do_not_mix() -> None:
    async def work(count: int) -> Usage:
        with metering() as usage:
            for _ in range(count):
                await asyncio.sleep(0)
                record({"in_token": 1, "out_token": 1})
        return usage

    one, three = await asyncio.gather(work(1), work(3))
    assert (one.in_token, three.in_token) == (1, 3)
