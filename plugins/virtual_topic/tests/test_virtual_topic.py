"""Virtual topics: fan-out to consumer queues, the documented default, names and prefixes."""

from __future__ import annotations

import time
from typing import Any

import pytest
from relaymq.model.destination import Destination
from relaymq.testing.barriers import before_marker
from relaymq.testing.waits import DEFAULT_TIMEOUT
from relaymq_virtual_topic import ORIGINAL_DESTINATION

ORDERS = "topic://VirtualTopic.Orders"
GROUP_A = "queue://Consumer.A.VirtualTopic.Orders"
GROUP_B = "queue://Consumer.B.VirtualTopic.Orders"
OVER_ALL = pytest.mark.transports("vm", "stomp", "amqp")


# -- the documented default ---------------------------------------------------------------


@OVER_ALL
async def test_default_fans_out_once_per_consumer_queue(start, connect, texts):
    broker = await start()  # no <destinationInterceptors>: VirtualTopic.> is virtual
    conn = await connect(broker)
    a = await conn.consumer(GROUP_A)
    b = await conn.consumer(GROUP_B)
    plain = await conn.consumer(ORDERS)
    for i in range(3):
        await conn.send(ORDERS, f"order-{i}")
    expected = ["order-0", "order-1", "order-2"]
    assert await texts(a) == expected
    assert await texts(b) == expected
    assert await texts(plain) == expected  # plain topic subscribers still receive


@OVER_ALL
async def receive_from_both(c1: Any, c2: Any, count: int) -> tuple[list[str], list[str]]:
    """What `c1` and `c2` receive until `count` came in all (AssertionError after
    the default bound)."""
    got: tuple[list[str], list[str]] = ([], [])
    deadline = time.monotonic() + DEFAULT_TIMEOUT
    while len(got[0]) + len(got[1]) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"only {got} of {count} messages within {DEFAULT_TIMEOUT:g} s")
        for consumer, into in ((c1, got[0]), (c2, got[1])):
            m = await consumer.receive(0.05)
            if m is not None:
                into.append(m.text)
    return got


async def test_consumers_of_one_group_share_its_messages(start, connect, texts):
    broker = await start()
    conn = await connect(broker)
    a1 = await conn.consumer(GROUP_A)
    a2 = await conn.consumer(GROUP_A)
    b = await conn.consumer(GROUP_B)
    for i in range(4):
        await conn.send(ORDERS, f"o{i}")
    # a marker on the shared queue would reach one of the two: wait for the four,
    # then the queue's counters say nothing more was put on it or handed out
    got1, got2 = await receive_from_both(a1, a2, 4)
    assert sorted(got1 + got2) == ["o0", "o1", "o2", "o3"]  # each message once per group
    assert got1 and got2  # load-balanced between the group's consumers
    stats = broker.destination_stats()[GROUP_A]
    assert (stats["enqueued"], stats["dispatched"]) == (4, 4)
    assert await texts(b) == ["o0", "o1", "o2", "o3"]


async def test_copies_are_addressed_to_the_consumer_queue_and_remember_the_topic(
        start, connect):
    broker = await start()
    conn = await connect(broker)
    a = await conn.consumer(GROUP_A)
    plain = await conn.consumer(ORDERS)
    await conn.send(ORDERS, "x", properties={"k": 1})
    copy = await a.receive(1)
    assert copy.destination == Destination.parse(GROUP_A)
    assert copy.annotations[ORIGINAL_DESTINATION] == ORDERS
    assert copy.properties == {"k": 1}
    original = await plain.receive(1)
    assert original.destination == Destination.parse(ORDERS)
    assert not (original.annotations or {}).get(ORIGINAL_DESTINATION)


@OVER_ALL
async def test_consumer_queues_buffer_while_their_consumers_are_away(start, connect, texts):
    broker = await start()
    conn = await connect(broker)
    a = await conn.consumer(GROUP_A)
    await conn.send(ORDERS, "first")
    assert await texts(a) == ["first"]
    await a.close()
    await conn.send(ORDERS, "while-away-1")
    await conn.send(ORDERS, "while-away-2")
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 2
    back = await conn.consumer(GROUP_A)
    assert await texts(back) == ["while-away-1", "while-away-2"]


@OVER_ALL
async def test_a_group_that_appears_later_gets_only_later_messages(start, connect, texts):
    broker = await start()
    conn = await connect(broker)
    a = await conn.consumer(GROUP_A)
    await conn.send(ORDERS, "before-B")
    b = await conn.consumer(GROUP_B)
    await conn.send(ORDERS, "after-B")
    assert await texts(a) == ["before-B", "after-B"]
    assert await texts(b) == ["after-B"]


@OVER_ALL
async def test_default_ignores_other_topics_and_other_queue_names(start, connect, texts):
    broker = await start()
    conn = await connect(broker)
    other = await conn.consumer("queue://Consumer.A.Orders")
    not_virtual = await conn.consumer("queue://Consumer.A.Plain.Orders")
    await conn.send("topic://Orders", "plain topic")
    await conn.send("topic://Plain.Orders", "plain topic 2")
    assert await before_marker(conn, "queue://Consumer.A.Orders", other) == []
    assert await before_marker(conn, "queue://Consumer.A.Plain.Orders", not_virtual) == []


@OVER_ALL
async def test_other_queue_shapes_do_not_match_the_prefix(start, connect, texts):
    broker = await start()
    conn = await connect(broker)
    deeper = await conn.consumer("queue://Consumer.A.B.VirtualTopic.Orders")  # '*' is one segment
    prefix_only = await conn.consumer("queue://Consumer.VirtualTopic.Orders")
    right = await conn.consumer(GROUP_A)
    await conn.send(ORDERS, "x")
    assert await before_marker(conn, "queue://Consumer.A.B.VirtualTopic.Orders", deeper) == []
    assert await before_marker(conn, "queue://Consumer.VirtualTopic.Orders", prefix_only) == []
    assert await before_marker(conn, GROUP_A, right) == ["x"]


@OVER_ALL
async def test_an_empty_interceptor_turns_the_default_off(start, connect, texts):
    broker = await start(body="<destinationInterceptors><virtualDestinationInterceptor/>"
                              "</destinationInterceptors>")
    conn = await connect(broker)
    a = await conn.consumer(GROUP_A)
    plain = await conn.consumer(ORDERS)
    await conn.send(ORDERS, "x")
    assert await before_marker(conn, GROUP_A, a) == []
    assert await before_marker(conn, ORDERS, plain) == ["x"]


@OVER_ALL
async def test_configured_interceptors_replace_the_default(start, connect, texts):
    # As in ActiveMQ: once <destinationInterceptors> configures anything, only that applies.
    broker = await start(entries=['<compositeQueue name="IN"><forwardTo>'
                                  '<queue physicalName="OUT"/></forwardTo></compositeQueue>'])
    conn = await connect(broker)
    a = await conn.consumer(GROUP_A)
    await conn.send(ORDERS, "x")
    assert await before_marker(conn, GROUP_A, a) == []


# -- configured names, prefixes and postfixes ---------------------------------------------------


@OVER_ALL
async def test_all_topics_virtual_with_a_custom_prefix(start, connect, texts):
    broker = await start(entries=['<virtualTopic name=">" prefix="VirtualTopicConsumers.*." '
                                  'selectorAware="false"/>'])
    conn = await connect(broker)
    a = await conn.consumer("queue://VirtualTopicConsumers.A.Sales.EU")
    b = await conn.consumer("queue://VirtualTopicConsumers.B.Sales.EU")
    old_style = await conn.consumer("queue://Consumer.A.VirtualTopic.Sales")
    await conn.send("topic://Sales.EU", "sale")
    await conn.send("topic://VirtualTopic.Sales", "old")
    assert await texts(a) == ["sale"]
    assert await texts(b) == ["sale"]
    # the configured prefix replaces the default
    assert await before_marker(conn, "queue://Consumer.A.VirtualTopic.Sales", old_style) == []


@OVER_ALL
async def test_name_wildcards_pick_the_virtual_topics(start, connect, texts):
    broker = await start(entries=['<virtualTopic name="Events.*.Created"/>'])
    conn = await connect(broker)
    created = await conn.consumer("queue://Consumer.X.Events.Order.Created")
    deleted = await conn.consumer("queue://Consumer.X.Events.Order.Deleted")
    await conn.send("topic://Events.Order.Created", "c")
    await conn.send("topic://Events.Order.Deleted", "d")
    assert await texts(created) == ["c"]
    assert await before_marker(conn, "queue://Consumer.X.Events.Order.Deleted", deleted) == []


@OVER_ALL
async def test_postfix(start, connect, texts):
    broker = await start(entries=['<virtualTopic name="Prices.>" prefix="" postfix=".*"/>'])
    conn = await connect(broker)
    a = await conn.consumer("queue://Prices.EUR.app1")
    b = await conn.consumer("queue://Prices.EUR.app2")
    await conn.send("topic://Prices.EUR", "1.08")
    assert await texts(a) == ["1.08"]
    assert await texts(b) == ["1.08"]


@OVER_ALL
async def test_overlapping_entries_send_one_copy_per_queue(start, connect, texts):
    broker = await start(entries=['<virtualTopic name="VirtualTopic.>"/>',
                                  '<virtualTopic name=">"/>'])
    conn = await connect(broker)
    a = await conn.consumer(GROUP_A)
    await conn.send(ORDERS, "once")
    assert await texts(a) == ["once"]


async def test_client_side_composite_destinations_are_split(start, connect, texts):
    broker = await start()
    conn = await connect(broker)
    orders = await conn.consumer(GROUP_A)
    refunds = await conn.consumer("queue://Consumer.A.VirtualTopic.Refunds")
    await conn.send("topic://VirtualTopic.Orders,topic://VirtualTopic.Refunds", "both")
    assert await texts(orders) == ["both"]
    assert await texts(refunds) == ["both"]


@OVER_ALL
async def test_queue_sends_are_not_fanned_out(start, connect, texts):
    broker = await start()
    conn = await connect(broker)
    a = await conn.consumer(GROUP_A)
    q = await conn.consumer("queue://VirtualTopic.Orders")
    await conn.send("queue://VirtualTopic.Orders", "to a queue")
    assert await before_marker(conn, "queue://VirtualTopic.Orders", q) == ["to a queue"]
    assert await before_marker(conn, GROUP_A, a) == []


async def test_temporary_topics_are_never_virtual(start, connect, texts):
    broker = await start(entries=['<virtualTopic name=">"/>'])
    conn = await connect(broker)
    temp = conn.temporary_topic()
    sub = await conn.consumer(temp)
    await conn.send(temp, "t")
    assert await texts(sub) == ["t"]


async def test_durable_messages_fan_out_as_durable_copies(start, connect):
    broker = await start()
    conn = await connect(broker)
    a = await conn.consumer(GROUP_A)
    await conn.send(ORDERS, "d", persistent=True, priority=7)
    m = await a.receive(1)
    assert m.durable and m.priority == 7


async def test_yaml_configuration(connect, texts):
    from relaymq.broker.broker import Broker
    from relaymq.config.loader import load_config_text

    config = load_config_text("""
broker:
  persistent: false
  destinationInterceptors:
    - virtualDestinationInterceptor:
        virtualDestinations:
          - virtualTopic: {name: ">", prefix: VirtualTopicConsumers.*., selectorAware: true}
          - compositeQueue:
              name: MY.QUEUE
              forwardTo:
                - queue: {physicalName: FOO}
                - filteredDestination: {selector: "odd = 'yes'", topic: BAR}
""", "yaml", strict=True)
    broker = Broker(config, strict=True)
    await broker.start()
    try:
        conn = await connect(broker)
        vt = await conn.consumer("queue://VirtualTopicConsumers.X.Prices", selector="p > 1")
        foo = await conn.consumer("queue://FOO")
        bar = await conn.consumer("topic://BAR")
        await conn.send("topic://Prices", "2", properties={"p": 2})
        await conn.send("topic://Prices", "0", properties={"p": 0})
        await conn.send("queue://MY.QUEUE", "odd", properties={"odd": "yes"})
        assert await texts(vt, properties={"p": 2}) == ["2"]
        assert await texts(foo) == ["odd"]
        assert await texts(bar) == ["odd"]
    finally:
        await broker.stop()


async def test_consumer_queues_keep_durable_copies_across_a_restart(tmp_path, connect, texts):
    pytest.importorskip("relaymq_kahadb")
    from relaymq.broker.broker import Broker
    from relaymq.config.loader import load_config_text

    xml = (f'<broker xmlns="http://activemq.apache.org/schema/core"><persistenceAdapter>'
           f'<kahaDB directory="{tmp_path}/kahadb"/></persistenceAdapter></broker>')
    first = Broker(load_config_text(xml, strict=True), strict=True)
    await first.start()
    conn = await connect(first)
    await (await conn.consumer(GROUP_A)).close()  # group A exists, then goes away
    await conn.send(ORDERS, "kept", persistent=True)
    await conn.send(ORDERS, "not kept", persistent=False)
    await first.stop()

    second = Broker(load_config_text(xml, strict=True), strict=True)
    await second.start()
    try:
        conn = await connect(second)
        await conn.send(ORDERS, "after restart", persistent=True)  # the queue was recovered
        assert await texts(await conn.consumer(GROUP_A)) == ["kept", "after restart"]
    finally:
        await second.stop()


async def test_advisory_topics_are_never_virtual(start, connect, texts):
    broker = await start(entries=['<virtualTopic name=">" prefix="C.*."/>'])
    conn = await connect(broker)
    q = await conn.consumer("queue://C.X.ActiveMQ.Advisory.Queue")
    await conn.send("topic://ActiveMQ.Advisory.Queue", "advisory")
    assert await before_marker(conn, "queue://C.X.ActiveMQ.Advisory.Queue", q) == []
