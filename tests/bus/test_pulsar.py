"""What only the Pulsar backend has: its URL options and its connection errors."""

from __future__ import annotations

import pytest

from tests.pulsar_broker import PulsarLite, free_port
from toolmesh import BusError, connect

pytestmark = pytest.mark.pulsar


async def test_an_unreachable_broker_is_a_clear_error() -> None:
    url = f"pulsar://127.0.0.1:{free_port()}"
    with pytest.raises(BusError, match=r"cannot connect to Pulsar at pulsar://127\.0\.0\.1:\d+: "
                                       r"nothing is listening at 127\.0\.0\.1:\d+ "
                                       r"\(is Pulsar running\?\)$"):
        await connect(url, connect_timeout=1)


async def test_a_server_that_never_answers_is_a_clear_error() -> None:
    import asyncio

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # accepts, and never says a word
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(BusError, match=rf"cannot connect to Pulsar at pulsar://127\.0\.0\.1:"
                                           rf"{port}: no Pulsar broker answered at 127\.0\.0\.1:"
                                           rf"{port} within 1 s, though something listens "
                                           r"there \(is it Pulsar's port, 6650 by default\?"):
            await connect(f"pulsar://127.0.0.1:{port}", connect_timeout=1)
    finally:
        server.close()


@pytest.mark.parametrize(("query", "complaint"), [
    ("?colour=blue", r"unknown option\(s\) colour in Pulsar URL"),
    ("?receiver_queue_size=lots", "receiver_queue_size in .* must be an integer, not 'lots'"),
    ("?receiver_queue_size=0", "receiver_queue_size in .* is out of range: 0"),
    ("?consumer_id_offset=-1", "consumer_id_offset in .* is out of range: -1"),
])
async def test_bad_url_options_are_refused_before_connecting(query: str, complaint: str) -> None:
    with pytest.raises(BusError, match=complaint):
        await connect(f"pulsar://127.0.0.1:{free_port()}{query}")


async def test_url_options_are_applied_and_traffic_flows(
        pulsar_broker: PulsarLite) -> None:
    import asyncio

    bus = await connect(f"{pulsar_broker.url}?receiver_queue_size=5&consumer_id_offset=480")
    try:
        got: list[int] = []
        done = asyncio.Event()

        async def handler(message: object) -> None:
            got.append(message.json())  # type: ignore[attr-defined]
            if len(got) == 3:
                done.set()

        await bus.subscribe("request:tg:tmtest-small-rq", handler, subscription="s")
        producer = await bus.producer("request:tg:tmtest-small-rq")
        for i in range(3):
            await producer.send(i)
        async with asyncio.timeout(15):
            await done.wait()
        assert sorted(got) == [0, 1, 2]
    finally:
        await bus.close()
