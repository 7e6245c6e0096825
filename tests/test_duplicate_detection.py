"""Duplicate detection (`_AMQ_DUPL_ID`) as users meet it: a `relaymq run` process on
kahaDB, STOMP and AMQP (python-qpid-proton) producers, kill -9 and restart.

A duplicate send is acknowledged (RECEIPT / `accepted`) and dropped; the ids are
stored with their messages, so a duplicate sent after a crash is still dropped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")

from proton import Delivery, Message  # noqa: E402 (after the skips)
from proton.utils import BlockingConnection, SendException  # noqa: E402
from relaymq.testing.store_brokers import STORES, StoreBrokerProcess, needs_store  # noqa: E402
from relaymq_stomp.testing import BlockingStomp  # noqa: E402

DUP = "_AMQ_DUPL_ID"


class Broker(StoreBrokerProcess):
    """kahaDB or JDBC (SQLite), STOMP and AMQP; queue SMALL remembers three ids."""

    def __init__(self, tmp: Path, store: str = "kahadb") -> None:
        super().__init__(tmp, store, "dups", body="""<destinationPolicy><policyMap><policyEntries>
    <policyEntry queue="SMALL" idCacheSize="3"/>
  </policyEntries></policyMap></destinationPolicy>""")


@pytest.fixture(params=STORES)
def broker(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    b = Broker(tmp_path, needs_store(request.param)).start()
    yield b
    b.kill()


def stomp_send(c: BlockingStomp, dest: str, body: str, dup: str, **headers: str) -> str:
    cmd, head, text = c.send(dest, body.encode(), **{DUP: dup}, **headers)
    assert cmd == "RECEIPT", (cmd, head, text)
    return cmd


def amqp_send(conn: BlockingConnection, address: str, body: str, dup: object) -> int:
    sender = conn.create_sender(address)
    try:
        d = sender.send(Message(body=body, durable=True, properties={DUP: dup}))
        return int(d.remote_state)
    finally:
        sender.close()


def drain_stomp(port: int, dest: str) -> list[str]:
    c = BlockingStomp(port)
    try:
        return [b.decode() for b in c.receive_all(dest)]
    finally:
        c.close()


def test_duplicates_are_dropped_over_stomp_and_amqp_also_after_kill_9(broker: Broker) -> None:
    s = BlockingStomp(broker.stomp)
    a = BlockingConnection(f"amqp://127.0.0.1:{broker.amqp}", timeout=10)
    try:
        stomp_send(s, "/queue/D", "stomp-1", "s-1")
        stomp_send(s, "/queue/D", "stomp-1 again", "s-1")  # receipted, dropped
        assert amqp_send(a, "queue://D", "amqp-1", "a-1") == Delivery.ACCEPTED
        assert amqp_send(a, "queue://D", "amqp-1 again", "a-1") == Delivery.ACCEPTED
        # the STOMP id "a-1" is the AMQP string id "a-1": one address, one cache
        stomp_send(s, "/queue/D", "stomp a-1", "a-1")
        # binary ids are compared by value, and differ from the string with those bytes
        assert amqp_send(a, "queue://D", "bin-1", b"s-1") == Delivery.ACCEPTED
        assert amqp_send(a, "queue://D", "bin-1 again", b"s-1") == Delivery.ACCEPTED
        # another address has its own ids
        stomp_send(s, "/queue/OTHER", "other s-1", "s-1")
    finally:
        s.close()
        a.close()
    broker.kill()
    broker.start()
    s = BlockingStomp(broker.stomp)
    a = BlockingConnection(f"amqp://127.0.0.1:{broker.amqp}", timeout=10)
    try:
        stomp_send(s, "/queue/D", "stomp-1 after restart", "s-1")
        assert amqp_send(a, "queue://D", "amqp-1 after restart", "a-1") == Delivery.ACCEPTED
        assert amqp_send(a, "queue://D", "bin after restart", b"s-1") == Delivery.ACCEPTED
        stomp_send(s, "/queue/D", "new after restart", "s-2")
    finally:
        s.close()
        a.close()
    assert drain_stomp(broker.stomp, "/queue/D") == ["stomp-1", "amqp-1", "bin-1",
                                                      "new after restart"]
    assert drain_stomp(broker.stomp, "/queue/OTHER") == ["other s-1"]


def test_full_id_cache_forgets_its_oldest_ids_across_restart(broker: Broker) -> None:
    s = BlockingStomp(broker.stomp)
    for i in range(5):  # idCacheSize="3": ids 0 and 1 leave the cache
        stomp_send(s, "/queue/SMALL", f"m{i}", f"id-{i}")
    s.close()
    broker.kill()
    broker.start()
    s = BlockingStomp(broker.stomp)
    for i in (4, 3, 2, 1, 0):  # newest first: 4, 3, 2 are held; 1 and 0 were forgotten
        stomp_send(s, "/queue/SMALL", f"again {i}", f"id-{i}")
    s.close()
    assert drain_stomp(broker.stomp, "/queue/SMALL") == [
        "m0", "m1", "m2", "m3", "m4", "again 1", "again 0"]


def test_duplicate_in_a_stomp_transaction_fails_the_commit_only(broker: Broker) -> None:
    s = BlockingStomp(broker.stomp)
    stomp_send(s, "/queue/TX", "before", "seen")
    s.frame("BEGIN", {"transaction": "t1"})
    s.frame("SEND", {"destination": "/queue/TX", "transaction": "t1", "persistent": "true",
                     DUP: "fresh"}, b"in tx")
    s.frame("SEND", {"destination": "/queue/TX", "transaction": "t1", "persistent": "true",
                     DUP: "seen"}, b"dup in tx")
    s.frame("COMMIT", {"transaction": "t1", "receipt": "c1"})
    cmd, headers, body = s.read()
    assert cmd == "ERROR" and "Duplicate message detected" in headers["message"], (headers, body)
    s.close()
    # nothing of it was applied: its new id is free again, the queue holds "before" only
    s = BlockingStomp(broker.stomp)
    stomp_send(s, "/queue/TX", "fresh now", "fresh")
    s.close()
    assert drain_stomp(broker.stomp, "/queue/TX") == ["before", "fresh now"]


def test_unsupported_id_type_refuses_that_transfer_only(broker: Broker) -> None:
    a = BlockingConnection(f"amqp://127.0.0.1:{broker.amqp}", timeout=10)
    try:
        sender = a.create_sender("queue://BAD")
        with pytest.raises(SendException) as err:
            sender.send(Message(body="int id", durable=True, properties={DUP: 42}))
        assert err.value.state == Delivery.REJECTED
        d = sender.link.send(Message(body="float id", durable=True, properties={DUP: 1.5}))
        a.wait(lambda: d.remote_state != 0, msg="no outcome")
        assert d.remote_state == Delivery.REJECTED
        assert d.remote.condition.name == "amqp:invalid-field"
        assert "_AMQ_DUPL_ID must be a string or a binary value, not float" in \
            d.remote.condition.description
        d.settle()
        d = sender.send(Message(body="fine", durable=True, properties={DUP: "42"}))
        assert d.remote_state == Delivery.ACCEPTED  # the link is still usable
        d = sender.send(Message(body="no id", durable=True))
        assert d.remote_state == Delivery.ACCEPTED
    finally:
        a.close()
    assert drain_stomp(broker.stomp, "/queue/BAD") == ["fine", "no id"]
