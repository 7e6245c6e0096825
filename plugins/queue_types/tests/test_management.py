"""What management changes on queue types is kept across restarts: a queue type
given by `create_queue`, topic subscriptions added at run time, a partition count.
The broker runs in this process (management is a Python API) with kahaDB, real
STOMP and AMQP connectors; a restart is a new broker on the same store."""

from __future__ import annotations

import asyncio
import threading
import time
import zlib

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")

from proton.utils import BlockingConnection, LinkDetached  # noqa: E402
from relaymq.errors import DestinationError  # noqa: E402
from relaymq.spi.persistence import AddDestination  # noqa: E402
from relaymq.testing import wait_until  # noqa: E402

from .support import Client, EmbeddedBroker, broker_xml  # noqa: E402

CONFIG = broker_xml("mgmt", """
    <policyEntry queue="keyed.>" partitionCount="2" partitionRebalanceDelay="100"/>
    <policyEntry queue="expiring.>" deadMessageQueue="expiring.DMQ" dmqEligible="true"/>
    <policyEntry queue="excl.>" accessType="exclusive"/>
    <policyEntry queue="strict.>" partitionCount="2" maxRedelivery="0"
                 deadMessageQueue="strict.DMQ" dmqEligible="true"/>""")


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
        with pytest.raises(DestinationError, match=r"a count is 0 \(a non-partitioned queue\)"):
            b.call(lambda br: qt(br).set_partition_count("keyed.book", -1))
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


def flow(b: EmbeddedBroker, queue: str) -> dict[str, tuple[bool, tuple[int, ...] | None]]:
    """Management's view of `queue`'s consumers: client id -> (active, partitions)."""
    return {c.client_id: (c.active, c.partitions)
            for c in b.call(lambda br: br.management.consumers(queue))}


def test_the_consumer_whose_subscribe_creates_an_exclusive_queue_is_bound_first(tmp_path) -> None:
    """On kahaDB a new queue is stored before it is used; a consumer that subscribes
    while that write is under way waits for it, so the consumer whose SUBSCRIBE made
    the queue is bound first and is the active one."""
    b = EmbeddedBroker(tmp_path, CONFIG)
    b.start()
    try:
        store = b.broker.region.store
        write = store.write
        creating = threading.Event()

        async def slow_disk(ops, **kw):  # type: ignore[no-untyped-def]
            if any(isinstance(op, AddDestination) and op.dest == "queue://excl.made" for op in ops):
                creating.set()
                await asyncio.sleep(0.5)  # the queue's creation takes a while to store
            await write(ops, **kw)

        store.write = slow_disk
        first, second = (Client(b, n, client_id=n) for n in ("first", "second"))
        first.conn.subscribe("/queue/excl.made", id="1", ack="auto", headers={"receipt": "r1"})
        assert creating.wait(10), "the queue's creation never reached the store"
        second.subscribe("/queue/excl.made", id="1")  # while the creation is being stored
        wait_until(lambda: "r1" in first.receipts, "the first SUBSCRIBE's receipt", 10)
        assert flow(b, "excl.made") == {"first": (True, None), "second": (False, None)}
        p = Client(b, "p")
        p.send("/queue/excl.made", "m")
        assert first.wait_for("m") == ["m"]
        assert second.messages == []  # the standby got nothing: the one message went to `first`
        for c in (first, second, p):
            assert not c.errors, c.errors[0].headers
            c.close()
    finally:
        b.stop()


def test_management_shows_the_active_flow_of_exclusive_and_partitioned_queues(tmp_path) -> None:
    """Solace's active flow indication: which consumer receives on an exclusive queue,
    which owns which partition; it changes when the active consumer leaves."""
    b = EmbeddedBroker(tmp_path, CONFIG)
    b.start()
    try:
        first, second, third = (Client(b, n, client_id=n) for n in ("first", "second", "third"))
        for c in (first, second, third):
            c.subscribe("/queue/excl.audit", id="1")
        assert flow(b, "excl.audit") == {"first": (True, None), "second": (False, None),
                                         "third": (False, None)}
        first.close()
        wait_until(lambda: flow(b, "excl.audit") == {"second": (True, None),
                                                     "third": (False, None)},
                   "the second to be the active one", 10)
        p = Client(b, "p")
        p.send("/queue/excl.audit", "after failover")
        assert second.wait_for("after failover") == ["after failover"]
        assert third.messages == []
        for c in (second, third):
            c.conn.unsubscribe("1")

        # a partitioned queue with two partitions: the first consumer owns both, a
        # second one gets one after the rebalance, a third has none (inactive)
        first, second, third = (Client(b, n, client_id=f"k{n}") for n in ("first", "second",
                                                                            "third"))
        first.subscribe("/queue/keyed.flow", id="1")
        assert flow(b, "keyed.flow") == {"kfirst": (True, (0, 1))}
        second.subscribe("/queue/keyed.flow", id="1")
        wait_until(lambda: flow(b, "keyed.flow") == {"kfirst": (True, (0,)),
                                                     "ksecond": (True, (1,))},
                   "one partition each", 10)
        third.subscribe("/queue/keyed.flow", id="1")
        wait_until(lambda: b.call(lambda br: br.management.queue("keyed.flow").rebalances) >= 2,
                   "the rebalance after the third joined", 10)
        assert flow(b, "keyed.flow") == {"kfirst": (True, (0,)), "ksecond": (True, (1,)),
                                         "kthird": (False, ())}
        second.close()  # its partition goes to the consumer that had none
        wait_until(lambda: flow(b, "keyed.flow") == {"kfirst": (True, (0,)),
                                                     "kthird": (True, (1,))},
                   "the third to take the second's partition", 10)
        # what the view says is where the messages go: a key of partition 1 reaches third
        key = next(f"k{i}" for i in range(100) if zlib.crc32(f"k{i}".encode()) % 2 == 1)
        p.send("/queue/keyed.flow", "to partition 1", JMSXGroupID=key)
        assert third.wait_for("to partition 1") == ["to partition 1"]
        assert first.messages == []
        # a paused queue's consumers receive nothing: none is active
        b.call(lambda br: br.management.pause("keyed.flow"))
        assert not any(active for active, _ in flow(b, "keyed.flow").values())
        b.call(lambda br: br.management.resume("keyed.flow"))
        for c in (p, first, second, third):
            c.close()
    finally:
        b.stop()


def test_a_partition_count_of_0_set_by_management_makes_a_plain_queue_across_a_restart(
        tmp_path) -> None:
    b = EmbeddedBroker(tmp_path, CONFIG)
    b.start()
    try:
        c = Client(b, "c")
        c.subscribe("/queue/keyed.zero", id="1", ack="client-individual",
                    **{"activemq.prefetchSize": "3"})
        p = Client(b, "p")
        for i in range(8):
            p.send("/queue/keyed.zero", f"m{i}", JMSXGroupID=f"k{i % 3}", persistent="true")
        c.wait(3)  # held, not acknowledged
        report = b.call(lambda br: qt(br).set_partition_count("keyed.zero", 0))
        assert report["from"] == 2 and report["to"] == 0 and report["unbound"] == 1
        assert "partition count changed from 2 to 0" in c.wait_error()
        assert b.call(lambda br: br.management.queue_settings("keyed.zero")) == {
            "partitionCount": 0}
        info = b.call(lambda br: br.management.destination("keyed.zero"))
        assert info.queue_type == "solace"
        p.close()
    finally:
        b.stop()
    b = EmbeddedBroker(tmp_path, CONFIG)
    b.start()
    try:
        assert b.call(lambda br: br.management.queue("keyed.zero").partition_count) == 0
        # a plain queue: a selector is allowed, and the waiting messages come in the
        # queue's order (the three that were held first, redelivered)
        c = Client(b, "again", client_id="again")
        c.subscribe("/queue/keyed.zero", id="1", selector="JMSXGroupID IS NOT NULL")
        assert c.wait(8) == [f"m{i}" for i in range(8)]
        assert flow(b, "keyed.zero") == {"again": (True, None)}
        # and partitioned again with a count above 0
        report = b.call(lambda br: qt(br).set_partition_count("keyed.zero", 2))
        assert report["from"] == 0 and report["to"] == 2 and report["unbound"] == 1
        assert "partition count changed from 0 to 2" in c.wait_error()
        bad = Client(b, "bad")
        bad.subscribe("/queue/keyed.zero", id="1", selector="JMSXGroupID IS NOT NULL")
        assert "a selector is not allowed" in bad.wait_error()
        c.close()
    finally:
        b.stop()


def test_consumers_unbound_by_a_partition_count_change_do_not_use_up_max_redelivery(
        tmp_path) -> None:
    """A consumer that leaves holding a message is a failed delivery, but one the
    broker unbinds (a partition count change) is not: with maxRedelivery 0 the
    message it held is delivered again, not dead-lettered."""
    b = EmbeddedBroker(tmp_path, CONFIG)
    b.start()
    try:
        b.call(lambda br: br.management.create_queue("strict.DMQ"))
        c = Client(b, "c")
        c.subscribe("/queue/strict.q", id="1", ack="client-individual")
        p = Client(b, "p")
        p.send("/queue/strict.q", "held", JMSXGroupID="k", persistent="true")
        assert c.wait(1) == ["held"]
        b.call(lambda br: qt(br).set_partition_count("strict.q", 3))
        assert "partition count changed from 2 to 3" in c.wait_error()
        d = Client(b, "d")
        d.subscribe("/queue/strict.q", id="1", ack="client-individual")
        assert d.wait(1) == ["held"]
        assert d.messages[0].headers.get("redelivered") == "true"
        d.ack(d.messages[0])
        for x in (c, d, p):
            x.close()
    finally:
        b.stop()
