"""Connections, consumers, producers, events, broker connections and destinations
through `broker.management`, with real STOMP and AMQP clients."""

from __future__ import annotations

from typing import Any

import pytest
from proton.utils import BlockingConnection
from relaymq.errors import DestinationError, PluginNotFound
from relaymq.testing.waits import wait_until

from .conftest import stomp_client


def test_listing_and_events_for_connections_consumers_and_producers(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    events: list[Any] = []
    stop = broker.call(lambda: m.listen(events.append))

    conn, _ = stomp_client(broker.stomp, headers={"client-id": "watcher"})
    conn.subscribe("/queue/ORDERS", id="1", ack="client", headers={"selector": "a = 1"})
    amqp = BlockingConnection(broker.amqp)
    amqp.create_sender("queue://ORDERS")
    wait_until(lambda: any(e.kind == "producer-opened" for e in events), "producer-opened")

    conns = broker.call(m.connections)
    assert sorted(c.transport for c in conns) == ["amqp", "stomp"]
    stomp_conn = next(c for c in conns if c.transport == "stomp")
    assert (stomp_conn.client_id, stomp_conn.consumers) == ("watcher", 1)
    [consumer] = broker.call(lambda: m.consumers("ORDERS"))
    assert (consumer.destination, consumer.selector, consumer.client_id) == (
        "queue://ORDERS", "a = 1", "watcher")
    [producer] = broker.call(m.producers)
    assert producer.destination == "queue://ORDERS"
    info = broker.run(m.destination("ORDERS"))
    assert (info.consumers, info.producers) == (1, 1)

    amqp.close()
    conn.disconnect()
    wait_until(lambda: sum(e.kind == "connection-closed" for e in events) == 2, "two closes")
    kinds = [(e.kind, e.destination, e.count) for e in events]
    assert kinds[:3] == [("connection-opened", None, 0), ("consumer-opened", "queue://ORDERS", 1),
                         ("connection-opened", None, 0)]
    assert ("producer-opened", "queue://ORDERS", 1) in kinds
    assert ("producer-closed", "queue://ORDERS", 0) in kinds
    assert ("consumer-closed", "queue://ORDERS", 0) in kinds
    assert events[0].client_id == "watcher"
    broker.call(stop)
    conn2, _ = stomp_client(broker.stomp)
    conn2.disconnect()
    assert sum(e.kind == "connection-opened" for e in events) == 2  # stopped listening


def test_close_connection_tells_the_stomp_client_why(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    conn, inbox = stomp_client(broker.stomp)
    [info] = broker.call(m.connections)
    assert broker.run(m.close_connection(info.id, "maintenance window")) is True
    wait_until(lambda: inbox.errors, "the ERROR frame")
    assert inbox.errors[0].headers["message"] == "maintenance window"
    wait_until(lambda: not conn.is_connected(), "the socket to close")
    assert broker.call(m.connections) == []
    assert broker.run(m.close_connection(info.id)) is False


def test_close_connection_closes_an_amqp_client(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    amqp = BlockingConnection(broker.amqp)
    try:
        [info] = broker.call(m.connections)
        assert broker.run(m.close_connection(info.id, "go away")) is True
        wait_until(lambda: broker.call(m.connections) == [], "the AMQP connection to go")
        with pytest.raises(Exception, match="go away|forced"):
            amqp.create_sender("queue://X")
    finally:
        try:
            amqp.close()
        except Exception:  # noqa: BLE001,S110 - already closed by the broker
            pass


class RecordingBrokerConnection:
    """A broker connection as a plugin would offer one (start/stop, state, status)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[str] = []
        self.state = "connected"

    async def start(self) -> None:
        self.calls.append("start")
        if self.fail:
            raise ConnectionRefusedError("peer down")

    async def stop(self) -> None:
        self.calls.append("stop")

    def status(self) -> dict[str, Any]:
        return {"peer": "amqp://peer:5672"}


def test_broker_connections_are_listed_started_and_stopped(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    good, bad = RecordingBrokerConnection(), RecordingBrokerConnection(fail=True)
    broker.call(lambda: m.register_broker_connection("mirror-dc2", good, kind="amqp-connection",
                                                     uri="amqp://peer:5672"))
    broker.call(lambda: m.register_broker_connection("bridge", bad))
    assert [(c.name, c.state) for c in broker.call(m.broker_connections)] == [
        ("mirror-dc2", "stopped"), ("bridge", "stopped")]
    broker.run(m.start_broker_connection("mirror-dc2"))
    with pytest.raises(ConnectionRefusedError):
        broker.run(m.start_broker_connection("bridge"))
    listed = {c.name: c for c in broker.call(m.broker_connections)}
    assert listed["mirror-dc2"].state == "connected"
    assert listed["mirror-dc2"].detail == {"peer": "amqp://peer:5672"}
    assert listed["bridge"].state == "failed"
    assert listed["bridge"].detail["error"] == "ConnectionRefusedError: peer down"
    broker.run(m.stop_broker_connection("mirror-dc2"))
    assert good.calls == ["start", "stop"]
    with pytest.raises(DestinationError, match="registered: bridge, mirror-dc2"):
        broker.run(m.start_broker_connection("nope"))


def test_create_and_delete_destinations(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    made = broker.run(m.create_queue("MADE", queue_type="standard"))
    assert (made.key, made.queue_type, made.depth) == ("queue://MADE", "standard", 0)
    with pytest.raises(PluginNotFound, match="installed: .*standard"):
        broker.run(m.create_queue("TYPED", queue_type="no-such-type"))
    assert broker.run(m.create_topic("NEWS")).key == "topic://NEWS"
    keys = {d.key for d in broker.run(m.destinations())}
    assert {"queue://MADE", "topic://NEWS"} <= keys
    conn, inbox = stomp_client(broker.stomp)
    conn.subscribe("/queue/MADE", id="1", ack="auto")
    wait_until(lambda: broker.call(lambda: m.consumer_count("MADE")) == 1, "the consumer")
    assert broker.run(m.delete_destination("MADE")) is True
    wait_until(lambda: inbox.errors, "the subscription closed by the delete")
    assert "queue://MADE" not in {d.key for d in broker.run(m.destinations("queue"))}
    assert broker.run(m.delete_destination("MADE")) is False


def test_durable_subscriptions_are_listed_browsed_and_deleted(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    conn, inbox = stomp_client(broker.stomp, headers={"client-id": "app"})
    conn.subscribe("/topic/PRICES", id="1", ack="client",
                   headers={"activemq.subscriptionName": "prices"})
    conn.unsubscribe("1")
    conn.send("/topic/PRICES", "p1", headers={"persistent": "true", "receipt": "r"})
    wait_until(lambda: "r" in inbox.receipts, "the receipt")
    [sub] = broker.call(m.durable_subscriptions)
    assert (sub.client_id, sub.name, sub.topic, sub.active, sub.depth) == (
        "app", "prices", "topic://PRICES", False, 1)
    assert broker.call(lambda: m.durable_subscription("app", "prices")) == sub
    page = broker.run(m.browse(sub.key))
    assert [x.body for x in page.messages] == [b"p1"]
    assert broker.run(m.delete_durable_subscription("app", "prices")) is True
    assert broker.call(m.durable_subscriptions) == []
    conn.disconnect()


def test_outgoing_connections_are_listed_and_closed(start_broker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from relaymq.spi.outgoing import ConnectOptions

    from .conftest import BrokerThread, config_xml

    here = start_broker()
    peer = BrokerThread(config_xml(tmp_path / "peer"))
    try:
        m = here.management
        host, port = peer.stomp
        here.run(here.broker.outgoing.connect(f"stomp://{host}:{port}",
                                              ConnectOptions(name="to-peer", owner="test")))
        [info] = here.call(m.outgoing_connections)
        assert (info.name, info.state, info.owner) == ("to-peer", "open", "test")
        assert info.peer is not None and str(port) in info.peer
        # the peer sees it as one of its client connections
        assert [c.transport for c in peer.call(peer.management.connections)] == ["stomp"]
        assert here.run(m.close_outgoing_connection("to-peer")) is True
        wait_until(lambda: peer.call(peer.management.connections) == [], "the peer to see it go")
        assert here.call(m.outgoing_connections) == []  # a closed connection is not listed
        assert here.run(m.close_outgoing_connection("to-peer")) is False
        assert here.run(m.close_outgoing_connection("nope")) is False
    finally:
        peer.stop()
