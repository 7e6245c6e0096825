"""Every redelivery counts against a Solace queue's `maxRedelivery`: one after a
rolled-back transaction (STOMP ABORT, an AMQP discharge with `fail`) as one after a
NACK or a consumer that left; a consumer the broker unbinds (a partition count
change) failed nothing and does not count. In a `relaymq run` process, over
stomp.py and proton."""

from __future__ import annotations

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")

from proton.utils import BlockingConnection  # noqa: E402
from relaymq_amqp.testing import TxClient  # noqa: E402

from .support import Broker, Client, broker_xml  # noqa: E402


def config(partitions: int = 2) -> str:
    return broker_xml("redeliveries", f"""
    <policyEntry queue="rb.>" deadMessageQueue="rb.DMQ" maxRedelivery="1" dmqEligible="true"/>
    <policyEntry queue="rbp.>" partitionCount="{partitions}" deadMessageQueue="rb.DMQ"
                 maxRedelivery="1" dmqEligible="true"/>""",
                      extra='<destinations><queue physicalName="rb.DMQ"/></destinations>')


CONFIG = config()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = Broker(tmp_path_factory.mktemp("redeliveries"), CONFIG)
    b.start()
    yield b
    b.stop()


def dead_messages(broker: Broker, marker: str) -> list[str]:
    """What the DMQ holds, read up to a marker sent to it."""
    dmq = Client(broker, "dmq")
    try:
        dmq.subscribe("/queue/rb.DMQ", id="1")
        dmq.send("/queue/rb.DMQ", marker)
        return dmq.wait_for(marker)[:-1]
    finally:
        dmq.close()


def test_stomp_aborts_count_against_max_redelivery(broker) -> None:
    """maxRedelivery 1: delivered, aborted, redelivered, aborted: the DMQ."""
    c = Client(broker, "c")
    c.subscribe("/queue/rb.stomp", id="1", ack="client-individual")
    c.send("/queue/rb.stomp", "poison", persistent="true")
    for n in range(2):
        assert c.wait(n + 1)[n] == "poison"
        assert c.messages[n].headers.get("redelivered", "false") == ("true" if n else "false")
        c.begin(f"t{n}")
        c.with_receipt(lambda rid, n=n: c.conn.ack(c.messages[n].headers["ack"],
                                                   transaction=f"t{n}", receipt=rid))
        c.abort(f"t{n}")
    assert dead_messages(broker, "stomp marker") == ["poison"]
    c.send("/queue/rb.stomp", "marker")
    assert c.wait_for("marker") == ["poison", "poison", "marker"]  # not a third time
    c.close()


def test_amqp_rollbacks_count_against_max_redelivery(broker) -> None:
    address = "queue://rb.amqp"
    conn = BlockingConnection(f"127.0.0.1:{broker.amqp_port}")
    try:
        tx = TxClient(conn)
        sender = conn.create_sender(address)
        sender.send(proton.Message(body="poison", durable=True))
        receiver = conn.create_receiver(address, credit=0)  # one message per receive()
        for n in range(2):
            m = receiver.receive(timeout=10)
            assert (m.body, m.delivery_count) == ("poison", n)
            txn = tx.declare()
            tx.accept(receiver, txn)
            tx.rollback(txn)
        sender.send(proton.Message(body="marker"))
        assert receiver.receive(timeout=10).body == "marker"  # not a third time
        receiver.accept()
    finally:
        conn.close()
    assert dead_messages(broker, "amqp marker") == ["poison"]


def test_a_partition_count_change_does_not_use_up_max_redelivery(broker) -> None:
    """maxRedelivery 1: delivered, its consumer unbound by a partition count change
    (not a failure), delivered again (redelivered), NACKed (the one redelivery
    allowed), delivered a third time, NACKed: the DMQ."""
    c = Client(broker, "c")
    c.subscribe("/queue/rbp.q", id="1", ack="client-individual")
    c.send("/queue/rbp.q", "held", JMSXGroupID="k", persistent="true")
    assert c.wait(1) == ["held"]
    broker.reload(config(partitions=3), "partition count changed from 2 to 3")
    assert "partition count changed from 2 to 3" in c.wait_error()
    d = Client(broker, "d")
    d.subscribe("/queue/rbp.q", id="1", ack="client-individual")
    for n in range(2):
        assert d.wait(n + 1)[n] == "held"
        assert d.messages[n].headers.get("redelivered") == "true"  # it was delivered before
        d.with_receipt(lambda rid, n=n: d.conn.nack(d.messages[n].headers["ack"], receipt=rid))
    assert dead_messages(broker, "partitioned marker") == ["held"]
    d.send("/queue/rbp.q", "marker", JMSXGroupID="k")
    assert d.wait_for("marker") == ["held", "held", "marker"]  # not a third time
    c.close()
    d.close()
