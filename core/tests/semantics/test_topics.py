"""Publish/subscribe: non-durable and durable subscriptions."""

from __future__ import annotations

import pytest
from relaymq.errors import SubscriptionInUse
from relaymq.testing.barriers import before_marker

from .conftest import over


@over("vm", "stomp", "amqp")
async def test_non_durable_subscribers_only_see_later_messages(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    await p.send("topic://NEWS", "before")
    s1 = await p.consumer("topic://NEWS")
    s2 = await (await connect(b)).consumer("topic://NEWS")
    await p.send("topic://NEWS", "after")
    assert (await s1.receive(10)).text == "after"  # "before", had it been kept, came first
    assert (await s2.receive(10)).text == "after"
    assert await before_marker(p, "topic://NEWS", s1) == []
    assert await before_marker(p, "topic://NEWS", s2) == []  # (s1's marker skipped)


@over("vm", "stomp", "amqp")
async def test_wildcard_topic_subscription(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    s = await p.consumer("topic://PRICE.>")
    one = await p.consumer("topic://PRICE.*")
    await p.send("topic://PRICE.STOCK.IBM", "deep")
    await p.send("topic://PRICE.FX", "shallow")
    await p.send("topic://OTHER", "no")
    await p.send("topic://PRICE.END", "marker")  # what should not come would come before it
    assert [(await s.receive(10)).text for _ in range(3)] == ["deep", "shallow", "marker"]
    assert [(await one.receive(10)).text for _ in range(2)] == ["shallow", "marker"]


async def test_durable_subscription_keeps_messages_while_offline(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    sub_conn = await connect(b, client_id="app-1")
    d = await sub_conn.consumer("topic://EVENTS", durable_name="audit", selector="level > 1")
    await p.send("topic://EVENTS", "online", properties={"level": 2})
    assert await before_marker(p, "topic://EVENTS", d, properties={"level": 9}) == ["online"]
    await sub_conn.close()
    await p.send("topic://EVENTS", "offline-1", properties={"level": 3})
    await p.send("topic://EVENTS", "filtered", properties={"level": 0})
    await p.send("topic://EVENTS", "offline-2", properties={"level": 5})
    back = await connect(b, client_id="app-1")
    d2 = await back.consumer("topic://EVENTS", durable_name="audit", selector="level > 1")
    assert await before_marker(p, "topic://EVENTS", d2, properties={"level": 9}) == [
        "offline-1", "offline-2"]


async def test_unsubscribe_refused_while_attached_then_removes(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    conn = await connect(b, client_id="app-2")
    d = await conn.consumer("topic://T", durable_name="s")
    with pytest.raises(SubscriptionInUse):
        await conn.unsubscribe("s")
    await d.close()
    await p.send("topic://T", "kept")
    await conn.unsubscribe("s")
    d2 = await conn.consumer("topic://T", durable_name="s")
    assert await before_marker(p, "topic://T", d2) == []


async def test_second_attach_to_a_durable_subscription_is_refused(make_broker, connect):
    b = await make_broker()
    conn = await connect(b, client_id="app-3")
    await conn.consumer("topic://T", durable_name="s")
    with pytest.raises(SubscriptionInUse):
        await conn.consumer("topic://T", durable_name="s")


async def test_no_local_skips_own_messages(make_broker, connect):
    b = await make_broker()
    a = await connect(b)
    other = await connect(b)
    s = await a.consumer("topic://CHAT", no_local=True)
    await a.send("topic://CHAT", "mine")
    await other.send("topic://CHAT", "theirs")
    assert await before_marker(other, "topic://CHAT", s) == ["theirs"]


@over("vm", "amqp")  # STOMP cannot release
async def test_topic_consumer_ack_and_redelivery(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    s = await p.consumer("topic://T2", ack_mode="individual")
    await p.send("topic://T2", "x")
    m = await s.receive(10)
    m.release()
    again = await s.receive(10)
    assert again.text == "x"
    again.ack()
    assert await before_marker(p, "topic://T2", s, ack=True) == []
