"""Priority, message groups, exclusive consumers, browsing, scheduled delivery
(the first three over STOMP and AMQP too, where the client can say them)."""

from __future__ import annotations

import time

from relaymq.config.model import BrokerConfig
from relaymq.model.destination import Destination
from relaymq.testing import wait_until_async
from relaymq.testing.barriers import before_marker

from .conftest import over, policy


async def texts(consumer, n: int) -> list[str]:  # type: ignore[no-untyped-def]
    """The next `n` message bodies; AssertionError when fewer come."""
    out = []
    for _ in range(n):
        m = await consumer.receive(10)
        assert m is not None, f"only {out} of {n} messages came"
        out.append(m.text)
    return out


@over("vm", "stomp", "amqp")
async def test_priority_order_when_prioritized(make_broker, connect):
    cfg = BrokerConfig(persistent=False, policy_entries=[policy(queue="PRIO", prioritized_messages=True)])
    b = await make_broker(cfg)
    p = await connect(b)
    for i, prio in enumerate([1, 9, 4, 9, 0, 5]):
        await p.send("queue://PRIO", f"{i}", priority=prio)
        await p.send("queue://PLAIN", f"{i}", priority=prio)
    c = await p.consumer("queue://PRIO")
    assert await texts(c, 6) == ["1", "3", "5", "2", "0", "4"]
    plain = await p.consumer("queue://PLAIN")
    assert await texts(plain, 6) == ["0", "1", "2", "3", "4", "5"]
    # a priority-0 marker queues behind anything left, whatever its priority
    assert await before_marker(p, "queue://PRIO", c, priority=0) == []
    assert await before_marker(p, "queue://PLAIN", plain, priority=0) == []


def in_flight(b, key: str) -> list[int]:  # type: ignore[no-untyped-def]
    """What each consumer of `key` holds unacknowledged, smallest first."""
    return sorted(i.in_flight for i in b.management.consumers(key))


def _group(m) -> str:  # type: ignore[no-untyped-def]
    """The group a test message was sent in, from its body."""
    return m.text.removeprefix("after-") if m.text.startswith("after-") else "ABC"[int(m.text) % 3]


@over("vm", "stomp", "amqp")
async def test_message_groups_stick_to_one_consumer_and_move_when_it_leaves(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    c1conn = await connect(b)
    c1 = await c1conn.consumer("queue://G", ack_mode="individual")
    c2 = await (await connect(b)).consumer("queue://G", ack_mode="individual")
    for i in range(12):
        await p.send("queue://G", f"{i}", group_id="ABC"[i % 3])
    got1: list = []
    got2: list = []
    deadline = time.monotonic() + 20
    while len(got1) + len(got2) < 12:
        if time.monotonic() >= deadline:  # a bounded wait, not a timing check
            raise AssertionError(f"only {len(got1) + len(got2)} of 12 messages came")
        m1 = await c1.receive(0.01)
        m2 = await c2.receive(0.01)
        got1 += [m1] if m1 else []
        got2 += [m2] if m2 else []
    groups1 = {_group(m) for m in got1}
    groups2 = {_group(m) for m in got2}
    assert groups1 and groups2 and not groups1 & groups2
    assert groups1 | groups2 == {"A", "B", "C"}
    for m in got1 + got2:
        m.ack()
    await c1conn.close()
    for g in sorted(groups1):
        await p.send("queue://G", f"after-{g}", group_id=g)
    moved = await texts(c2, len(groups1))
    assert {t.removeprefix("after-") for t in moved} == groups1
    assert await before_marker(p, "queue://G", c2, ack=True) == []


async def test_group_closes_with_sequence_minus_one(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    c1 = await (await connect(b)).consumer("queue://GC", ack_mode="individual")
    await p.send("queue://GC", "a", group_id="G1", group_seq=1)
    await p.send("queue://GC", "end", group_id="G1", group_seq=-1)
    assert await before_marker(p, "queue://GC", c1) == ["a", "end"]
    assert "G1" not in b.region.queues[Destination.queue("GC")].groups


@over("vm", "stomp")  # AMQP clients have no exclusive-consumer option
async def test_exclusive_consumer_receives_and_standby_takes_over_in_order(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    conn1 = await connect(b)
    ex1 = await conn1.consumer("queue://EX", exclusive=True, ack_mode="individual")
    ex2 = await (await connect(b)).consumer("queue://EX", exclusive=True, ack_mode="individual")
    await (await connect(b)).consumer("queue://EX", ack_mode="individual")  # plain
    for i in range(5):
        await p.send("queue://EX", f"{i}")
    got = [await ex1.receive(10) for _ in range(5)]
    assert [m.text for m in got] == ["0", "1", "2", "3", "4"]  # all five: none went elsewhere
    # nor twice: the others hold nothing (what they got stays in flight: they do not ack)
    await wait_until_async(lambda: in_flight(b, "queue://EX") == [0, 0, 5], "five held by ex1")
    got[0].ack()
    await conn1.close()
    assert await texts(ex2, 4) == ["1", "2", "3", "4"]
    await p.send("queue://EX", "5")  # still ex2's: the plain consumer gets nothing
    assert await before_marker(p, "queue://EX", ex2, ack=True) == ["5"]
    await wait_until_async(lambda: in_flight(b, "queue://EX") == [0, 4],  # 1-4, never acked
                           "nothing held by the plain consumer")


async def test_browse_sees_messages_in_order_without_consuming(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    for i in range(5):
        await p.send("queue://BR", f"{i}", properties={"even": i % 2 == 0})
    seen = await p.browse("queue://BR")
    assert [m.text for m in seen] == ["0", "1", "2", "3", "4"]
    filtered = await p.browse("queue://BR", selector="even = TRUE")
    assert [m.text for m in filtered] == ["0", "2", "4"]
    assert b.queue_size("BR") == 5
    c = await p.consumer("queue://BR")
    assert await before_marker(p, "queue://BR", c) == ["0", "1", "2", "3", "4"]
    assert await p.browse("queue://BR") == []


async def test_scheduled_delivery_delay_and_repeat(make_broker, connect):
    b = await make_broker(scheduler_support=True)
    p = await connect(b)
    c = await p.consumer("queue://SCHED")
    await p.send("queue://SCHED", "later", scheduled_delay=150)
    await p.send("queue://SCHED", "now")
    assert (await c.receive(10)).text == "now"  # "later" waits its turn
    assert (await c.receive(10)).text == "later"
    await p.send("queue://SCHED", "tick", scheduled_delay=10, scheduled_period=20, scheduled_repeat=2)
    ticks = [await c.receive(10) for _ in range(3)]
    assert [m.text for m in ticks if m is not None] == ["tick", "tick", "tick"]
    assert len({m.message_id for m in ticks}) == 3
    # the job is done (no firing pending or running), so a fourth would be queued already
    await wait_until_async(lambda: b.scheduler.pending == 0 and not b.scheduler._tasks,
                           "the scheduled job to finish")
    assert await before_marker(p, "queue://SCHED", c) == []


async def test_scheduling_headers_ignored_without_scheduler_support(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    c = await p.consumer("queue://NOSCHED")
    await p.send("queue://NOSCHED", "x", scheduled_delay=10_000)
    assert (await c.receive(10)).text == "x"


async def test_cumulative_ack_refills_the_window_in_order_around_a_grouped_head(make_broker):
    """A cumulative ack frees its whole range before the queue dispatches again:
    the window refills in sequence order, and a message-group head in the backlog
    still goes to its group's path (the single-consumer shortcut stops at it)."""
    from relaymq.broker.security import ConnectRequest
    from relaymq.model.destination import Destination
    from relaymq.model.message import Message

    b = await make_broker()
    conn = await b.connect(ConnectRequest())
    dest = Destination.queue("CUM")
    got: list[tuple[int, str]] = []
    consumer = await conn.subscribe(
        dest, prefetch=2, on_message=lambda d: got.append((d.id, d.message.body.decode())))
    for i in range(7):
        await conn.send(Message(f"m{i}".encode(), destination=dest,
                                group_id="G" if i == 3 else None))
    assert [body for _, body in got] == ["m0", "m1"]
    consumer.ack_cumulative(got[1][0])
    assert [body for _, body in got] == ["m0", "m1", "m2", "m3"]
    consumer.ack_cumulative(got[3][0])
    consumer.ack_cumulative(got[5][0])
    assert [body for _, body in got] == [f"m{i}" for i in range(7)]
    q = b.region.queues[dest]
    assert q.stats.dequeued == 6 and q.stats.in_flight == 1 and len(q.pending) == 0


@over("vm")
async def test_higher_priority_consumers_are_served_first(make_broker, connect):
    """ActiveMQ's consumer priority: a lower priority consumer gets messages only
    while every higher one is full (federation's priority-adjustment relies on it)."""
    b = await make_broker()
    p = await connect(b)
    low = await (await connect(b)).consumer("queue://CP", priority=-1, prefetch=10,
                                            ack_mode="individual")
    high = await (await connect(b)).consumer("queue://CP", priority=4, prefetch=3,
                                             ack_mode="individual")
    for i in range(3):
        await p.send("queue://CP", f"{i}")
    held = await texts(high, 3)
    assert held == ["0", "1", "2"]
    # the higher one had room for all three: nothing went to the lower one
    assert [i.in_flight for i in b.management.consumers("queue://CP") if i.priority == -1] == [0]
    for i in range(3, 5):
        await p.send("queue://CP", f"{i}")
    assert await texts(low, 2) == ["3", "4"]  # the higher one is full (3 unacknowledged)


async def test_ack_many_acknowledges_what_is_held_and_refills_the_window_once(make_broker):
    """`Consumer.ack_many` (a transport's individual acks of one read): the ids the
    consumer holds are acknowledged, ids it does not hold are skipped, and the
    window refills once, in sequence order. Nothing is being stored for
    non-persistent messages, so there is nothing to wait for."""
    from relaymq.broker.security import ConnectRequest
    from relaymq.model.destination import Destination
    from relaymq.model.message import Message

    b = await make_broker()
    conn = await b.connect(ConnectRequest())
    dest = Destination.queue("MANY")
    got: list[tuple[int, str]] = []
    consumer = await conn.subscribe(
        dest, prefetch=3, on_message=lambda d: got.append((d.id, d.message.body.decode())))
    for i in range(8):
        await conn.send(Message(f"m{i}".encode(), destination=dest))
    assert [body for _, body in got] == ["m0", "m1", "m2"]
    assert consumer.ack_many([got[0][0], got[2][0], 999]) is None
    assert [body for _, body in got] == ["m0", "m1", "m2", "m3", "m4"]
    q = b.region.queues[dest]
    assert q.stats.dequeued == 2 and b.queue_size("MANY") == 6
    assert sorted(consumer.inflight) == [got[1][0], got[3][0], got[4][0]]
    assert consumer.ack_many([got[0][0]]) is None  # already acknowledged: nothing happens
    assert q.stats.dequeued == 2
    consumer.ack_many([got[1][0], got[3][0], got[4][0]])
    assert [body for _, body in got][5:] == ["m5", "m6", "m7"]
    assert q.stats.dequeued == 5 and q.stats.in_flight == 3
