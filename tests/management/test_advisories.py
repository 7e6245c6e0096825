"""ActiveMQ advisory topics read by real STOMP and AMQP subscribers."""

from __future__ import annotations

import json
from typing import Any

from proton import Message as AmqpMessage
from proton.utils import BlockingConnection
from relaymq.testing.barriers import stomp_before_marker
from relaymq.testing.waits import wait_until

from .conftest import stomp_client, wait_receipt


def advisories(inbox: Any, topic: str) -> list[Any]:
    return [m for m in inbox.messages if m.headers.get("destination") == f"/topic/{topic}"]


def test_a_stomp_subscriber_to_activemq_advisory_gets_what_happens(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(extra_policy='expireMessagesPeriod="0"')
    feed = broker.broker.change_feed
    # nobody watches advisories: the feed builds no per-message removal events
    assert broker.call(lambda: feed.watch_removed) is False
    watch, inbox = stomp_client(broker.stomp)
    watch.subscribe("/topic/ActiveMQ.Advisory.>", id="adv", ack="auto")
    wait_until(lambda: broker.call(lambda: broker.management.has_subscribers(
        "topic://ActiveMQ.Advisory.Connection")), "the advisory subscription")
    wait_until(lambda: broker.call(lambda: feed.watch_removed), "removals watched")

    app, app_inbox = stomp_client(broker.stomp, headers={"client-id": "app"})
    app.subscribe("/queue/ORDERS", id="1", ack="client-individual")
    app.send("/queue/ORDERS", "bad", headers={"persistent": "true", "receipt": "s"})
    wait_receipt(app_inbox, "s")
    delivered = wait_until(lambda: app_inbox.messages, "the delivery")[0]
    app.nack(delivered.headers["message-id"], "1")  # poison -> ActiveMQ.DLQ
    app.send("/queue/ORDERS", "late", headers={"expires": "1", "receipt": "x"})
    app.unsubscribe("1")
    app.disconnect()

    wait_until(lambda: len(advisories(inbox, "ActiveMQ.Advisory.Connection")) == 2,
               "connection open and close advisories")
    opened, closed = advisories(inbox, "ActiveMQ.Advisory.Connection")
    assert opened.headers["type"] == "Advisory"
    assert opened.headers["originBrokerName"] == "mgmt"
    assert opened.headers["originBrokerURL"].startswith("stomp://127.0.0.1:")
    assert opened.headers["originBrokerId"].startswith("ID:")
    info = json.loads(opened.body)["ConnectionInfo"]
    assert (info["clientId"], info["transport"]) == ("app", "stomp")
    assert json.loads(closed.body)["RemoveInfo"]["objectId"]["ConnectionId"] == info["connectionId"]

    consumer = advisories(inbox, "ActiveMQ.Advisory.Consumer.Queue.ORDERS")
    assert [m.headers["consumerCount"] for m in consumer] == ["1", "0"]
    assert json.loads(consumer[0].body)["ConsumerInfo"]["destination"] == "queue://ORDERS"
    assert "RemoveInfo" in json.loads(consumer[1].body)

    created = [json.loads(m.body)["DestinationInfo"] for m in advisories(inbox, "ActiveMQ.Advisory.Queue")]
    assert {"destination": "queue://ORDERS", "operationType": 0} in created
    assert {"destination": "queue://ActiveMQ.DLQ", "operationType": 0} in created

    [dlq] = wait_until(lambda: advisories(inbox, "ActiveMQ.Advisory.MessageDLQd.Queue.ORDERS"),
                       "the DLQ advisory")
    assert dlq.headers["orignalMessageId"] == delivered.headers["message-id"]
    assert dlq.headers["orignalDestination"] == "queue://ORDERS"
    assert json.loads(dlq.body)["Message"]["messageId"] == delivered.headers["message-id"]

    # the late message expires when a consumer comes for it
    late, late_inbox = stomp_client(broker.stomp)
    late.subscribe("/queue/ORDERS", id="2", ack="auto")
    [expired] = wait_until(lambda: advisories(inbox, "ActiveMQ.Advisory.Expired.Queue.ORDERS"),
                           "the expiry advisory")
    assert expired.headers["orignalDestination"] == "queue://ORDERS"
    assert stomp_before_marker(late, late_inbox, "/queue/ORDERS") == []  # not delivered
    late.disconnect()

    # deleting a destination is advised too
    assert broker.run(broker.management.delete_destination("ORDERS")) is True
    wait_until(lambda: {"destination": "queue://ORDERS", "operationType": 1} in [
        json.loads(m.body)["DestinationInfo"] for m in advisories(inbox, "ActiveMQ.Advisory.Queue")],
        "the delete advisory")

    # no advisories about advisory topics, and no per-message work once the subscriber left
    assert not [m for m in inbox.messages if "Advisory.Consumer.Topic.ActiveMQ" in
                m.headers["destination"]]
    watch.disconnect()
    wait_until(lambda: broker.call(lambda: not broker.management.has_subscribers(
        "topic://ActiveMQ.Advisory.Connection")), "the advisory subscription to go")
    wait_until(lambda: broker.call(lambda: not feed.watch_removed), "removals unwatched")


def test_an_amqp_subscriber_gets_producer_and_consumer_advisories(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    amqp = BlockingConnection(broker.amqp)
    try:
        producers = amqp.create_receiver("topic://ActiveMQ.Advisory.Producer.Queue.PRICES")
        consumers = amqp.create_receiver("topic://ActiveMQ.Advisory.Consumer.Queue.PRICES")
        other = BlockingConnection(broker.amqp)
        sender = other.create_sender("queue://PRICES")
        sender.send(AmqpMessage(body="p"))
        got = producers.receive(timeout=20)
        producers.accept()
        assert got.properties["producerCount"] == 1
        assert got.properties["originBrokerName"] == "mgmt"
        assert json.loads(got.body)["ProducerInfo"]["destination"] == "queue://PRICES"
        receiver = other.create_receiver("queue://PRICES")
        assert receiver.receive(timeout=20).body == "p"
        adv = consumers.receive(timeout=20)
        consumers.accept()
        assert adv.properties["consumerCount"] == 1
        assert json.loads(adv.body)["ConsumerInfo"]["destination"] == "queue://PRICES"
        other.close()
        gone = producers.receive(timeout=20)
        producers.accept()
        assert gone.properties["producerCount"] == 0
        assert "RemoveInfo" in json.loads(gone.body)
    finally:
        amqp.close()


def test_advisory_support_false_publishes_nothing(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(advisory=False)
    watch, inbox = stomp_client(broker.stomp)
    watch.subscribe("/topic/ActiveMQ.Advisory.>", id="adv", ack="auto")
    app, app_inbox = stomp_client(broker.stomp)
    app.send("/queue/Q", "x", headers={"receipt": "r"})
    wait_receipt(app_inbox, "r")
    app.disconnect()
    # a marker published after everything the broker would have advised arrives alone
    marker, marker_inbox = stomp_client(broker.stomp)
    marker.send("/topic/ActiveMQ.Advisory.Marker", "marker", headers={"receipt": "m"})
    wait_receipt(marker_inbox, "m")
    wait_until(lambda: inbox.messages, "the marker")
    assert [m.body for m in inbox.messages] == ["marker"]
    watch.disconnect()
    marker.disconnect()
