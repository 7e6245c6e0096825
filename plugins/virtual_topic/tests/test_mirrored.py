"""<mirroredQueue>: queues also publish to VirtualTopic.Mirror.<queue>."""

from __future__ import annotations

import logging

from relaymq.testing.barriers import before_marker


async def test_queue_traffic_is_mirrored_to_a_topic(start, connect, texts):
    broker = await start(body="<destinationInterceptors><mirroredQueue/></destinationInterceptors>")
    conn = await connect(broker)
    watcher = await conn.consumer("topic://VirtualTopic.Mirror.ORDERS")
    orders = await conn.consumer("queue://ORDERS")
    await conn.send("queue://ORDERS", "o1")
    await conn.send("topic://NOT.A.QUEUE", "t")
    assert await texts(orders) == ["o1"]
    assert await texts(watcher) == ["o1"]


async def test_prefix_and_postfix(start, connect, texts):
    broker = await start(body='<destinationInterceptors><mirroredQueue prefix="Watch." '
                              'postfix=".Copy"/></destinationInterceptors>')
    conn = await connect(broker)
    watcher = await conn.consumer("topic://Watch.ORDERS.Copy")
    await conn.send("queue://ORDERS", "o1")
    assert await texts(watcher) == ["o1"]


async def test_mirror_topics_are_virtual_when_listed_first(start, connect, texts):
    broker = await start(body="<destinationInterceptors><mirroredQueue/>"
                              "<virtualDestinationInterceptor><virtualDestinations>"
                              '<virtualTopic name="VirtualTopic.>"/></virtualDestinations>'
                              "</virtualDestinationInterceptor></destinationInterceptors>")
    conn = await connect(broker)
    audit = await conn.consumer("queue://Consumer.Audit.VirtualTopic.Mirror.ORDERS")
    await conn.send("queue://ORDERS", "o1")
    assert await texts(audit) == ["o1"]
    assert broker.queue_size("ORDERS") == 1


async def test_the_other_order_is_warned_about(start, caplog):
    caplog.set_level(logging.WARNING)
    await start(body="<destinationInterceptors><virtualDestinationInterceptor>"
                     "<virtualDestinations><virtualTopic/></virtualDestinations>"
                     "</virtualDestinationInterceptor><mirroredQueue/></destinationInterceptors>")
    assert any("mirror topics" in r.getMessage() for r in caplog.records)


async def test_temporary_queues_are_not_mirrored(start, connect, texts):
    broker = await start(body="<destinationInterceptors><mirroredQueue prefix=\"M.\"/>"
                              "</destinationInterceptors>")
    conn = await connect(broker)
    everything = await conn.consumer("topic://M.>")
    temp = conn.temporary_queue()
    await conn.send(temp, "t")
    await conn.send("queue://A,queue://B", "ab")
    # a marker sent to queue A is mirrored to topic M.A behind everything routed before
    assert await before_marker(conn, "queue://A", everything) == ["ab", "ab"]
