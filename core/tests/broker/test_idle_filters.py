"""A send filter left out of the interceptor chain while it is idle."""

from __future__ import annotations

from collections.abc import Awaitable

from relaymq.broker.broker import Broker
from relaymq.broker.chain import Next
from relaymq.broker.security import ConnectRequest
from relaymq.dispatch.batch import SendContext
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.testing import broker_config


async def test_an_idle_filter_is_not_called_and_comes_back_in_its_place() -> None:
    seen: list[str] = []

    def first(ctx: SendContext, message: Message, nxt: Next) -> Awaitable[None]:
        seen.append("first")
        return nxt(ctx, message)

    def second(ctx: SendContext, message: Message, nxt: Next) -> Awaitable[None]:
        seen.append("second")
        return nxt(ctx, message)

    broker = Broker(broker_config())
    broker.add_filter(first)
    broker.add_filter(second)
    broker.set_filter_idle(first, True)  # before start: the chain is folded without it
    await broker.start()
    try:
        conn = await broker.connect(ConnectRequest())  # opened before the changes below
        dest = Destination.queue("idle-filters")
        await conn.send(Message(b"1", destination=dest))
        assert seen == ["second"]
        broker.set_filter_idle(first, False)
        await conn.send(Message(b"2", destination=dest))
        assert seen == ["second", "first", "second"]  # back in its configured place
        broker.set_filter_idle(second, True)
        broker.set_filter_idle(second, True)  # twice is once
        await conn.send(Message(b"3", destination=dest))
        assert seen == ["second", "first", "second", "first"]
        assert broker.queue_size("idle-filters") == 3  # an idle filter passes messages on
    finally:
        await broker.stop()
