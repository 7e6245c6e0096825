"""The change feed through the kernel's own client (memory store): event kinds,
order, origin, rollback, and the documented API."""

from __future__ import annotations

import asyncio

from relaymq.broker.broker import Broker
from relaymq.broker.security import ConnectRequest
from relaymq.client import connect_broker
from relaymq.config.model import BrokerConfig
from relaymq.feed import (
    DestinationCreated,
    DestinationDeleted,
    MessageAdded,
    MessageRemoved,
    SubscriptionCreated,
    SubscriptionDeleted,
)
from relaymq.model.destination import Destination
from relaymq.model.message import Message


async def until(cond, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


async def test_send_ack_and_rollback_events_in_order() -> None:
    broker = Broker(BrokerConfig(persistent=False))
    await broker.start()
    try:
        sub = broker.change_feed.subscribe()
        conn = await broker.connect(ConnectRequest())
        q = Destination.queue("feed.a")
        await conn.send(Message(b"one", destination=q))
        conn.begin("tx")
        await conn.send(Message(b"rolled back", destination=q), "tx")
        conn.rollback("tx")
        got: list = []
        consumer = await conn.subscribe(q, on_message=got.append)
        await until(lambda: got)
        consumer.ack(got[0].id)
        await until(lambda: sub.pending >= 3)
        events = sub.drain()
        kinds = [type(e) for e in events]
        assert kinds == [DestinationCreated, MessageAdded, MessageRemoved]
        assert events[0].recovered is False
        assert events[1].message.body == b"one" and events[1].placements == (("queue://feed.a", 1),)
        assert events[2].reason == "acked" and events[2].seq == 1
        assert all(e.origin is None for e in events)
    finally:
        await broker.stop()


async def test_origin_of_a_peer_connection_and_durable_subscription_events() -> None:
    broker = Broker(BrokerConfig(persistent=False))
    await broker.start()
    try:
        sub = broker.change_feed.subscribe({MessageAdded, SubscriptionCreated, SubscriptionDeleted})
        peer = await broker.connect(ConnectRequest(client_id="peer"), network=True,
                                    origin="broker-b")
        t = Destination.topic("feed.t")
        await peer.subscribe(t, durable_name="d1", on_message=lambda d: None)
        await peer.send(Message(b"x", destination=t))
        await until(lambda: sub.pending >= 2)
        created, added_ev = sub.drain()
        assert isinstance(created, SubscriptionCreated) and created.origin == "broker-b"
        assert isinstance(added_ev, MessageAdded) and added_ev.origin == "broker-b"
        assert added_ev.placements == (("durable://peer:d1", 1),)
        for c in list(peer.consumers.values()):
            peer.close_consumer(c)
        await peer.unsubscribe("d1")
        await until(lambda: sub.pending >= 1)
        assert isinstance(sub.get_nowait(), SubscriptionDeleted)
    finally:
        await broker.stop()


async def test_no_subscriber_no_flags_and_close_turns_them_off() -> None:
    broker = Broker(BrokerConfig(persistent=False))
    feed = broker.change_feed
    assert not (feed.active or feed.watch_added or feed.watch_removed)
    sub = feed.subscribe({DestinationDeleted})
    assert feed.active and not feed.watch_added
    sub.close()
    assert not feed.active


async def test_read_messages_by_sequence_on_a_memory_broker() -> None:
    broker = Broker(BrokerConfig(persistent=False))
    await broker.start()
    try:
        conn = await connect_broker(broker)
        for i in range(10):
            await conn.send(Destination.queue("feed.r"), f"m{i}".encode())
        q = Destination.queue("feed.r")
        page = await broker.read_messages(q, after=3, until=6)
        assert [r.seq for r in page] == [4, 5, 6]
        assert [r.message.body for r in page] == [b"m3", b"m4", b"m5"]
        await conn.close()
    finally:
        await broker.stop()
