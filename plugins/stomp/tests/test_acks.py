"""Ack modes, ACK/NACK by the `ack` header (and by message-id for 1.0/1.1),
prefetch, redelivery and dead-lettering."""

from __future__ import annotations

import time

import pytest
from relaymq.dispatch.redelivery import RedeliveryPlugin
from relaymq.testing import plugin_element

from .conftest import BrokerThread, connect, subscribe


def _send_n(conn, dest: str, n: int, **headers: str) -> None:
    for i in range(n):
        conn.send(dest, f"m{i}", headers=dict(headers))


def test_auto_ack_consumes(server: BrokerThread, client) -> None:
    conn, col = client()
    conn.subscribe("/queue/auto", id="1", ack="auto")
    _send_n(conn, "/queue/auto", 5)
    assert len(col.wait_messages(5)) == 5
    assert server.wait_queue_size("auto", 0) == 0
    conn.disconnect()
    c2, col2 = client()
    subscribe(c2, col2, "/queue/auto", id="1")
    c2.send("/queue/auto", "marker")  # anything left on the queue would come before it
    assert [m.body for m in col2.wait_messages(1)] == ["marker"]


def test_client_ack_is_cumulative(server: BrokerThread, client) -> None:
    conn, col = client()
    conn.subscribe("/queue/cum", id="1", ack="client")
    _send_n(conn, "/queue/cum", 3)
    msgs = col.wait_messages(3)
    assert all("redelivered" not in m.headers for m in msgs)
    conn.ack(msgs[1].headers["ack"], receipt="a1")
    assert col.wait_receipt("a1")
    assert server.wait_queue_size("cum", 1) == 1
    conn.disconnect()
    c2, col2 = client()
    c2.subscribe("/queue/cum", id="2", ack="client")
    m = col2.wait_messages(1)[0]
    assert m.body == "m2" and m.headers["redelivered"] == "true"
    assert m.headers["message-id"] == msgs[2].headers["message-id"]


def test_client_individual_ack(server: BrokerThread, client) -> None:
    conn, col = client()
    conn.subscribe("/queue/ind", id="1", ack="client-individual")
    _send_n(conn, "/queue/ind", 3)
    msgs = col.wait_messages(3)
    conn.ack(msgs[1].headers["ack"], receipt="a")
    assert col.wait_receipt("a")
    assert server.wait_queue_size("ind", 2) == 2
    conn.disconnect()
    c2, col2 = client()
    c2.subscribe("/queue/ind", id="1", ack="client-individual")
    assert sorted(m.body for m in col2.wait_messages(2)) == ["m0", "m2"]


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_ack_by_message_id(server: BrokerThread, version: str) -> None:
    conn, col = connect(server, version)
    if version == "1.0":
        conn.subscribe("/queue/old", id="s", ack="client")
    else:
        conn.subscribe("/queue/old", id="s", ack="client")
    conn.send("/queue/old", "x")
    m = col.wait_messages(1)[0]
    if version == "1.0":
        conn.ack(m.headers["message-id"], receipt="r")
    else:
        conn.ack(m.headers["message-id"], "s", receipt="r")
    assert col.wait_receipt("r")
    assert not col.errors
    assert server.wait_queue_size("old", 0) == 0
    conn.disconnect()


def test_unknown_ack_id_keeps_connection(raw) -> None:
    c = raw()
    c.connect()
    c.send("ACK\nid:nope-1\nreceipt:r\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and h["receipt-id"] == "r" and "ack" in h["message"].lower()
    c.send("ACK\nid:99-99\n\n\x00")
    assert c.read()[0] == "ERROR"
    c.send("NACK\nmessage-id:ID:foo\n\n\x00")
    assert c.read()[0] == "ERROR"
    c.send("SEND\ndestination:/queue/ok\nreceipt:ok\n\nx\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "ok"})


def test_nack_on_a_stomp_10_connection_is_an_error(server: BrokerThread, raw) -> None:
    """STOMP 1.0 has no NACK: ActiveMQ answers ERROR, the message stays delivered
    (nothing is dead-lettered) and the connection stays."""
    c = raw()
    c.connect("host:x\n")  # no accept-version: STOMP 1.0
    c.send("SUBSCRIBE\ndestination:/queue/nack10\nid:1\nack:client\n\n\x00")
    c.send("SEND\ndestination:/queue/nack10\npersistent:true\n\nx\x00")
    _, h, _ = c.read()
    c.send(f"NACK\nmessage-id:{h['message-id']}\nreceipt:n\n\n\x00")
    cmd, eh, _ = c.read()
    assert cmd == "ERROR" and eh["receipt-id"] == "n" and "NACK" in eh["message"]
    assert server.queue_size("ActiveMQ.DLQ") == 0
    c.send(f"ACK\nmessage-id:{h['message-id']}\nreceipt:a\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "a"})
    assert server.wait_queue_size("nack10", 0) == 0


def test_double_ack_is_an_error(raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/dbl\nid:1\nack:client-individual\n\n\x00")
    c.send("SEND\ndestination:/queue/dbl\n\nx\x00")
    _, h, _ = c.read()
    c.send(f"ACK\nid:{h['ack']}\nreceipt:1\n\n\x00")
    assert c.read()[0] == "RECEIPT"
    c.send(f"ACK\nid:{h['ack']}\nreceipt:2\n\n\x00")
    assert c.read()[0] == "ERROR"


def test_prefetch_bounds_unacked_deliveries(server: BrokerThread, client) -> None:
    conn, col = client()
    subscribe(conn, col, "/queue/pf", id="1", ack="client-individual",
              headers={"activemq.prefetchSize": "2"})
    _send_n(conn, "/queue/pf", 4)
    conn.send("/queue/pf", "m4", receipt="sent")
    assert col.wait_receipt("sent")  # all five routed; dispatch happened as they came
    assert [m.body for m in col.wait_messages(2)] == ["m0", "m1"]
    assert server.stats("queue://pf")["dispatched"] == 2
    conn.ack(col.messages[0].headers["ack"], receipt="a")
    assert col.wait_receipt("a")
    assert [m.body for m in col.wait_messages(3)] == ["m0", "m1", "m2"]
    assert server.stats("queue://pf")["dispatched"] == 3


def test_prefetch_shares_between_consumers(server: BrokerThread, client) -> None:
    a, cola = client()
    b, colb = client()
    subscribe(a, cola, "/queue/share", id="1", ack="client", headers={"activemq.prefetchSize": "1"})
    subscribe(b, colb, "/queue/share", id="1", ack="client", headers={"activemq.prefetchSize": "1"})
    _send_n(a, "/queue/share", 2)
    cola.wait_messages(1)
    colb.wait_messages(1)
    assert server.stats("queue://share")["dispatched"] == 2  # none twice, none on its way
    assert len(cola.messages) == 1 and len(colb.messages) == 1


def _dlq_headers(col) -> dict[str, str]:
    return col.wait_messages(1)[0].headers


def test_nack_without_policy_dead_letters_at_once(client) -> None:
    conn, col = client()
    conn.subscribe("/queue/work", id="1", ack="client-individual")
    exp = int(time.time() * 1000) + 600_000
    conn.send("/queue/work", "poison", headers={"persistent": "true", "expires": str(exp),
                                                 "app": "v1"})
    m = col.wait_messages(1)[0]
    conn.nack(m.headers["ack"], receipt="n")
    assert col.wait_receipt("n")
    d, dcol = client()
    d.subscribe("/queue/ActiveMQ.DLQ", id="dlq")
    h = _dlq_headers(dcol)
    assert dcol.messages[0].body == "poison"
    assert h["message-id"] == m.headers["message-id"]
    assert h["original-destination"] == "/queue/work"
    assert h["originalExpiration"] == str(exp)
    assert h["expires"] == "0"
    assert h["app"] == "v1"
    assert h["persistent"] == "true"
    assert h["destination"] == "/queue/ActiveMQ.DLQ"
    conn.send("/queue/work", "marker")  # a redelivery would come before it
    assert [m.body for m in col.wait_messages(2)] == ["poison", "marker"]


def test_a_nack_that_dead_letters_lets_the_next_message_come(server: BrokerThread,
                                                               client) -> None:
    """With prefetch 1 the consumer has room again once its message went to the
    DLQ: the next one is dispatched at once, not at the next send."""
    conn, col = client()
    _send_n(conn, "/queue/nackpf", 3, persistent="true")
    subscribe(conn, col, "/queue/nackpf", id="1", ack="client-individual",
              headers={"activemq.prefetchSize": "1"})
    for i in range(3):
        m = col.wait_messages(i + 1)[i]
        assert m.body == f"m{i}"
        conn.nack(m.headers["ack"], receipt=f"n{i}")
        assert col.wait_receipt(f"n{i}")
    assert server.stats("queue://nackpf")["pending"] == 0
    d, dcol = client()
    d.subscribe("/queue/ActiveMQ.DLQ", id="dlq")
    assert [m.body for m in dcol.wait_messages(3)] == ["m0", "m1", "m2"]


def _redelivery(bt_setup_max: int):
    element = plugin_element("redeliveryPlugin", [
        plugin_element("redeliveryPolicyMap", [
            plugin_element("redeliveryPolicyMap", [
                plugin_element("redeliveryPolicyEntries", [
                    plugin_element("redeliveryPolicy", queue="retry.>",
                                   maximumRedeliveries=str(bt_setup_max),
                                   initialRedeliveryDelay="20", redeliveryDelay="20"),
                ]),
            ]),
        ]),
    ], sendToDlqIfMaxRetriesExceeded="true")

    def setup(broker) -> None:
        RedeliveryPlugin.from_element(element).install(broker)

    return setup


def test_nack_with_redelivery_policy(start_broker) -> None:
    bt = start_broker(setup=_redelivery(2))
    conn, col = connect(bt)
    conn.subscribe("/queue/retry.a", id="1", ack="client-individual")
    conn.send("/queue/retry.a", "flaky", headers={"persistent": "true"})
    seen = []
    for i in range(3):
        m = col.wait_messages(i + 1)[i]
        seen.append(m.headers.get("redelivered"))
        conn.nack(m.headers["ack"])
    assert seen == [None, "true", "true"]
    d, dcol = connect(bt)
    d.subscribe("/queue/ActiveMQ.DLQ", id="d")
    h = dcol.wait_messages(1)[0].headers
    assert h["original-destination"] == "/queue/retry.a"
    assert h["message-id"] == col.messages[0].headers["message-id"]
    conn.send("/queue/retry.a", "marker")  # a fourth delivery would come before it
    assert [m.body for m in col.wait_messages(4)] == ["flaky"] * 3 + ["marker"]
    conn.disconnect()
    d.disconnect()


def test_policy_not_matching_dead_letters_at_once(start_broker) -> None:
    bt = start_broker(setup=_redelivery(5))
    conn, col = connect(bt)
    conn.subscribe("/queue/other", id="1", ack="client")
    conn.send("/queue/other", "x", headers={"persistent": "true"})
    conn.nack(col.wait_messages(1)[0].headers["ack"])
    assert bt.wait_queue_size("ActiveMQ.DLQ", 1) == 1
    conn.send("/queue/other", "marker")  # a redelivery would come before it
    assert [m.body for m in col.wait_messages(2)] == ["x", "marker"]
    conn.disconnect()


def test_delivery_count_visible_to_selectors(start_broker) -> None:
    bt = start_broker(setup=_redelivery(5))
    conn, col = connect(bt)
    conn.subscribe("/queue/retry.sel", id="1", ack="client-individual")
    conn.send("/queue/retry.sel", "x", headers={"persistent": "true"})
    conn.nack(col.wait_messages(1)[0].headers["ack"])  # failed delivery 1
    m = col.wait_messages(2)[1]
    assert m.headers["redelivered"] == "true"
    conn.unsubscribe("1")  # returned unacked: delivery 2 did not succeed either
    conn.subscribe("/queue/retry.sel", id="2", ack="client-individual",
                   headers={"selector": "JMSXDeliveryCount = 1"})
    # a fresh message is on its first delivery and matches; the older one, had it
    # matched, would have come first
    conn.send("/queue/retry.sel", "marker")
    marker = col.wait_messages(3)[2]
    assert (marker.body, marker.headers["subscription"]) == ("marker", "2")
    conn.ack(marker.headers["ack"], receipt="am")
    assert col.wait_receipt("am")
    conn.unsubscribe("2")
    conn.subscribe("/queue/retry.sel", id="3", ack="client-individual",
                   headers={"selector": "JMSXDeliveryCount = 3"})
    m3 = col.wait_messages(4)[3]
    assert m3.headers["subscription"] == "3"
    assert m3.headers["message-id"] == m.headers["message-id"]
    conn.disconnect()


def test_ack_receipt_for_persistent_message(client) -> None:
    conn, col = client()
    conn.subscribe("/queue/pa", id="1", ack="client-individual")
    conn.send("/queue/pa", "x", headers={"persistent": "true"}, receipt="s")
    assert col.wait_receipt("s")
    m = col.wait_messages(1)[0]
    conn.ack(m.headers["ack"], receipt="a")
    assert col.wait_receipt("a")


def test_disconnect_returns_unacked_to_other_consumer(client) -> None:
    a, cola = client()
    b, colb = client()
    a.subscribe("/queue/ret", id="1", ack="client-individual")
    _send_n(b, "/queue/ret", 3)
    cola.wait_messages(3)
    subscribe(b, colb, "/queue/ret", id="1", ack="client-individual")
    a.disconnect()
    got = colb.wait_messages(3)
    assert [m.body for m in got] == ["m0", "m1", "m2"]
    assert all(m.headers["redelivered"] == "true" for m in got)


def test_client_individual_acks_without_receipts(server: BrokerThread, raw) -> None:
    """The common consumer pattern (one ACK per message, no receipt) takes the session's
    quick path; what it acknowledges is gone, and a second ACK of it is still an ERROR."""
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/quick\nid:1\nack:client-individual\n\n\x00")
    for i in range(3):
        c.send(f"SEND\ndestination:/queue/quick\n\nq{i}\x00")
    acks = [c.read()[1]["ack"] for _ in range(3)]
    c.send(f"ACK\nid:{acks[0]}\n\n\x00")
    c.send(f"ACK\nid:{acks[2]}\n\n\x00")
    assert server.wait_queue_size("quick", 1) == 1
    c.send(f"ACK\nid:{acks[2]}\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and acks[2] in h["message"]


def test_ack_receipts_answer_in_frame_order_without_holding_later_frames(
        server: BrokerThread, raw) -> None:
    """Receipted ACKs of persistent messages are answered once their removal is
    stored, after the answers of earlier frames and before later ones; the ACKs
    and the SEND behind them in the same read are applied meanwhile, not after."""
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/rcpt.order\nid:1\nack:client-individual\n\n\x00")
    c.send("".join(f"SEND\ndestination:/queue/rcpt.order\npersistent:true\n\nm{i}\x00"
                   for i in range(4)))
    acks = [c.read()[1]["ack"] for _ in range(4)]
    c.send(f"ACK\nid:{acks[0]}\nreceipt:r0\n\n\x00"
           f"ACK\nid:{acks[1]}\n\n\x00"
           "SEND\ndestination:/queue/rcpt.other\npersistent:true\nreceipt:s\n\nx\x00"
           f"ACK\nid:{acks[2]}\nreceipt:r2\n\n\x00"
           f"ACK\nid:{acks[3]}\n\n\x00"
           "SEND\ndestination:/queue/rcpt.other\nreceipt:t\n\ny\x00")
    answers = [c.read() for _ in range(4)]
    assert [(cmd, h.get("receipt-id")) for cmd, h, _ in answers] == [
        ("RECEIPT", "r0"), ("RECEIPT", "s"), ("RECEIPT", "r2"), ("RECEIPT", "t")]
    assert server.wait_queue_size("rcpt.order", 0) == 0
    assert server.wait_queue_size("rcpt.other", 2) == 2
    # an ACK of a delivery already acknowledged is still an ERROR carrying its receipt
    c.send(f"ACK\nid:{acks[2]}\nreceipt:again\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and h.get("receipt-id") == "again"


def test_acks_of_one_read_in_any_order_and_a_repeat_among_them(server: BrokerThread, raw) -> None:
    """The ACKs of one read are applied together: out of order they all count, and
    a repeated one among them is still an ERROR (after the others were applied)."""
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/burst\nid:1\nack:client-individual\n\n\x00")
    c.send("".join(f"SEND\ndestination:/queue/burst\n\nb{i}\x00" for i in range(5)))
    acks = [c.read()[1]["ack"] for _ in range(5)]
    c.send(f"ACK\nid:{acks[3]}\n\n\x00ACK\nid:{acks[0]}\n\n\x00ACK\nid:{acks[1]}\n\n\x00"
           f"ACK\nid:{acks[1]}\n\n\x00ACK\nid:{acks[4]}\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and acks[1] in h["message"]
    assert server.wait_queue_size("burst", 1) == 1  # b2 alone is left, still held
    c.send(f"ACK\nid:{acks[2]}\nreceipt:last\n\n\x00")
    cmd, h, _ = c.read()
    assert (cmd, h.get("receipt-id")) == ("RECEIPT", "last")
    assert server.wait_queue_size("burst", 0) == 0
