"""What the in-process bus promises an inline handler beyond the contract: it runs within the
sender's ``send``, with no task and no turn of the event loop in between."""

from __future__ import annotations

from typing import Any

from tests.conftest import Backend
from toolmesh import Message


async def test_an_inline_handler_has_run_when_send_returns(memory: Backend) -> None:
    queue = f"response:tg:{memory.topic()}"
    got: list[Any] = []
    bus = await memory.connect()

    def handler(message: Message) -> None:
        got.append(message.json())

    await bus.subscribe(queue, handler, subscription="s", inline=True)
    producer = await bus.producer(queue)
    await producer.send({"n": 1})
    assert got == [{"n": 1}]
    await producer.send_bytes(b"[2]")
    assert got == [{"n": 1}, [2]]


async def test_an_inline_handler_gets_its_own_copy_of_the_body(memory: Backend) -> None:
    queue = f"notify:tg:{memory.topic()}"
    seen: list[Any] = []
    bus = await memory.connect()
    for _ in range(2):
        # each decodes its own: a handler that changes what it got changes nothing elsewhere
        def handler(message: Message) -> None:
            value = message.json()
            seen.append(value)
            value["changed"] = True

        await bus.subscribe(queue, handler, subscription="s", inline=True)
    sent = {"k": "v"}
    await (await bus.producer(queue)).send(sent)
    assert seen == [{"k": "v", "changed": True}, {"k": "v", "changed": True}]
    assert seen[0] is not seen[1] and sent == {"k": "v"}
