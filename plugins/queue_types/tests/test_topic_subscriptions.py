"""Topic subscriptions on queues (Solace's topic-to-queue mapping): configured by
policy and declaration in a `relaymq run` process, published over STOMP and AMQP."""

from __future__ import annotations

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")

from proton.utils import BlockingConnection  # noqa: E402

from .support import Broker, Client, broker_xml  # noqa: E402

CONFIG = broker_xml("subs", """
    <policyEntry queue="lvq.>" queueType="lastValue" topicSubscriptions="pub1.>"/>""", extra="""
  <destinations>
    <queue physicalName="fanin" topicSubscriptions="prices.*, alerts"/>
    <queue physicalName="lvq.pub1"/>
  </destinations>""")


def test_a_declared_queue_receives_what_is_published_to_its_topics(tmp_path) -> None:
    b = Broker(tmp_path, CONFIG)
    b.start()
    try:
        watcher = Client(b, "watcher")
        watcher.subscribe("/topic/prices.ibm", id="t")  # topic subscribers still get theirs
        p = Client(b, "p")
        p.send("/topic/prices.ibm", "ibm over stomp", persistent="true")
        p.send("/topic/weather.today", "not subscribed", persistent="true")
        p.send("/topic/prices.ibm.nyse", "too deep for prices.*", persistent="true")
        amqp = BlockingConnection(f"127.0.0.1:{b.amqp_port}")
        try:
            sender = amqp.create_sender("topic://alerts")
            sender.send(proton.Message(body="alert over amqp", durable=True))
        finally:
            amqp.close()
        p.send("/topic/prices.msft", "marker", persistent="true")
        assert watcher.wait(1) == ["ibm over stomp"]
        c = Client(b, "c")
        c.subscribe("/queue/fanin", id="q", ack="client-individual")
        # the marker was published last: what arrives before it is all there is
        assert c.wait_for("marker") == ["ibm over stomp", "alert over amqp", "marker"]
        first = c.messages[0]
        assert first.headers["original-destination"] == "/topic/prices.ibm"
        for m in c.messages[:2]:
            c.ack(m)
        c.close()  # "marker" stays unacknowledged: it must survive the restart
        p.close()
        watcher.close()
    finally:
        b.stop()
    b.start()  # a persistent publication stored on the subscribed queue survives
    try:
        c = Client(b, "after")
        c.subscribe("/queue/fanin", id="q")
        assert c.wait(1) == ["marker"]
        p = Client(b, "p")
        p.send("/topic/alerts", "still subscribed after the restart")
        assert c.wait(2)[1] == "still subscribed after the restart"
        p.close()
        c.close()
    finally:
        b.stop()


def test_a_publishers_last_value_queue_tells_it_the_last_accepted_message(tmp_path) -> None:
    """The seed's use of a topic subscription on a last value queue."""
    b = Broker(tmp_path, CONFIG)
    b.start()
    try:
        p = Client(b, "pub1")
        for i in range(5):
            p.send("/topic/pub1.price.equities.apple", f"apple={i}", persistent="true")
        p.send("/topic/pub2.price.equities.apple", "another publisher's", persistent="true")
        p.close()
    finally:
        b.stop()  # the publisher "crashes"; the broker restarts
    b.start()
    try:
        c = Client(b, "pub1 again")
        c.subscribe("/queue/lvq.pub1", id="b", browser="true")  # browsing keeps it
        assert c.wait(1) == ["apple=4"]
        c.subscribe("/queue/lvq.pub1", id="q")
        assert c.wait(2) == ["apple=4", "apple=4"]
        c.close()
    finally:
        b.stop()
