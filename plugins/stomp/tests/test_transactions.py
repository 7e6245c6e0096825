"""BEGIN / COMMIT / ABORT with transacted SEND, ACK and NACK."""

from __future__ import annotations

from relaymq.config.model import PluginElement
from relaymq.testing import broker_config, wait_until
from relaymq.testing.barriers import stomp_before_marker

from .conftest import BrokerThread, subscribe


def test_transacted_send_visible_on_commit(server: BrokerThread, client) -> None:
    conn, col = client()
    cons, ccol = client()
    subscribe(cons, ccol, "/queue/tx", id="1")
    conn.begin("t1")
    conn.send("/queue/tx", "a", transaction="t1")
    conn.send("/queue/tx", "b", transaction="t1", receipt="sb")
    assert col.wait_receipt("sb")
    assert server.queue_size("tx") == 0  # nothing routed before the commit
    # a marker outside the transaction overtakes the transacted sends
    assert stomp_before_marker(conn, ccol, "/queue/tx") == []
    seen = len(ccol.messages)
    conn.commit("t1", receipt="c")
    assert col.wait_receipt("c")
    assert stomp_before_marker(conn, ccol, "/queue/tx", since=seen) == ["a", "b"]


def test_abort_discards_sends(server: BrokerThread, client) -> None:
    conn, col = client()
    conn.begin("t2")
    conn.send("/queue/txa", "a", transaction="t2")
    conn.abort("t2", receipt="ab")
    assert col.wait_receipt("ab")
    conn.send("/queue/txa", "after", receipt="s")
    assert col.wait_receipt("s")
    assert server.queue_size("txa") == 1


def test_transacted_ack_abort_redelivers(server: BrokerThread, client) -> None:
    conn, col = client()
    conn.subscribe("/queue/txack", id="1", ack="client-individual")
    conn.send("/queue/txack", "x")
    m = col.wait_messages(1)[0]
    conn.begin("t3")
    conn.ack(m.headers["ack"], transaction="t3")
    conn.abort("t3", receipt="a")
    assert col.wait_receipt("a")
    m2 = col.wait_messages(2)[1]
    assert m2.headers["redelivered"] == "true"
    conn.begin("t4")
    conn.ack(m2.headers["ack"], transaction="t4")
    assert server.queue_size("txack") == 1  # not yet
    conn.commit("t4", receipt="c")
    assert col.wait_receipt("c")
    assert server.wait_queue_size("txack", 0) == 0


def test_client_ack_in_transaction_is_cumulative(server: BrokerThread, client) -> None:
    conn, col = client()
    conn.subscribe("/queue/txcum", id="1", ack="client")
    for i in range(3):
        conn.send("/queue/txcum", str(i))
    msgs = col.wait_messages(3)
    conn.begin("t")
    conn.ack(msgs[1].headers["ack"], transaction="t")
    conn.commit("t", receipt="c")
    assert col.wait_receipt("c")
    assert server.wait_queue_size("txcum", 1) == 1


def test_nack_in_transaction_applies_on_commit(server: BrokerThread, client) -> None:
    conn, col = client()
    conn.subscribe("/queue/txn", id="1", ack="client-individual")
    conn.send("/queue/txn", "x", headers={"persistent": "true"})
    m = col.wait_messages(1)[0]
    conn.begin("t")
    conn.nack(m.headers["ack"], transaction="t", receipt="n")
    assert col.wait_receipt("n")  # the NACK was handled: held in the transaction
    assert server.queue_size("ActiveMQ.DLQ") == 0
    conn.commit("t")
    assert server.wait_queue_size("ActiveMQ.DLQ", 1) == 1


def test_unknown_transaction_keeps_connection(raw) -> None:
    c = raw()
    c.connect()
    for frame in ("SEND\ndestination:/queue/u\ntransaction:nope\nreceipt:r\n\nx\x00",
                  "COMMIT\ntransaction:nope\nreceipt:r\n\n\x00",
                  "ABORT\ntransaction:nope\nreceipt:r\n\n\x00",
                  "BEGIN\nreceipt:r\n\n\x00"):
        c.send(frame)
        cmd, h, _ = c.read()
        assert cmd == "ERROR" and h["receipt-id"] == "r", frame
    c.send("BEGIN\ntransaction:t\n\n\x00")
    c.send("BEGIN\ntransaction:t\nreceipt:dup\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and h["receipt-id"] == "dup"
    c.send("COMMIT\ntransaction:t\nreceipt:ok\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "ok"})


def test_disconnect_rolls_back_open_transaction(server: BrokerThread, client) -> None:
    conn, col = client()
    conn.begin("t")
    conn.send("/queue/txd", "lost", transaction="t", receipt="s")
    assert col.wait_receipt("s")
    conn.disconnect()
    wait_until(lambda: not server.call(lambda: server.broker.connections),
               "the broker to drop the connection")
    assert server.queue_size("txd") == 0


def test_aborted_acks_count_against_the_redelivery_policy(start_broker, client) -> None:
    """ActiveMQ's redelivery policy counts rollbacks: with maximumRedeliveries 1 the
    second ABORT of a message's acknowledgement sends it to the DLQ."""
    policy = PluginElement("redeliveryPolicy", {"maximumRedeliveries": "1",
                                                "initialRedeliveryDelay": "0"})
    plugin = PluginElement("redeliveryPlugin", {}, [PluginElement("redeliveryPolicyMap", {}, [
        PluginElement("redeliveryPolicyMap", {}, [PluginElement("defaultEntry", {}, [policy])])])])
    server = start_broker(config=broker_config("stomp://127.0.0.1:0", plugins=[plugin]))
    conn, col = client(bt=server)
    subscribe(conn, col, "/queue/txmax", id="1", ack="client-individual")
    conn.send("/queue/txmax", "poison", headers={"persistent": "true"})
    for n in range(2):
        m = col.wait_messages(n + 1)[n]
        assert m.headers.get("redelivered", "false") == ("true" if n else "false")
        conn.begin(f"t{n}")
        conn.ack(m.headers["ack"], transaction=f"t{n}")
        conn.abort(f"t{n}", receipt=f"a{n}")
        assert col.wait_receipt(f"a{n}")
    wait_until(lambda: server.queue_size("ActiveMQ.DLQ") == 1, "the copy in ActiveMQ.DLQ")
    assert stomp_before_marker(conn, col, "/queue/txmax", since=2) == []  # no third delivery
