"""What management changes on queue types is kept across restarts: a queue type
given by `create_queue`, topic subscriptions added at run time, a partition count.
The broker runs in this process (management is a Python API) with kahaDB, real
STOMP and AMQP connectors; a restart is a new broker on the same store."""

from __future__ import annotations

import time

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")

from proton.utils import BlockingConnection, LinkDetached  # noqa: E402
from relaymq.errors import DestinationError  # noqa: E402

from .support import Client, EmbeddedBroker  # noqa: E402

CONFIG = """<broker xmlns="http://activemq.apache.org/schema/core" brokerName="mgmt"
        dataDirectory="{data}">
  <destinationPolicy><policyMap><policyEntries>
    <policyEntry queue="keyed.>" partitionCount="2" partitionRebalanceDelay="100"/>
    <policyEntry queue="expiring.>" deadMessageQueue="expiring.DMQ" dmqEligible="true"/>
  </policyEntries></policyMap></destinationPolicy>
  <persistenceAdapter><kahaDB directory="{data}/kahadb"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp}"/>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{amqp}"/>
  </transportConnectors>
</broker>"""


def qt(broker):  # type: ignore[no-untyped-def]
    return broker.extensions["queue-types"]


def test_a_type_and_topic_subscriptions_given_by_management_survive_a_restart(tmp_path) -> None:
    b = EmbeddedBroker(tmp_path, CONFIG)
    b.start()
    try:
        info = b.call(lambda br: br.management.create_queue("books", queue_type="lastValue"))
        assert info.queue_type == "lastValue"
        assert b.call(lambda br: qt(br).add_subscription("books", "books.*.sold")) == ["books.*.sold"]
        b.call(lambda br: qt(br).add_subscription("books", "topic://returns"))
        b.call(lambda br: br.management.create_queue("gone", queue_type="partitioned"))
        b.call(lambda br: qt(br).add_subscription("gone", "books.>"))
        b.call(lambda br: br.management.delete_destination("gone"))  # forgets its declaration
        with pytest.raises(DestinationError, match="not an existing queue"):
            b.call(lambda br: qt(br).add_subscription("nosuch", "x"))
    finally:
        b.stop()
    b = EmbeddedBroker(tmp_path, CONFIG)
    b.start()
    try:
        assert b.call(lambda br: br.management.queue("books").queue_type) == "lastValue"
        assert b.call(lambda br: sorted(qt(br).subscriptions_of("books"))) == ["books.*.sold",
                                                                              "returns"]
        assert b.call(lambda br: br.management.queue("gone")) is None
        assert b.call(lambda br: br.management.declared_queues()) == [
            b.call(lambda br: br.management.queue("books").destination)]
        p = Client(b, "p")
        for i in range(3):
            p.send("/topic/books.dune.sold", f"dune sold {i}", persistent="true")
        amqp = BlockingConnection(f"127.0.0.1:{b.amqp_port}")
        try:
            amqp.create_sender("topic://returns").send(proton.Message(body="one returned"))
        finally:
            amqp.close()
        c = Client(b, "c")
        c.subscribe("/queue/books", id="q")
        assert c.wait(1) == ["one returned"]  # a last value queue: the newest only
        # removing a subscription is stored too
        assert b.call(lambda br: qt(br).remove_subscription("books", "returns")) is True
        assert b.call(lambda br: qt(br).remove_subscription("books", "returns")) is False
        c.close()
        p.close()
    finally:
        b.stop()
    b = EmbeddedBroker(tmp_path, CONFIG)
    b.start()
    try:
        assert b.call(lambda br: qt(br).subscriptions_of("books")) == ["books.*.sold"]
        p = Client(b, "p")
        p.send("/topic/returns", "not subscribed any more")
        p.send("/topic/books.x.sold", "marker")
        c = Client(b, "c")
        c.subscribe("/queue/books", id="q")
        assert c.wait_for("marker") == ["marker"]
        c.close()
        p.close()
    finally:
        b.stop()


def test_the_dmq_is_looked_up_through_management(tmp_path) -> None:
    """The DMQ must exist (Solace); a DMQ created through management counts at once."""
    b = EmbeddedBroker(tmp_path, CONFIG)
    b.start()
    try:
        p = Client(b, "p")
        past = str(int(time.time() * 1000) - 1000)
        p.send("/queue/expiring.a", "no DMQ yet", expires=past, persistent="true")
        c = Client(b, "c")
        c.subscribe("/queue/expiring.a", id="1")  # the expired message is dropped here
        b.call(lambda br: br.management.create_queue("expiring.DMQ"))
        p.send("/queue/expiring.a", "to the DMQ", expires=past, persistent="true")
        p.send("/queue/expiring.a", "alive", persistent="true")
        assert c.wait_for("alive") == ["alive"]
        c.subscribe("/queue/expiring.DMQ", id="2")
        assert c.wait(2)[1] == "to the DMQ"  # "no DMQ yet" was discarded, not kept
        queue = b.call(lambda br: br.management.queue("expiring.a"))
        assert queue.discarded == 1
        c.close()
        p.close()
    finally:
        b.stop()


def test_a_partition_count_set_by_management_unbinds_consumers_and_is_kept(tmp_path) -> None:
    b = EmbeddedBroker(tmp_path, CONFIG)
    b.start()
    try:
        c = Client(b, "c")
        c.subscribe("/queue/keyed.book", id="1", ack="client-individual")
        p = Client(b, "p")
        for i in range(6):
            p.send("/queue/keyed.book", f"m{i}", JMSXGroupID=f"k{i % 3}", persistent="true")
        c.wait(6)  # held, not acknowledged
        amqp = BlockingConnection(f"127.0.0.1:{b.amqp_port}")
        try:
            receiver = amqp.create_receiver("queue://keyed.book")
            report = b.call(lambda br: qt(br).set_partition_count("keyed.book", 5))
            assert report["from"] == 2 and report["to"] == 5 and report["unbound"] == 2
            assert "partition count changed from 2 to 5" in c.wait_error()
            with pytest.raises(LinkDetached, match="partition count changed from 2 to 5"):
                receiver.receive(timeout=10)
        finally:
            amqp.close()
        with pytest.raises(DestinationError, match="keeps 1 or more partitions"):
            b.call(lambda br: qt(br).set_partition_count("keyed.book", 0))
        p.close()
    finally:
        b.stop()
    b = EmbeddedBroker(tmp_path, CONFIG)
    b.start()
    try:
        assert b.call(lambda br: br.management.queue("keyed.book").partition_count) == 5
        c = Client(b, "again")
        c.subscribe("/queue/keyed.book", id="1")
        # nothing was lost, and each key's messages come in order
        got = c.wait(6)
        assert sorted(got) == [f"m{i}" for i in range(6)]
        for key in range(3):
            mine = [m for m in got if int(m[1:]) % 3 == key]
            assert mine == sorted(mine)
        c.close()
    finally:
        b.stop()
