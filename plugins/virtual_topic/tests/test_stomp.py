"""End to end through a real STOMP client (stomp.py) and relaymq-stomp.

The broker runs on its own event loop in a background thread, because stomp.py
is a blocking client with its own receiver thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from relaymq.config.loader import load_config_text
from relaymq.testing.stomp_collector import Collector
from relaymq.testing.threads import BrokerThread

stomp = pytest.importorskip("stomp")
pytest.importorskip("relaymq_stomp")

XML = """<broker xmlns="http://activemq.apache.org/schema/core" persistent="false">
  <transportConnectors><transportConnector uri="stomp://127.0.0.1:0"/></transportConnectors>
  {body}
</broker>"""


def broker_thread(body: str = "") -> BrokerThread:
    """A started broker with a STOMP connector and `body` in its <broker>."""
    return BrokerThread(load_config_text(XML.format(body=body), filename="activemq.xml",
                                         strict=True))


@pytest.fixture
def server() -> Iterator[BrokerThread]:
    bt = broker_thread()  # no <destinationInterceptors>: the VirtualTopic.> default
    yield bt
    bt.stop()


def client(bt: BrokerThread) -> tuple[Any, Collector]:
    conn = stomp.Connection12([bt.address("stomp")], heartbeats=(0, 0), reconnect_attempts_max=1)
    inbox = Collector()
    conn.set_listener("inbox", inbox)
    conn.connect(wait=True)
    return conn, inbox


def subscribed(conn: Any, destination: str, sid: str, **headers: str) -> None:
    """Subscribe and wait for the receipt, so the consumer queue exists before sends."""
    receipt = f"r-{sid}"
    done = threading.Event()

    class Receipt(stomp.ConnectionListener):
        def on_receipt(self, frame: Any) -> None:
            if frame.headers.get("receipt-id") == receipt:
                done.set()

    conn.set_listener(receipt, Receipt())
    conn.subscribe(destination, sid, ack="auto", headers={**headers, "receipt": receipt})
    assert done.wait(5), f"no receipt for SUBSCRIBE {destination}"
    conn.remove_listener(receipt)


def test_virtual_topic_through_stomp(server):
    group_a, inbox_a = client(server)
    group_b, inbox_b = client(server)
    watcher, inbox_t = client(server)
    producer, _ = client(server)
    try:
        subscribed(group_a, "/queue/Consumer.A.VirtualTopic.Orders", "a")
        subscribed(group_b, "/queue/Consumer.B.VirtualTopic.Orders", "b")
        subscribed(watcher, "/topic/VirtualTopic.Orders", "t")
        for i in range(3):
            producer.send("/topic/VirtualTopic.Orders", f"order-{i}", headers={"region": "eu"})
        for inbox, destination in ((inbox_a, "/queue/Consumer.A.VirtualTopic.Orders"),
                                   (inbox_b, "/queue/Consumer.B.VirtualTopic.Orders")):
            frames = inbox.wait_messages(3)
            assert [f.body for f in frames] == ["order-0", "order-1", "order-2"]
            assert {f.headers["destination"] for f in frames} == {destination}
            assert {f.headers["original-destination"] for f in frames} == {
                "/topic/VirtualTopic.Orders"}
            assert {f.headers["region"] for f in frames} == {"eu"}
        topic_frames = inbox_t.wait_messages(3)
        assert [f.body for f in topic_frames] == ["order-0", "order-1", "order-2"]
        assert "original-destination" not in topic_frames[0].headers
    finally:
        for c in (group_a, group_b, watcher, producer):
            c.disconnect()


def test_filtered_composite_through_stomp():
    bt = broker_thread(
        "<destinationInterceptors><virtualDestinationInterceptor><virtualDestinations>"
        '<compositeQueue name="ORDERS"><forwardTo>'
        "<filteredDestination selector=\"region = 'eu'\" queue=\"ORDERS.EU\"/>"
        '<queue physicalName="ORDERS.ALL"/>'
        "</forwardTo></compositeQueue>"
        "</virtualDestinations></virtualDestinationInterceptor></destinationInterceptors>")
    eu, inbox_eu = client(bt)
    everything, inbox_all = client(bt)
    try:
        subscribed(eu, "/queue/ORDERS.EU", "eu")
        subscribed(everything, "/queue/ORDERS.ALL", "all")
        eu.send("/queue/ORDERS", "to eu", headers={"region": "eu"})
        eu.send("/queue/ORDERS", "to us", headers={"region": "us"})
        assert [f.body for f in inbox_all.wait_messages(2)] == ["to eu", "to us"]
        assert [f.body for f in inbox_eu.wait_messages(1)] == ["to eu"]
        assert inbox_eu.messages[0].headers["original-destination"] == "/queue/ORDERS"
    finally:
        eu.disconnect()
        everything.disconnect()
        bt.stop()
