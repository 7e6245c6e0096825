"""AMQP local transactions with proton clients over real sockets: the coordinator,
transactional sends and acknowledgements, commit, rollback, lost controllers and
connections, and the bad inputs (unknown txn-ids)."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from proton import Delivery, Described, Endpoint, Message, symbol
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import Container
from proton.utils import LinkDetached
from relaymq_amqp.testing import REJECTED, RELEASED, TXN_STATE, Coordinator, TxClient, modified


def wait_for(cond: Any, client: Any, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        client.container.timeout = 0.01
        client.container.process()


def receive_bodies(conn: Any, address: str, n: int) -> list[str]:
    r = conn.create_receiver(address, credit=n)
    out = []
    for _ in range(n):
        out.append(r.receive(timeout=5).body)
        r.accept()
    r.close()
    return out


def fill(conn: Any, address: str, *bodies: str) -> None:
    s = conn.create_sender(address)
    for b in bodies:
        s.send(Message(body=b, durable=True))
    s.close()


def test_transactional_sends_commit_and_roll_back(connect: Any, amqp_broker: Any) -> None:
    c = connect()
    tx = TxClient(c)
    s = c.create_sender("queue://TXS")
    t1 = tx.declare()
    for body in ("a", "b"):
        d = tx.send(s, body, t1)
        assert d.remote_state == TXN_STATE  # transactional-state(txn, accepted)
        assert bytes(d.remote.data[0]) == t1
    assert amqp_broker.queue_size("TXS") == 0  # held until the commit
    tx.commit(t1)
    wait_for(lambda: amqp_broker.queue_size("TXS") == 2, c)
    t2 = tx.declare()
    assert t2 != t1
    tx.send(s, "rolled back", t2)
    tx.rollback(t2)
    s.send(Message(body="plain"))  # the link works outside transactions too
    assert receive_bodies(c, "queue://TXS", 3) == ["a", "b", "plain"]


def test_transactional_acknowledgements_commit_and_roll_back(connect: Any,
                                                              amqp_broker: Any) -> None:
    c = connect()
    fill(c, "queue://TXR", "m1", "m2", "m3")
    tx = TxClient(c)
    r = c.create_receiver("queue://TXR", credit=2)
    t1 = tx.declare()
    assert [r.receive(timeout=5).body for _ in range(2)] == ["m1", "m2"]
    tx.accept(r, t1)
    tx.accept(r, t1, settle=True)
    tx.rollback(t1)  # both return to the queue as redelivered
    r.close()
    wait_for(lambda: amqp_broker.queue_size("TXR") == 3, c)
    r = c.create_receiver("queue://TXR", credit=3)
    t2 = tx.declare()
    got = {m.body: m.delivery_count for m in (r.receive(timeout=5) for _ in range(3))}
    assert sorted(got) == ["m1", "m2", "m3"]
    assert got["m1"] >= 1 and got["m2"] >= 1  # redelivered after the rollback
    for _ in range(3):
        tx.accept(r, t2)
    assert amqp_broker.queue_size("TXR") == 3  # acknowledged only at the commit
    tx.commit(t2)
    wait_for(lambda: amqp_broker.queue_size("TXR") == 0, c)


def test_mixed_transactional_receive_and_send(connect: Any, amqp_broker: Any) -> None:
    """The consume-transform-produce loop of a transacted JMS session."""
    c = connect()
    fill(c, "queue://IN", "order-1", "order-2")
    tx = TxClient(c)
    r = c.create_receiver("queue://IN", credit=1)
    s = c.create_sender("queue://OUT")
    t1 = tx.declare()
    m = r.receive(timeout=5)
    tx.accept(r, t1)
    tx.send(s, m.body.upper(), t1)
    tx.rollback(t1)  # neither the acknowledgement nor the send happened
    wait_for(lambda: amqp_broker.queue_size("IN") == 2, c)
    assert amqp_broker.queue_size("OUT") == 0
    for _ in range(2):
        t = tx.declare()
        m = r.receive(timeout=5)
        tx.accept(r, t)
        tx.send(s, m.body.upper(), t)
        tx.commit(t)
    wait_for(lambda: amqp_broker.queue_size("IN") == 0, c)
    # (the receiver's extra credit may have fetched order-2 while order-1 was held)
    assert sorted(receive_bodies(c, "queue://OUT", 2)) == ["ORDER-1", "ORDER-2"]


def test_connection_drop_mid_transaction_rolls_back(connect: Any, amqp_broker: Any) -> None:
    from proton.utils import BlockingConnection

    c = BlockingConnection(amqp_broker.url(), timeout=10)
    fill(c, "queue://DROP.IN", "x")
    tx = TxClient(c)
    r = c.create_receiver("queue://DROP.IN", credit=1)
    s = c.create_sender("queue://DROP.OUT")
    t = tx.declare()
    assert r.receive(timeout=5).body == "x"
    tx.accept(r, t)
    tx.send(s, "never", t)
    c.conn.transport.close_tail()  # the socket goes away without a close frame
    c.conn.transport.close_head()
    other = connect()
    r2 = other.create_receiver("queue://DROP.IN", credit=1)
    end = time.monotonic() + 10
    while not r2.fetcher.has_message:
        if time.monotonic() >= end:  # a bounded wait, not a timing check
            raise AssertionError("the held acknowledgement was not rolled back")
        for client in (c, other):  # the dropped client's loop closes its socket
            client.container.timeout = 0.01
            client.container.process()
    got = r2.receive(timeout=1)
    assert got.body == "x" and got.delivery_count == 1  # back on its queue, redelivered
    r2.accept()
    assert amqp_broker.queue_size("DROP.OUT") == 0  # the send was rolled back too


def test_closing_the_controller_rolls_its_transactions_back(connect: Any,
                                                           amqp_broker: Any) -> None:
    c = connect()
    tx = TxClient(c)
    s = c.create_sender("queue://CTRL")
    t = tx.declare()
    tx.send(s, "pending", t)
    tx.ctrl.close()
    tx2 = TxClient(c)
    d = tx2.discharge(t)  # it was rolled back with its controller
    assert d.remote_state == Delivery.REJECTED
    assert d.remote.condition.name == "amqp:transaction:unknown-id"
    d = tx2.send(s, "late", t)  # and a transfer naming it is refused
    assert d.remote_state == Delivery.REJECTED
    assert amqp_broker.queue_size("CTRL") == 0


def test_ending_the_controllers_session_rolls_back(connect: Any, amqp_broker: Any) -> None:
    c = connect()
    ssn = c.conn.session()
    ssn.open()
    ctrl = ssn.sender("ctrl-in-own-session")
    Coordinator().apply(ctrl)
    ctrl.open()
    producer = ssn.sender("producer-in-own-session")
    producer.target.address = "queue://SSNTX"
    producer.open()
    c.wait(lambda: bool(producer.state & Endpoint.REMOTE_ACTIVE and producer.credit),
           msg="links not attached")
    d = ctrl.send(Message(body=Described(symbol("amqp:declare:list"), [None])))
    c.wait(lambda: d.remote_state != 0, msg="no declared")
    txn = bytes(d.remote.data[0])
    sent = producer.send(Message(body="in a session that ends"))
    sent.local.data = [txn]
    sent.update(TXN_STATE)
    c.wait(lambda: sent.remote_state != 0, msg="no answer to the transfer")
    ssn.close()

    def ended() -> bool:  # closed by the broker, and each close seen by the client
        return all(e.state & Endpoint.REMOTE_CLOSED and not e.state & Endpoint.LOCAL_ACTIVE
                   for e in (ssn, ctrl, producer))

    while not ended():
        with contextlib.suppress(LinkDetached):  # the broker ends the session's links
            c.wait(ended, msg="session not ended")
    d = TxClient(c).discharge(txn)
    assert d.remote.condition.name == "amqp:transaction:unknown-id"
    assert amqp_broker.queue_size("SSNTX") == 0


def test_unknown_txn_ids_are_clear_errors_on_that_link_only(connect: Any,
                                                           amqp_broker: Any) -> None:
    c = connect()
    tx = TxClient(c)
    s = c.create_sender("queue://BADTX")
    t = tx.declare()
    tx.send(s, "kept", t)
    tx.commit(t)
    d = tx.discharge(b"no-such-txn")
    assert d.remote_state == Delivery.REJECTED
    assert d.remote.condition.name == "amqp:transaction:unknown-id"
    d = tx.discharge(t)  # discharged already
    assert d.remote.condition.name == "amqp:transaction:unknown-id"
    d = tx.send(s, "to a closed transaction", t)
    assert d.remote_state == Delivery.REJECTED
    assert d.remote.condition.name == "amqp:transaction:unknown-id"
    assert "not active" in d.remote.condition.description
    # the coordinator, the producer link and the connection all still work
    t2 = tx.declare()
    tx.send(s, "next", t2)
    tx.commit(t2)
    s.send(Message(body="plain"))
    assert receive_bodies(c, "queue://BADTX", 3) == ["kept", "next", "plain"]


@pytest.mark.parametrize("txn_state", ["never declared", "committed", "rolled back"])
def test_acknowledgement_in_an_unknown_transaction_closes_that_consumer_only(
        connect: Any, amqp_broker: Any, txn_state: str) -> None:
    c = connect()
    fill(c, "queue://BADACK", "first", "m", "kept")
    tx = TxClient(c)
    s = c.create_sender("queue://BADACK.OUT")
    txn = b"never-declared"
    if txn_state != "never declared":  # a transaction that existed and was discharged
        txn = tx.declare()
        tx.send(s, "sent in it", txn)
        (tx.rollback if txn_state == "rolled back" else tx.commit)(txn)
    good = tx.declare()
    r = c.create_receiver("queue://BADACK", credit=2)
    assert [r.receive(timeout=5).body for _ in range(2)] == ["first", "m"]
    tx.accept(r, good)  # "first", in an active transaction
    tx.accept(r, txn)  # "m", in one that is not
    with pytest.raises(LinkDetached, match="amqp:transaction:unknown-id") as info:
        wait_for(lambda: False, c)
    assert "not active" in str(info.value)
    # nothing accepted is lost: the good transaction still holds "first" and commits
    # it; "m" is back; the producer link, the coordinator and the connection work
    tx.send(s, "after", good)
    tx.commit(good)
    fill(c, "queue://BADACK", "after")
    other = connect()
    assert receive_bodies(other, "queue://BADACK", 3) == ["m", "kept", "after"]
    out = ["sent in it", "after"] if txn_state == "committed" else ["after"]
    assert receive_bodies(other, "queue://BADACK.OUT", len(out)) == out  # in order


@pytest.mark.parametrize("fail", [False, True])
def test_consumer_closed_before_the_discharge(connect: Any, amqp_broker: Any,
                                              fail: bool) -> None:
    """Acknowledgements held by a transaction outlive their consumer link, as in a JMS
    transacted session whose consumer closes before the commit: the commit removes
    the messages, a rollback puts them back (redelivered)."""
    c = connect()
    fill(c, "queue://CLOSED", "m1", "m2", "m3")
    tx = TxClient(c)
    r = c.create_receiver("queue://CLOSED", credit=2)
    t = tx.declare()
    assert [r.receive(timeout=5).body for _ in range(2)] == ["m1", "m2"]
    tx.accept(r, t)
    r.close()  # m2 was not acknowledged: it goes back now
    wait_for(lambda: amqp_broker.queue_size("CLOSED") == 3, c)  # m1 is still held
    (tx.rollback if fail else tx.commit)(t)
    if fail:
        r = c.create_receiver("queue://CLOSED", credit=3)
        got = [r.receive(timeout=5) for _ in range(3)]
        assert [m.body for m in got] == ["m1", "m2", "m3"]
        assert got[0].delivery_count >= 1  # redelivered after the rollback
        for _ in got:
            r.accept()
    else:
        wait_for(lambda: amqp_broker.queue_size("CLOSED") == 2, c)
        assert receive_bodies(c, "queue://CLOSED", 2) == ["m2", "m3"]
    wait_for(lambda: amqp_broker.queue_size("CLOSED") == 0, c)


def test_duplicate_inside_a_transaction_fails_the_commit(connect: Any, amqp_broker: Any) -> None:
    c = connect()
    s = c.create_sender("queue://TXDUP")
    s.send(Message(body="first", properties={"_AMQ_DUPL_ID": "d1"}))
    tx = TxClient(c)
    t = tx.declare()
    tx.send(s, "new", t, _AMQ_DUPL_ID="d2")
    tx.send(s, "dup", t, _AMQ_DUPL_ID="d1")
    d = tx.discharge(t)
    assert d.remote_state == Delivery.REJECTED
    assert d.remote.condition.name == "amqp:transaction:rollback"
    assert "Duplicate message detected" in d.remote.condition.description
    s.send(Message(body="d2 again", properties={"_AMQ_DUPL_ID": "d2"}))  # d2 was forgotten
    assert receive_bodies(c, "queue://TXDUP", 2) == ["first", "d2 again"]


class TxSend(MessagingHandler, TransactionHandler):
    """proton's examples/python/tx_send.py: batches of messages, each batch committed."""

    def __init__(self, url: str, address: str, batches: int, batch_size: int) -> None:
        super().__init__()
        self.url, self.address = url, address
        self.batches, self.batch_size = batches, batch_size
        self.current = 0
        self.committed = 0
        self.transaction: Any = None
        self.sender: Any = None
        self.container: Any = None

    def on_start(self, event: Any) -> None:
        self.container = event.container
        conn = self.container.connect(self.url)
        self.sender = self.container.create_sender(conn, self.address)
        self.container.declare_transaction(conn, handler=self)

    def on_transaction_declared(self, event: Any) -> None:
        self.transaction = event.transaction
        self.current = 0
        self.send()

    def on_sendable(self, event: Any) -> None:
        self.send()

    def send(self) -> None:
        while (self.transaction and self.sender.credit and self.current < self.batch_size):
            body = f"b{self.committed}-m{self.current}"
            self.transaction.send(self.sender, Message(body=body, durable=True))
            self.current += 1
        if self.transaction and self.current == self.batch_size:
            self.transaction.commit()
            self.transaction = None

    def on_transaction_committed(self, event: Any) -> None:
        self.committed += 1
        if self.committed == self.batches:
            event.connection.close()
        else:
            self.container.declare_transaction(event.connection, handler=self)


class TxRecv(MessagingHandler, TransactionHandler):
    """proton's examples/python/tx_recv.py: receive and accept in transactions."""

    def __init__(self, url: str, address: str, expected: int, batch_size: int) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.url, self.address = url, address
        self.expected, self.batch_size = expected, batch_size
        self.current = 0
        self.received: list[str] = []
        self.transaction: Any = None
        self.receiver: Any = None
        self.container: Any = None
        self.conn: Any = None

    def on_start(self, event: Any) -> None:
        self.container = event.container
        self.conn = self.container.connect(self.url)
        self.receiver = self.container.create_receiver(self.conn, self.address)
        self.container.declare_transaction(self.conn, handler=self)

    def on_message(self, event: Any) -> None:
        self.received.append(event.message.body)
        self.transaction.accept(event.delivery)
        self.current += 1
        if self.current == self.batch_size:
            self.transaction.commit()
            self.transaction = None

    def on_transaction_declared(self, event: Any) -> None:
        self.receiver.flow(self.batch_size)
        self.transaction = event.transaction

    def on_transaction_committed(self, event: Any) -> None:
        self.current = 0
        if len(self.received) >= self.expected:
            self.conn.close()
        else:
            self.container.declare_transaction(self.conn, handler=self)


def test_proton_transaction_examples_round_trip(amqp_broker: Any) -> None:
    url = amqp_broker.url()
    sender = TxSend(url, "queue://EXAMPLES", batches=4, batch_size=5)
    Container(sender).run()
    assert sender.committed == 4
    assert amqp_broker.queue_size("EXAMPLES") == 20
    receiver = TxRecv(url, "queue://EXAMPLES", expected=20, batch_size=5)
    Container(receiver).run()
    assert receiver.received == [f"b{b}-m{m}" for b in range(4) for m in range(5)]
    assert amqp_broker.queue_size("EXAMPLES") == 0



def _raw_receiver(peer: Any, name: str, handle: int, address: str) -> bytes:
    from relaymq_amqp.encode import frame, performative
    from relaymq_amqp.types import Described as AmqpDescribed
    from relaymq_amqp.types import UInt, ULong

    source = AmqpDescribed(ULong(0x28), [address])
    target = AmqpDescribed(ULong(0x29), [None])
    return frame(performative(0x12, [name, UInt(handle), True, None, None, source, target]))


def _raw_flow(handle: int, credit: int, txn: bytes | None = None) -> bytes:
    from relaymq_amqp.encode import frame, performative
    from relaymq_amqp.types import Symbol, UInt

    props = {Symbol("txn-id"): txn} if txn is not None else None
    return frame(performative(0x13, [UInt(0), UInt(100), UInt(0), UInt(100), UInt(handle),
                                     UInt(0), UInt(credit), None, None, None, props]))


def _frames_until(peer: Any, descriptor: int) -> list[Any]:
    """Performatives the broker sends until one with `descriptor` (bounded by the socket
    timeout; raises when the connection closes first)."""
    peer.sock.settimeout(5)
    out = []
    while not out or out[-1] is None or out[-1].descriptor != descriptor:
        out.append(peer.read_frame()[1])
    return [f for f in out if f is not None]


@pytest.mark.parametrize("when", ["with its attach", "after deliveries"])
def test_transactional_acquisition_is_refused_on_that_link_only(amqp_broker: Any, connect: Any,
                                                                 when: str) -> None:
    """A flow carrying txn-id (AMQP 1.0 4.4.3) asks for transactional acquisition, which
    RelayMQ (like Artemis) does not support: that consumer link is closed with
    amqp:not-implemented before the flow's credit takes effect. Proton clients have no API
    to send one, so a raw peer does. Nothing is lost (a delivery the link held goes back
    to its queue, redelivered) and the connection carries on."""
    from relaymq_amqp.encode import frame, performative
    from relaymq_amqp.types import UInt

    from .raw_peer import RawPeer

    other = connect()
    fill(other, "queue://txacq", "kept")
    peer = RawPeer(amqp_broker.address())
    try:
        peer.open_amqp()
        peer.send(frame(performative(0x11, [None, UInt(0), UInt(100), UInt(100)])))  # begin
        attach = _raw_receiver(peer, "rx", 0, "queue://txacq")
        if when == "with its attach":
            peer.send(attach + _raw_flow(0, 10, b"txn:1"))  # one write: before it is attached
        else:
            peer.send(attach + _raw_flow(0, 1))
            got = _frames_until(peer, 0x14)  # the message, unsettled
            peer.send(_raw_flow(0, 10, b"txn:1"))
        got = _frames_until(peer, 0x16)
        assert not [f for f in got if f.descriptor == 0x14]  # no delivery on that flow
        detach = got[-1]
        assert detach.value[0] == 0 and detach.value[1] is True  # handle 0, closed
        error = detach.value[2].value
        assert error[0] == "amqp:not-implemented"
        assert "transactional acquisition" in error[1]
        # the connection and its session go on: another receiver gets the message
        peer.send(frame(performative(0x16, [UInt(0), True])))  # the detach's answer
        peer.send(_raw_receiver(peer, "rx2", 1, "queue://txacq") + _raw_flow(1, 1))
        got = _frames_until(peer, 0x14)
        attached = [f for f in got if f.descriptor == 0x12 and f.value[0] == "rx2"]
        assert attached and got[-1].value[0] == attached[0].value[1]  # rx2's delivery
    finally:
        peer.sock.close()  # its unsettled delivery returns to the queue
    r = other.create_receiver("queue://txacq", credit=1)
    m = r.receive(timeout=5)
    assert m.body == "kept"
    assert m.delivery_count == (2 if when == "after deliveries" else 1)
    r.accept()


def test_transactional_acquisition_naming_no_link_closes_the_connection(
        amqp_broker: Any, connect: Any) -> None:
    """A txn-id flow for a handle that names no attached receiver: the connection is
    closed with amqp:not-implemented; other connections carry on."""
    from relaymq_amqp.encode import frame, performative
    from relaymq_amqp.types import UInt

    from .raw_peer import RawPeer, close_condition

    other = connect()
    fill(other, "queue://txacq2", "kept")
    peer = RawPeer(amqp_broker.address())
    try:
        peer.open_amqp()
        peer.send(frame(performative(0x11, [None, UInt(0), UInt(100), UInt(100)])))  # begin
        peer.send(_raw_flow(7, 10, b"txn:1"))
        frames = peer.frames_until_closed()
    finally:
        peer.sock.close()
    assert close_condition(frames) == "amqp:not-implemented"
    assert receive_bodies(other, "queue://txacq2", 1) == ["kept"]


def test_topic_subscription_acknowledgements_commit_and_roll_back(connect: Any,
                                                                  amqp_broker: Any) -> None:
    """A subscription's deliveries take part in transactions as a queue's do: a rollback
    redelivers on the subscription, a commit removes them."""
    c = connect()
    tx = TxClient(c)
    r = c.create_receiver("topic://TXT", credit=2)
    fill(c, "topic://TXT", "t1", "t2")
    t = tx.declare()
    assert [r.receive(timeout=5).body for _ in range(2)] == ["t1", "t2"]
    tx.accept(r, t)
    tx.accept(r, t)
    tx.rollback(t)
    again = [r.receive(timeout=5) for _ in range(2)]
    assert [(m.body, m.delivery_count) for m in again] == [("t1", 1), ("t2", 1)]
    t = tx.declare()
    tx.accept(r, t)
    tx.accept(r, t)
    tx.commit(t)
    fill(c, "topic://TXT", "t3")
    assert r.receive(timeout=5).body == "t3"  # t1 and t2 are not delivered a third time
    r.accept()


def test_consume_transform_produce_is_exactly_once_across_rollbacks(connect: Any,
                                                                    amqp_broker: Any) -> None:
    """A transacted JMS session's loop, rolled back at random (seeded): every input
    message ends up in the output exactly once, each rolled-back one redelivered."""
    import random

    rng = random.Random(16)
    c = connect()
    bodies = [f"in-{i}" for i in range(30)]
    fill(c, "queue://LOOP.IN", *bodies)
    tx = TxClient(c)
    r = c.create_receiver("queue://LOOP.IN", credit=1)
    s = c.create_sender("queue://LOOP.OUT")
    rolled_back: set[str] = set()
    committed: list[str] = []
    while len(committed) < len(bodies):
        t = tx.declare()
        m = r.receive(timeout=5)
        assert (m.delivery_count > 0) == (m.body in rolled_back), (m.body, m.delivery_count)
        tx.accept(r, t)
        tx.send(s, m.body.replace("in-", "out-"), t)
        if rng.random() < 0.3:
            tx.rollback(t)
            rolled_back.add(m.body)
        else:
            tx.commit(t)
            committed.append(m.body)
    assert rolled_back and sorted(committed) == sorted(bodies)
    wait_for(lambda: amqp_broker.queue_size("LOOP.IN") == 0, c)
    assert amqp_broker.queue_size("LOOP.OUT") == len(bodies)
    out = receive_bodies(c, "queue://LOOP.OUT", len(bodies))
    assert out == [b.replace("in-", "out-") for b in committed]  # in commit order


def _settle_four_in(tx: Any, c: Any, amqp_broker: Any, queue: str) -> tuple[Any, bytes]:
    """m1..m4 on `queue`, received, then settled inside one transaction: released,
    modified (delivery-failed), rejected, modified (undeliverable-here). Returns the
    receiver and the transaction once the broker has taken the dispositions."""
    fill(c, f"queue://{queue}", "m1", "m2", "m3", "m4")
    r = c.create_receiver(f"queue://{queue}", credit=4)
    assert [r.receive(timeout=5).body for _ in range(4)] == ["m1", "m2", "m3", "m4"]
    t = tx.declare()
    answers = [tx.settle_in(r, t, RELEASED), tx.settle_in(r, t, modified(failed=True)),
               tx.settle_in(r, t, REJECTED), tx.settle_in(r, t, modified(undeliverable=True))]
    tx.declare()  # answered after the dispositions before it were handled
    for d, outcome in zip(answers, (RELEASED, modified(True), REJECTED, modified(False, True)),
                          strict=True):
        assert d.remote_state == TXN_STATE  # transactional-state(txn, the outcome)
        assert bytes(d.remote.data[0]) == t
        assert d.remote.data[1].descriptor == outcome.descriptor
    # nothing is applied before the discharge: all four are still held
    stats = amqp_broker.stats(f"queue://{queue}")
    assert stats["in_flight"] == 4 and amqp_broker.queue_size(queue) == 4, stats
    assert amqp_broker.queue_size("ActiveMQ.DLQ") == 0
    return r, t


def test_released_modified_rejected_take_effect_at_commit(connect: Any, amqp_broker: Any) -> None:
    """AMQP 1.0 §4.4.2: an outcome in a transactional state takes effect at discharge.
    At commit each applies as it would outside a transaction: released and modified
    (delivery-failed) go back to the queue, rejected and undeliverable-here go to the DLQ."""
    c = connect()
    tx = TxClient(c)
    r, t = _settle_four_in(tx, c, amqp_broker, "TXO")
    r.close()  # (its refilled credit would fetch what comes back); the outcomes stay held
    tx.commit(t)
    wait_for(lambda: amqp_broker.queue_size("ActiveMQ.DLQ") == 2, c)
    assert amqp_broker.queue_size("TXO") == 2
    r = c.create_receiver("queue://TXO", credit=2)
    got = [r.receive(timeout=5) for _ in range(2)]
    r.accept()
    r.accept()
    assert [m.body for m in got] == ["m1", "m2"]
    assert got[0].delivery_count == 0  # released: not a delivery attempt
    assert got[1].delivery_count == 1  # modified with delivery-failed: counted
    assert sorted(receive_bodies(c, "queue://ActiveMQ.DLQ", 2)) == ["m3", "m4"]
    wait_for(lambda: amqp_broker.queue_size("TXO") == 0, c)


def test_released_modified_rejected_are_discarded_by_rollback(connect: Any,
                                                            amqp_broker: Any) -> None:
    """A rollback discards the outcomes: every delivery goes back to its queue as
    redelivered (like a rolled-back acknowledgement); nothing reaches the DLQ."""
    c = connect()
    tx = TxClient(c)
    r, t = _settle_four_in(tx, c, amqp_broker, "TXD")
    r.close()
    tx.rollback(t)
    wait_for(lambda: amqp_broker.stats("queue://TXD")["in_flight"] == 0, c)
    assert amqp_broker.queue_size("TXD") == 4
    assert amqp_broker.queue_size("ActiveMQ.DLQ") == 0
    r = c.create_receiver("queue://TXD", credit=4)
    got = [r.receive(timeout=5) for _ in range(4)]
    for _ in got:
        r.accept()
    assert [m.body for m in got] == ["m1", "m2", "m3", "m4"]
    assert all(m.delivery_count >= 1 for m in got)
    wait_for(lambda: amqp_broker.queue_size("TXD") == 0, c)


def test_transactional_outcomes_outlive_their_consumer_link(connect: Any,
                                                           amqp_broker: Any) -> None:
    """Like transactional acknowledgements, outcomes held by a transaction stay with
    it when the consumer link closes first; the commit then applies them."""
    c = connect()
    tx = TxClient(c)
    fill(c, "queue://TXL", "m1", "m2")
    r = c.create_receiver("queue://TXL", credit=2)
    assert [r.receive(timeout=5).body for _ in range(2)] == ["m1", "m2"]
    t = tx.declare()
    tx.settle_in(r, t, REJECTED)
    r.close()  # m2 was not settled: back to the queue now; m1 stays with the transaction
    wait_for(lambda: amqp_broker.stats("queue://TXL")["in_flight"] == 1, c)
    assert amqp_broker.queue_size("ActiveMQ.DLQ") == 0
    tx.commit(t)
    wait_for(lambda: amqp_broker.queue_size("ActiveMQ.DLQ") == 1, c)
    assert receive_bodies(c, "queue://ActiveMQ.DLQ", 1) == ["m1"]
    assert receive_bodies(c, "queue://TXL", 1) == ["m2"]
