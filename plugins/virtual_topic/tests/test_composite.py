"""Composite queues and topics, forwardOnly, and filtered destinations."""

from __future__ import annotations

from relaymq.model.destination import Destination
from relaymq.testing.barriers import before_marker
from relaymq_virtual_topic import ORIGINAL_DESTINATION

MY_QUEUE = ('<compositeQueue name="MY.QUEUE"><forwardTo>'
            '<queue physicalName="FOO"/><topic physicalName="BAR"/>'
            "</forwardTo></compositeQueue>")


async def enqueued(broker, key: str) -> int:
    """What management counts as enqueued on `key`, read after a marker went through
    (0 for a topic that does not exist: one exists once something is published to it)."""
    found = [d.enqueued for d in await broker.management.destinations() if d.key == key]
    return found[0] if found else 0


async def test_composite_queue_forwards_to_every_target_and_keeps_nothing(start, connect, texts):
    broker = await start([MY_QUEUE])
    conn = await connect(broker)
    foo = await conn.consumer("queue://FOO")
    bar = await conn.consumer("topic://BAR")
    await conn.consumer("queue://MY.QUEUE")  # would receive anything kept there
    await conn.send("queue://MY.QUEUE", "m1")
    await conn.send("queue://MY.QUEUE", "m2")
    assert await before_marker(conn, "queue://MY.QUEUE", foo) == ["m1", "m2"]
    assert await before_marker(conn, "topic://BAR", bar) == ["m1", "m2"]
    # forwardOnly defaults to true: a logical name only (markers included)
    assert await enqueued(broker, "queue://MY.QUEUE") == 0
    assert broker.queue_size("MY.QUEUE") == 0


async def test_forwarded_copies_remember_the_composite(start, connect):
    broker = await start([MY_QUEUE])
    conn = await connect(broker)
    foo = await conn.consumer("queue://FOO")
    await conn.send("queue://MY.QUEUE", "m", properties={"k": "v"})
    m = await foo.receive(1)
    assert m.destination == Destination.queue("FOO")
    assert m.annotations[ORIGINAL_DESTINATION] == "queue://MY.QUEUE"
    assert m.properties == {"k": "v"}


async def test_forward_only_false_is_a_wire_tap(start, connect, texts):
    broker = await start(['<compositeQueue name="IncomingOrders" forwardOnly="false"><forwardTo>'
                          '<topic physicalName="Notifications"/></forwardTo></compositeQueue>'])
    conn = await connect(broker)
    notifications = await conn.consumer("topic://Notifications")
    await conn.send("queue://IncomingOrders", "order 1")  # nobody consumes yet: it waits
    incoming = await conn.consumer("queue://IncomingOrders")
    await conn.send("queue://IncomingOrders", "order 2")
    assert await texts(incoming) == ["order 1", "order 2"]
    assert await texts(notifications) == ["order 1", "order 2"]


async def test_composite_topic_forward_only_true(start, connect, texts):
    broker = await start(['<compositeTopic name="ALERTS"><forwardTo>'
                          '<queue physicalName="ALERTS.LOG"/></forwardTo></compositeTopic>'])
    conn = await connect(broker)
    await conn.consumer("topic://ALERTS")  # would receive anything published there
    log = await conn.consumer("queue://ALERTS.LOG")
    await conn.send("topic://ALERTS", "a")
    # the marker takes the path "a" took; the topic itself publishes nothing
    assert await before_marker(conn, "topic://ALERTS", log) == ["a"]
    assert await enqueued(broker, "topic://ALERTS") == 0


async def test_composite_topic_forward_only_false_keeps_publishing(start, connect, texts):
    broker = await start(['<compositeTopic name="ALERTS" forwardOnly="false"><forwardTo>'
                          '<queue physicalName="ALERTS.LOG"/></forwardTo></compositeTopic>'])
    conn = await connect(broker)
    s1 = await conn.consumer("topic://ALERTS")
    s2 = await conn.consumer("topic://ALERTS")
    log = await conn.consumer("queue://ALERTS.LOG")
    await conn.send("topic://ALERTS", "a")
    assert await texts(s1) == ["a"]
    assert await texts(s2) == ["a"]
    assert await texts(log) == ["a"]


async def test_composite_queue_and_topic_only_match_their_own_kind(start, connect, texts):
    broker = await start([MY_QUEUE])
    conn = await connect(broker)
    foo = await conn.consumer("queue://FOO")
    topic = await conn.consumer("topic://MY.QUEUE")
    await conn.send("topic://MY.QUEUE", "to the topic of that name")
    assert await texts(topic) == ["to the topic of that name"]
    assert await before_marker(conn, "queue://FOO", foo) == []


# -- filtered destinations ------------------------------------------------------------------

FILTERED = ('<compositeQueue name="MY.QUEUE"><forwardTo>'
            "<filteredDestination selector=\"odd = 'yes'\" queue=\"FOO\"/>"
            '<filteredDestination selector="i = 5" topic="BAR"/>'
            "</forwardTo></compositeQueue>")


async def test_filtered_destinations_with_string_and_typed_properties(start, connect, texts):
    broker = await start([FILTERED])
    conn = await connect(broker)
    foo = await conn.consumer("queue://FOO")
    bar = await conn.consumer("topic://BAR")
    await conn.send("queue://MY.QUEUE", "odd-string", properties={"odd": "yes"})
    await conn.send("queue://MY.QUEUE", "not-odd", properties={"odd": "no"})
    await conn.send("queue://MY.QUEUE", "int-5", properties={"i": 5})
    await conn.send("queue://MY.QUEUE", "float-5", properties={"i": 5.0})
    await conn.send("queue://MY.QUEUE", "string-5", properties={"i": "5"})  # a string is not 5
    await conn.send("queue://MY.QUEUE", "int-6", properties={"i": 6})
    await conn.send("queue://MY.QUEUE", "both", properties={"odd": "yes", "i": 5})
    await conn.send("queue://MY.QUEUE", "neither")
    assert await texts(foo) == ["odd-string", "both"]
    assert await texts(bar) == ["int-5", "float-5", "both"]
    assert broker.queue_size("MY.QUEUE") == 0


async def test_filtered_destination_with_boolean_and_range_selectors(start, connect, texts):
    broker = await start(['<compositeQueue name="ORDERS"><forwardTo>'
                          '<filteredDestination selector="express = TRUE" queue="ORDERS.EXPRESS"/>'
                          '<filteredDestination selector="total BETWEEN 100.0 AND 999.99" '
                          'queue="ORDERS.REVIEW"/>'
                          '<queue physicalName="ORDERS.ALL"/>'
                          "</forwardTo></compositeQueue>"])
    conn = await connect(broker)
    express = await conn.consumer("queue://ORDERS.EXPRESS")
    review = await conn.consumer("queue://ORDERS.REVIEW")
    everything = await conn.consumer("queue://ORDERS.ALL")
    await conn.send("queue://ORDERS", "small-express", properties={"express": True, "total": 9.5})
    await conn.send("queue://ORDERS", "big", properties={"express": False, "total": 250})
    await conn.send("queue://ORDERS", "huge", properties={"total": 5000.0})
    await conn.send("queue://ORDERS", "string-true", properties={"express": "true"})
    assert await texts(express) == ["small-express"]
    assert await texts(review) == ["big"]
    assert await texts(everything) == ["small-express", "big", "huge", "string-true"]


async def test_filtered_destinations_can_select_on_headers(start, connect, texts):
    broker = await start(['<compositeQueue name="IN"><forwardTo>'
                          "<filteredDestination selector=\"JMSType = 'invoice'\" queue=\"INVOICES\"/>"
                          "</forwardTo></compositeQueue>"])
    conn = await connect(broker)
    invoices = await conn.consumer("queue://INVOICES")
    await conn.send("queue://IN", "inv", type="invoice")
    await conn.send("queue://IN", "other", type="receipt")
    assert await texts(invoices) == ["inv"]


async def test_send_when_not_matched_keeps_unclaimed_messages(start, connect, texts):
    broker = await start(['<compositeQueue name="IN" sendWhenNotMatched="true"><forwardTo>'
                          "<filteredDestination selector=\"kind = 'a'\" queue=\"IN.A\"/>"
                          "</forwardTo></compositeQueue>"])
    conn = await connect(broker)
    a = await conn.consumer("queue://IN.A")
    rest = await conn.consumer("queue://IN")
    await conn.send("queue://IN", "a", properties={"kind": "a"})
    await conn.send("queue://IN", "b", properties={"kind": "b"})
    assert await texts(a) == ["a"]
    assert await texts(rest) == ["b"]


# -- composition ------------------------------------------------------------------------------


async def test_composite_forwarding_to_a_virtual_topic_fans_out(start, connect, texts):
    broker = await start(['<virtualTopic name="VirtualTopic.>" prefix="Consumer.*."/>',
                          '<compositeQueue name="ORDERS.IN"><forwardTo>'
                          '<topic physicalName="VirtualTopic.Orders"/></forwardTo></compositeQueue>'])
    conn = await connect(broker)
    a = await conn.consumer("queue://Consumer.A.VirtualTopic.Orders")
    b = await conn.consumer("queue://Consumer.B.VirtualTopic.Orders")
    await conn.send("queue://ORDERS.IN", "o")
    assert await texts(a) == ["o"]
    assert await texts(b) == ["o"]


async def test_composites_can_forward_through_other_composites(start, connect, texts):
    broker = await start(['<compositeQueue name="A"><forwardTo><queue physicalName="B"/>'
                          '</forwardTo></compositeQueue>',
                          '<compositeQueue name="B"><forwardTo><queue physicalName="C"/>'
                          '<queue physicalName="D"/></forwardTo></compositeQueue>'])
    conn = await connect(broker)
    await conn.consumer("queue://B")  # would receive anything kept in B
    c = await conn.consumer("queue://C")
    d = await conn.consumer("queue://D")
    await conn.send("queue://A", "x")
    assert await before_marker(conn, "queue://A", c) == ["x"]  # through B to C and D
    assert await before_marker(conn, "queue://A", d) == ["x"]  # (the first marker skipped)
    assert await enqueued(broker, "queue://B") == 0


async def test_wildcard_composite_names(start, connect, texts):
    broker = await start(['<compositeQueue name="IN.>"><forwardTo><queue physicalName="AUDIT"/>'
                          '</forwardTo></compositeQueue>'])
    conn = await connect(broker)
    audit = await conn.consumer("queue://AUDIT")
    await conn.send("queue://IN.EU", "eu")
    await conn.send("queue://IN.US.EAST", "us")
    await conn.send("queue://OUT.EU", "not audited")
    assert await texts(audit) == ["eu", "us"]


async def test_concurrent_send_composite(start, connect, texts):
    broker = await start(['<compositeQueue name="IN" concurrentSend="true"><forwardTo>'
                          + "".join(f'<queue physicalName="OUT.{i}"/>' for i in range(4))
                          + "</forwardTo></compositeQueue>"])
    conn = await connect(broker)
    outs = [await conn.consumer(f"queue://OUT.{i}") for i in range(4)]
    for n in range(5):
        await conn.send("queue://IN", str(n))
    for out in outs:
        assert await texts(out) == ["0", "1", "2", "3", "4"]


async def test_composite_send_in_a_transaction(start, connect, texts):
    broker = await start([MY_QUEUE])
    conn = await connect(broker)
    foo = await conn.consumer("queue://FOO")
    conn.begin()
    await conn.send("queue://MY.QUEUE", "rolled back")
    conn.rollback()
    async with conn.transaction():
        await conn.send("queue://MY.QUEUE", "committed")
    assert await texts(foo) == ["committed"]
