"""<virtualTopic> options: selectorAware, local, concurrentSend, transactedSend,
dropOnResourceLimit, setOriginalDestination — each asserted per consumer queue."""

from __future__ import annotations

import pytest
from relaymq.broker.security import ConnectRequest
from relaymq.client import Connection
from relaymq.errors import ResourceLimitExceeded
from relaymq.model.destination import Destination
from relaymq.testing.barriers import before_marker
from relaymq_virtual_topic import ORIGINAL_DESTINATION, VirtualDestinationInterceptor

ORDERS = "topic://VirtualTopic.Orders"
A = "queue://Consumer.A.VirtualTopic.Orders"
B = "queue://Consumer.B.VirtualTopic.Orders"
C = "queue://Consumer.C.VirtualTopic.Orders"


def vt(**options: str) -> list[str]:
    attrs = " ".join(f'{k}="{v}"' for k, v in options.items())
    return [f'<virtualTopic name="VirtualTopic.>" prefix="Consumer.*." {attrs}/>']


def enqueued(broker, name: str) -> int:
    return broker.region.queues[Destination.parse(name)].stats.enqueued


# -- selectorAware ----------------------------------------------------------------------------


async def test_selector_aware_forwards_only_what_some_consumer_selects(start, connect, texts):
    broker = await start(vt(selectorAware="true"))
    conn = await connect(broker)
    red = await conn.consumer(A, selector="color = 'red'")
    everything = await conn.consumer(B)
    gone = await conn.consumer(C, selector="color = 'red'")
    await gone.close()  # C exists but has no consumer: nothing matches it
    await conn.send(ORDERS, "red", properties={"color": "red"})
    await conn.send(ORDERS, "blue", properties={"color": "blue"})
    assert await texts(red, properties={"color": "red"}) == ["red"]
    assert await texts(everything) == ["red", "blue"]
    assert enqueued(broker, A) == 2  # red and the marker: the blue one never reached queue A
    assert enqueued(broker, C) == 0
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 0


async def test_selector_aware_uses_the_union_of_a_queues_consumers(start, connect, texts):
    broker = await start(vt(selectorAware="true"))
    conn = await connect(broker)
    small = await conn.consumer(A, selector="qty < 10")
    big = await conn.consumer(A, selector="qty > 100")
    for qty in (5, 50, 500):
        await conn.send(ORDERS, str(qty), properties={"qty": qty})
    assert await texts(small, properties={"qty": 5}) == ["5"]
    assert await texts(big, properties={"qty": 500}) == ["500"]
    assert enqueued(broker, A) == 4  # 5, 500 and the two markers


async def test_without_selector_awareness_unmatched_messages_pile_up(start, connect, texts):
    broker = await start(vt(selectorAware="false"))
    conn = await connect(broker)
    red = await conn.consumer(A, selector="color = 'red'")
    await conn.send(ORDERS, "red", properties={"color": "red"})
    await conn.send(ORDERS, "blue", properties={"color": "blue"})
    assert await texts(red, properties={"color": "red"}) == ["red"]
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 1  # blue waits forever


async def test_selector_aware_can_select_on_headers(start, connect, texts):
    broker = await start(vt(selectorAware="true"))
    conn = await connect(broker)
    urgent = await conn.consumer(A, selector="JMSPriority > 6")
    await conn.send(ORDERS, "low", priority=1)
    await conn.send(ORDERS, "high", priority=9)
    assert await texts(urgent, priority=9) == ["high"]  # the marker: as urgent, behind it
    assert enqueued(broker, A) == 2  # high and the marker


# -- local ----------------------------------------------------------------------------------


async def network_connection(broker) -> Connection:
    """A connection as a broker connection (mirror, federation) opens it."""
    return Connection(await broker.connect(ConnectRequest(transport="amqp"), network=True))


async def test_local_does_not_fan_out_messages_from_broker_connections(start, connect, texts):
    broker = await start(vt(local="true"))
    conn = await connect(broker)
    a = await conn.consumer(A)
    plain = await conn.consumer(ORDERS)
    remote = await network_connection(broker)
    await remote.send(ORDERS, "from the network")
    await conn.send(ORDERS, "from a client")
    assert await texts(a) == ["from a client"]
    assert await texts(plain) == ["from the network", "from a client"]


async def test_without_local_network_messages_fan_out_too(start, connect, texts):
    broker = await start(vt(local="false"))
    conn = await connect(broker)
    a = await conn.consumer(A)
    remote = await network_connection(broker)
    await remote.send(ORDERS, "from the network")
    assert await texts(a) == ["from the network"]


# -- setOriginalDestination -------------------------------------------------------------------


async def test_set_original_destination_false_leaves_no_record(start, connect):
    broker = await start(vt(setOriginalDestination="false"))
    conn = await connect(broker)
    a = await conn.consumer(A)
    await conn.send(ORDERS, "x")
    m = await a.receive(1)
    assert m.destination == Destination.parse(A)  # routed by destination, as always
    assert ORIGINAL_DESTINATION not in (m.annotations or {})


async def test_set_original_destination_is_on_by_default(start, connect):
    broker = await start(vt())
    conn = await connect(broker)
    a = await conn.consumer(A)
    await conn.send(ORDERS, "x")
    m = await a.receive(1)
    assert m.annotations[ORIGINAL_DESTINATION] == ORDERS


# -- resource limits: transactedSend semantics and dropOnResourceLimit ---------------------------

#: Queue A holds at most one message in memory, and a full queue refuses sends.
LIMITS = ("<destinationPolicy><policyMap><policyEntries>"
          '<policyEntry queue="Consumer.A.>" memoryLimit="1"/>'
          "</policyEntries></policyMap></destinationPolicy>"
          '<systemUsage><systemUsage sendFailIfNoSpace="true"/></systemUsage>')


async def fill_queue_a(broker, conn) -> None:
    away = await conn.consumer(A)
    await away.close()  # A exists, nobody drains it
    await conn.send(ORDERS, "fills A")
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 1


@pytest.mark.parametrize("transacted", ["true", "false"])
async def test_fan_out_is_all_or_nothing_when_a_queue_is_full(start, connect, texts, transacted):
    broker = await start(vt(transactedSend=transacted), LIMITS)
    conn = await connect(broker)
    b = await conn.consumer(B)
    await fill_queue_a(broker, conn)
    assert await texts(b) == ["fills A"]
    with pytest.raises(ResourceLimitExceeded):
        await conn.send(ORDERS, "refused")
    # One atomic store batch per fan-out: B did not get the refused message either.
    assert await before_marker(conn, B, b) == []
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 1


async def test_drop_on_resource_limit_skips_the_full_queue(start, connect, texts):
    broker = await start(vt(dropOnResourceLimit="true"), LIMITS)
    conn = await connect(broker)
    b = await conn.consumer(B)
    plain = await conn.consumer(ORDERS)
    await fill_queue_a(broker, conn)
    await conn.send(ORDERS, "dropped for A")
    interceptor = next(s for s in broker.services if isinstance(s, VirtualDestinationInterceptor))
    assert interceptor.fanout.dropped == 1  # counted as the send was accepted
    assert await texts(b) == ["fills A", "dropped for A"]
    assert await texts(plain) == ["fills A", "dropped for A"]  # (its marker is dropped too)
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 1


# -- concurrentSend ---------------------------------------------------------------------------


async def test_concurrent_send_delivers_each_copy_once_in_order(start, connect, texts):
    broker = await start(vt(concurrentSend="true"))
    conn = await connect(broker)
    queues = [await conn.consumer(f"queue://Consumer.G{i}.VirtualTopic.Orders") for i in range(5)]
    for n in range(10):
        await conn.send(ORDERS, str(n))
    for q in queues:
        assert await texts(q) == [str(n) for n in range(10)]


async def test_concurrent_send_is_still_all_or_nothing(start, connect, texts):
    broker = await start(vt(concurrentSend="true"), LIMITS)
    conn = await connect(broker)
    b = await conn.consumer(B)
    c = await conn.consumer(C)
    await fill_queue_a(broker, conn)
    assert await before_marker(conn, B, b) == ["fills A"]
    assert await before_marker(conn, C, c) == ["fills A"]
    with pytest.raises(ResourceLimitExceeded):
        await conn.send(ORDERS, "refused")
    assert await before_marker(conn, B, b) == []
    assert await before_marker(conn, C, c) == []


async def test_concurrent_send_with_drop_on_resource_limit(start, connect, texts):
    broker = await start(vt(concurrentSend="true", dropOnResourceLimit="true"), LIMITS)
    conn = await connect(broker)
    b = await conn.consumer(B)
    await fill_queue_a(broker, conn)
    await conn.send(ORDERS, "second")
    assert await texts(b) == ["fills A", "second"]
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 1


# -- client transactions ----------------------------------------------------------------------


async def test_fan_out_commits_and_rolls_back_with_the_client_transaction(start, connect, texts):
    broker = await start(vt(transactedSend="true"))
    conn = await connect(broker)
    a = await conn.consumer(A)
    b = await conn.consumer(B)
    outside = await connect(broker)  # markers from outside the transaction
    conn.begin()
    await conn.send(ORDERS, "rolled back")
    conn.rollback()
    async with conn.transaction():
        await conn.send(ORDERS, "committed")
        assert await before_marker(outside, A, a) == []  # nothing visible before the commit
    assert await before_marker(conn, A, a) == ["committed"]
    assert await before_marker(conn, B, b) == ["committed"]
