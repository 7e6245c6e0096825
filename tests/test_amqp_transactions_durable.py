"""AMQP transactions on a persistent store across kill -9: a `relaymq run` process on
kahaDB (or JDBC on SQLite) and python-qpid-proton clients that drive the transaction
coordinator as Qpid JMS's transacted session does.

A committed transactional acknowledgement is stored with the commit: after a crash
the message is gone (not redelivered) and the transaction's sends are there. A
transaction the crash interrupted never happened: its acknowledged messages are
delivered again after the restart and its sends are nowhere."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

# four `relaymq run` processes, each killed and started again
pytestmark = pytest.mark.slow

pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")

from proton import ConnectionException, Message  # noqa: E402 (after the skips)
from proton.utils import BlockingConnection  # noqa: E402
from relaymq.testing.store_brokers import STORES, StoreBrokerProcess, needs_store  # noqa: E402
from relaymq_amqp.testing import TxClient  # noqa: E402


class Broker(StoreBrokerProcess):
    """kahaDB or JDBC (SQLite), reached over AMQP."""

    def __init__(self, tmp: Path, store: str) -> None:
        super().__init__(tmp, store, "txd")

    def connect(self) -> BlockingConnection:
        return BlockingConnection(f"amqp://127.0.0.1:{self.amqp}", timeout=10)


@pytest.fixture(params=STORES)
def broker(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    b = Broker(tmp_path, needs_store(request.param)).start()
    yield b
    b.kill()


def fill(conn: BlockingConnection, address: str, *bodies: str) -> None:
    s = conn.create_sender(address)
    for body in bodies:
        s.send(Message(body=body, durable=True))  # returns once accepted (stored)
    s.close()


def drain(broker: Broker, address: str) -> list[str]:
    """Everything `address` holds, in order: a marker goes in behind it, and the
    bodies before the marker come back (each accepted)."""
    conn = broker.connect()
    try:
        fill(conn, address, "end")
        r = conn.create_receiver(address, credit=10)
        out: list[str] = []
        while not out or out[-1] != "end":
            out.append(r.receive(timeout=10).body)
            r.accept()
        return out[:-1]
    finally:
        conn.close()


def crash(broker: Broker, conn: BlockingConnection) -> None:
    """kill -9 with the client's connection open, then start the broker again."""
    broker.kill()
    # the client sees its connection drop with the broker; closed before that, proton
    # would wait its whole timeout for a close frame that cannot come
    with pytest.raises(ConnectionException):
        conn.wait(lambda: False, timeout=10, msg="the connection to drop with the broker")
    with contextlib.suppress(ConnectionException):  # a dropped connection says so
        conn.close()
    broker.start()


def test_committed_transactional_acknowledgement_survives_kill_9(broker: Broker) -> None:
    c = broker.connect()
    fill(c, "queue://TXD", "m1", "m2", "m3")
    tx = TxClient(c)
    r = c.create_receiver("queue://TXD", credit=2)
    s = c.create_sender("queue://TXD.OUT")
    t = tx.declare()
    assert [r.receive(timeout=10).body for _ in range(2)] == ["m1", "m2"]
    tx.accept(r, t)
    tx.accept(r, t, settle=True)
    tx.send(s, "out", t)
    tx.commit(t)  # answered once the acknowledgements and the send are stored
    crash(broker, c)
    assert drain(broker, "queue://TXD") == ["m3"]  # m1 and m2 are not redelivered
    assert drain(broker, "queue://TXD.OUT") == ["out"]


def test_uncommitted_transactional_acknowledgement_is_redelivered_after_kill_9(
        broker: Broker) -> None:
    c = broker.connect()
    fill(c, "queue://TXU", "m1", "m2", "m3")
    tx = TxClient(c)
    r = c.create_receiver("queue://TXU", credit=2)
    s = c.create_sender("queue://TXU.OUT")
    committed = tx.declare()  # one committed transaction first: only it is applied
    assert r.receive(timeout=10).body == "m1"
    tx.accept(r, committed)
    tx.send(s, "committed", committed)
    tx.commit(committed)
    pending = tx.declare()
    assert r.receive(timeout=10).body == "m2"
    tx.accept(r, pending, settle=True)  # settled by the client, yet only held
    tx.send(s, "never", pending)
    crash(broker, c)  # no discharge: the crash ends the transaction
    assert drain(broker, "queue://TXU") == ["m2", "m3"]
    assert drain(broker, "queue://TXU.OUT") == ["committed"]
