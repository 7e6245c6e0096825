"""Point-to-point semantics through the vm:// client, and where the scenario can be
said in their terms, through STOMP and AMQP clients too."""

from __future__ import annotations

import asyncio

from relaymq.config.model import BrokerConfig
from relaymq.testing import wait_until_async
from relaymq.testing.barriers import before_marker

from .conftest import over, policy


@over("vm", "stomp", "amqp")
async def test_fifo_per_producer_and_each_message_once(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    for i in range(50):
        await p.send("queue://Q", f"{i}")
    c1 = await (await connect(b)).consumer("queue://Q", prefetch=1, ack_mode="individual")
    c2 = await (await connect(b)).consumer("queue://Q", prefetch=1, ack_mode="individual")
    got1: list[int] = []
    got2: list[int] = []

    async def drain(c, into):
        while len(got1) + len(got2) < 50:
            if (m := await c.receive(0.05)) is not None:
                into.append(int(m.text))
                m.ack()
            await asyncio.sleep(0)

    await asyncio.wait_for(asyncio.gather(drain(c1, got1), drain(c2, got2)), 60)
    assert sorted(got1 + got2) == list(range(50))
    # each message dispatched once: counted after the last one arrived (none is in flight)
    assert b.destination_stats()["queue://Q"]["dispatched"] == 50
    assert got1 == sorted(got1) and got2 == sorted(got2)
    assert got1 and got2, "competing consumers both receive"
    # a client's acknowledgements may still be on their way (AMQP settles from its own thread)
    await wait_until_async(lambda: b.queue_size("Q") == 0, "every acknowledgement applied")


async def test_prefetch_window_limits_unacked_deliveries(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    for i in range(10):
        await p.send("queue://W", f"{i}")
    c = await p.consumer("queue://W", prefetch=3, ack_mode="individual")
    stats = b.destination_stats
    await wait_until_async(lambda: c._inbox.qsize() == 3, "three deliveries")
    assert stats()["queue://W"]["dispatched"] == 3  # and no more
    first = await c.receive(1)
    first.ack()
    await wait_until_async(lambda: stats()["queue://W"]["dispatched"] == 4, "one more delivery")
    await wait_until_async(lambda: c._inbox.qsize() == 3, "one acked, one more delivered")
    assert stats()["queue://W"]["in_flight"] == 3


async def test_policy_queue_prefetch_applies(make_broker, connect):
    cfg = BrokerConfig(persistent=False, policy_entries=[policy(queue="SLOW.>", queue_prefetch=2)])
    b = await make_broker(cfg)
    p = await connect(b)
    for i in range(5):
        await p.send("queue://SLOW.A", f"{i}")
        await p.send("queue://FAST", f"{i}")
    slow = await p.consumer("queue://SLOW.A", ack_mode="individual")
    fast = await p.consumer("queue://FAST", ack_mode="individual")
    await wait_until_async(lambda: (slow._inbox.qsize(), fast._inbox.qsize()) == (2, 5),
                           "two deliveries to the slow consumer, five to the fast one")
    assert slow.consumer.prefetch == 2 and fast.consumer.prefetch == 1000
    assert b.destination_stats()["queue://SLOW.A"]["dispatched"] == 2  # and no more


async def test_prefetch_zero_pulls_one_at_a_time(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    for i in range(3):
        await p.send("queue://PULL", f"{i}")
    c = await p.consumer("queue://PULL", prefetch=0, ack_mode="individual")
    assert b.destination_stats()["queue://PULL"]["dispatched"] == 0  # nothing is pushed
    assert c._inbox.qsize() == 0
    m = await c.receive(10)
    assert m.text == "0"
    assert c._inbox.qsize() == 0
    other = await (await connect(b)).consumer("queue://PULL", prefetch=10, ack_mode="individual")
    assert await before_marker(p, "queue://PULL", other, ack=True) == ["1", "2"]


@over("vm", "stomp")
async def test_cumulative_ack_acknowledges_earlier_deliveries(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    for i in range(5):
        await p.send("queue://CUM", f"{i}")
    c = await p.consumer("queue://CUM", ack_mode="client")
    msgs = [await c.receive(5) for _ in range(5)]
    assert [m.text for m in msgs] == ["0", "1", "2", "3", "4"]
    msgs[2].ack()  # acknowledges 0, 1, 2
    await c.close()
    again = await p.consumer("queue://CUM", ack_mode="individual")
    rest = [await again.receive(5) for _ in range(2)]
    assert [m.text for m in rest] == ["3", "4"]
    assert all(m.redelivered and m.delivery_count in (2, None) for m in rest)  # None: STOMP
    assert await before_marker(p, "queue://CUM", again, ack=True) == []


@over("vm", "stomp", "amqp")
async def test_unacked_messages_return_redelivered_when_connection_closes(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    for i in range(3):
        await p.send("queue://R", f"{i}")
    conn = await connect(b)
    c = await conn.consumer("queue://R", ack_mode="individual")
    got = [await c.receive(5) for _ in range(3)]
    assert [m.text for m in got] == ["0", "1", "2"]
    got[0].ack()
    await conn.close()
    c2 = await p.consumer("queue://R", ack_mode="individual")
    rest = [await c2.receive(5) for _ in range(2)]
    assert [(m.text, m.redelivered, m.delivery_count) for m in rest] in (
        [("1", True, 2), ("2", True, 2)], [("1", True, None), ("2", True, None)])  # None: STOMP
    assert await before_marker(p, "queue://R", c2, ack=True) == []


@over("vm", "amqp")
async def test_release_returns_without_counting(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    await p.send("queue://REL", "x", persistent=True)
    c = await p.consumer("queue://REL", ack_mode="individual")
    for _ in range(10):  # never dead-lettered, however often released
        m = await c.receive(5)
        assert m.delivery_count == 1 and not m.redelivered
        m.release()
    assert b.queue_size("REL") == 1
    assert b.queue_size("ActiveMQ.DLQ") == 0


@over("vm", "amqp")  # STOMP properties are strings: `n > 1` never matches there
async def test_selector_consumer_leaves_the_rest_for_others(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    for i in range(6):
        await p.send("queue://SEL", f"{i}", properties={"n": i, "color": "red" if i % 2 else "blue"})
    red = await p.consumer("queue://SEL", selector="color = 'red' AND n > 1", ack_mode="individual")
    got = [await red.receive(5) for _ in range(2)]
    assert [m.text for m in got] == ["3", "5"]
    for m in got:
        m.ack()
    other = await p.consumer("queue://SEL", ack_mode="individual")
    assert [(await other.receive(5)).text for _ in range(4)] == ["0", "1", "2", "4"]
    # two consumers, so the path orders nothing: the counters say each went out once
    stats = b.destination_stats()["queue://SEL"]
    assert (stats["dispatched"], stats["in_flight"]) == (6, 4)  # the four are not acked yet


async def test_invalid_selector_rejected_at_consumer_creation(make_broker, connect):
    import pytest
    from relaymq.selector import InvalidSelector

    b = await make_broker()
    p = await connect(b)
    with pytest.raises(InvalidSelector):
        await p.consumer("queue://X", selector="color = ")
    await p.send("queue://X", "still works")
    c = await p.consumer("queue://X")
    assert (await c.receive(10)).text == "still works"


async def test_temporary_queue_deleted_with_its_connection(make_broker, connect):
    import pytest
    from relaymq.errors import DestinationError

    b = await make_broker()
    owner = await connect(b)
    tmp = owner.temporary_queue()
    other = await connect(b)
    await other.send(tmp, "reply")
    c = await owner.consumer(tmp)
    assert (await c.receive(10)).text == "reply"
    await owner.close()
    assert tmp not in b.region.queues
    with pytest.raises(DestinationError):
        await other.consumer(tmp)


@over("vm", "stomp", "amqp")
async def test_counters(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    for i in range(4):
        await p.send("queue://CNT", f"{i}")
    c = await p.consumer("queue://CNT", ack_mode="individual")
    msgs = [await c.receive(5) for _ in range(4)]
    msgs[0].ack()
    await wait_until_async(lambda: b.destination_stats()["queue://CNT"]["dequeued"] == 1,
                           "the ack counted")
    s = b.destination_stats()["queue://CNT"]
    assert s["enqueued"] == 4 and s["dequeued"] == 1 and s["dispatched"] == 4
    assert s["in_flight"] == 3 and s["pending"] == 3 and s["consumers"] == 1
    assert s["memory_used"] > 0


async def test_producer_counter(make_broker, connect):
    from relaymq.model.destination import Destination

    b = await make_broker()
    conn = await connect(b)
    await conn.kernel.add_producer(Destination.queue("P"))
    await conn.kernel.add_producer(Destination.topic("T"))
    stats = b.destination_stats()
    assert stats["queue://P"]["producers"] == 1 and stats["topic://T"]["producers"] == 1
    await conn.close()
    stats = b.destination_stats()
    assert stats["queue://P"]["producers"] == 0 and stats["topic://T"]["producers"] == 0


async def test_sequence_numbers_continue_after_a_queue_is_recreated(make_broker, connect):
    from relaymq.model.destination import Destination

    b = await make_broker()
    p = await connect(b)
    for _ in range(3):
        await p.send("queue://SEQ", "x", persistent=True)
    last = b.region.queues[Destination.queue("SEQ")].last_seq
    assert await b.delete_destination(Destination.queue("SEQ"))
    await p.send("queue://SEQ", "again", persistent=True)
    assert b.region.queues[Destination.queue("SEQ")].last_seq > last


async def test_a_consumer_on_a_wildcard_or_composite_queue_is_refused_clearly(make_broker, connect):
    import pytest
    from relaymq.errors import DestinationError

    b = await make_broker()
    c = await connect(b)
    await c.send("queue://orders.eu", "kept")
    for name, shape in (("queue://orders.>", "a wildcard"),
                        ("queue://orders.eu,queue://orders.us", "a composite")):
        with pytest.raises(DestinationError, match=f"is {shape}.*subscribe to each queue"):
            await c.consumer(name)
    assert sorted(q.key for q in b.region.queues.values()) == ["queue://orders.eu"]
    got = await c.consumer("queue://orders.eu")
    assert (await got.receive(1)).text == "kept"
