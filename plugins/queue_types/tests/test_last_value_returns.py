"""Last value queues keep only the newest value of each slot (the queue, or its
partition) whatever way an older one comes back: a rolled-back transaction (STOMP
ABORT, an AMQP discharge with fail), a partition count change that unbinds its
consumer, or a restart after a crash that left both stored. The broker runs in
this process on its own loop (its counters are read through management), reached
by stomp.py and proton over real sockets; the crash test kills a `relaymq run`
process."""

from __future__ import annotations

import zlib

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")

from proton.utils import BlockingConnection  # noqa: E402
from relaymq.testing import wait_equal, wait_until  # noqa: E402
from relaymq_amqp.testing import TxClient  # noqa: E402

from .support import Broker, Client, EmbeddedBroker, broker_xml  # noqa: E402

CONFIG = broker_xml("lvq", """
    <policyEntry queue="prices.>" queueType="lastValue"/>
    <policyEntry queue="book.>" queueType="lastValue" partitionCount="2"
                 partitionRebalanceDelay="100"/>""")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = EmbeddedBroker(tmp_path_factory.mktemp("lvq"), CONFIG)
    b.start()
    yield b
    b.stop()


def replaced(b: EmbeddedBroker, name: str) -> int:
    return b.call(lambda br: br.management.queue(name).replaced)  # type: ignore[no-any-return]


def depth(b: EmbeddedBroker, name: str) -> int:
    return b.call(lambda br: br.management.queue(name).size())  # type: ignore[no-any-return]


def test_a_value_returned_by_a_stomp_abort_is_replaced_by_the_newer_one(broker) -> None:
    c = Client(broker, "c")
    c.subscribe("/queue/prices.abort", id="1", ack="client-individual",
                **{"activemq.prefetchSize": "1"})
    c.send("/queue/prices.abort", "A", persistent="true")
    assert c.wait(1) == ["A"]
    c.send("/queue/prices.abort", "B", persistent="true")  # waits: the consumer is full
    c.begin("t1")
    c.with_receipt(lambda rid: c.conn.ack(c.messages[0].headers["ack"], transaction="t1",
                                          receipt=rid))
    c.abort("t1")  # A comes back, but B is the last value now
    assert c.wait(2)[1] == "B"
    c.ack(c.messages[1])
    wait_equal(lambda: depth(broker, "prices.abort"), 0, "the queue emptied")
    assert c.bodies() == ["A", "B"]  # A was not delivered again
    assert replaced(broker, "prices.abort") == 1
    assert not c.errors
    c.close()


def test_a_value_returned_by_an_amqp_rollback_is_replaced_by_the_newer_one(broker) -> None:
    address = "queue://prices.rollback"
    conn = BlockingConnection(f"127.0.0.1:{broker.amqp_port}")
    try:
        tx = TxClient(conn)
        sender = conn.create_sender(address)
        holder = conn.create_receiver(address, credit=0, name="holder")  # one per receive()
        sender.send(proton.Message(body="A", durable=True))
        assert holder.receive(timeout=10).body == "A"
        sender.send(proton.Message(body="B", durable=True))  # waits: the newest value
        txn = tx.declare()
        tx.accept(holder, txn)
        tx.rollback(txn)  # A returns; B is the last value
        reader = conn.create_receiver(address, credit=10, name="reader")
        first = reader.receive(timeout=10)
        assert first.body == "B"
        reader.accept()
        sender.send(proton.Message(body="marker"))
        assert reader.receive(timeout=10).body == "marker"  # nothing between
        reader.accept()
        assert replaced(broker, "prices.rollback") == 1
    finally:
        conn.close()


def test_a_value_held_during_a_partition_count_change_is_replaced(broker) -> None:
    """A consumer holds A of key k, B of key k waits; the count changes, the consumer
    is unbound and gives A back: B is its key's last value, A is replaced."""
    c = Client(broker, "c")
    c.subscribe("/queue/book.held", id="1", ack="client-individual",
                **{"activemq.prefetchSize": "1"})
    c.send("/queue/book.held", "A", JMSXGroupID="k", persistent="true")
    assert c.wait(1) == ["A"]
    c.send("/queue/book.held", "B", JMSXGroupID="k", persistent="true")
    qt = "queue-types"
    broker.call(lambda br: br.extensions[qt].set_partition_count("book.held", 4))
    assert "partition count changed from 2 to 4" in c.wait_error()
    again = Client(broker, "again")
    again.subscribe("/queue/book.held", id="1", ack="client-individual",
                    **{"activemq.prefetchSize": "1"})
    assert again.wait(1) == ["B"]
    again.ack(again.messages[0])
    wait_equal(lambda: depth(broker, "book.held"), 0, "the queue emptied")
    assert again.bodies() == ["B"]
    assert replaced(broker, "book.held") == 1
    again.close()
    c.close()


def test_values_that_share_a_partition_after_a_count_change_keep_only_the_newest(broker) -> None:
    """A count of 0 makes one slot of the whole queue: of the waiting values of two
    partitions only the newer stays."""
    p = Client(broker, "p")
    keys = [next(k for k in (f"k{i}" for i in range(100)) if zlib.crc32(k.encode()) % 2 == part)
            for part in (0, 1)]  # one key of each partition
    for key in keys:
        p.send("/queue/book.merge", f"value of {key}", JMSXGroupID=key, persistent="true")
    assert depth(broker, "book.merge") == 2
    broker.call(lambda br: br.extensions["queue-types"].set_partition_count("book.merge", 0))
    assert depth(broker, "book.merge") == 1
    assert replaced(broker, "book.merge") == 1
    c = Client(broker, "c")
    c.subscribe("/queue/book.merge", id="1")
    p.send("/queue/book.merge", "marker", persistent="true")
    assert c.wait_for("marker") == [f"value of {keys[1]}", "marker"]
    c.close()
    p.close()


def test_a_stale_value_a_crash_left_stored_is_replaced_on_recovery(tmp_path) -> None:
    """A consumer holds A, B arrives: both are stored (A is not acknowledged). The
    broker is killed; on recovery only B is kept, A is replaced."""
    b = Broker(tmp_path, CONFIG)
    b.start()
    try:
        c = Client(b, "c")
        c.subscribe("/queue/prices.crash", id="1", ack="client-individual",
                    **{"activemq.prefetchSize": "1"})
        c.send("/queue/prices.crash", "A", persistent="true")
        assert c.wait(1) == ["A"]
        c.send("/queue/prices.crash", "B", persistent="true")  # stored when receipted
        b.kill()
    except BaseException:
        b.kill()
        raise
    b.start()
    try:
        c = Client(b, "after")
        c.subscribe("/queue/prices.crash", id="1")
        wait_until(lambda: c.messages, "the recovered value")
        assert c.bodies()[0] == "B"  # not A, the older value
        c.send("/queue/prices.crash", "marker", persistent="true")
        assert c.wait_for("marker") == ["B", "marker"]
        c.close()
    finally:
        b.stop()
