"""SEND -> MESSAGE with ActiveMQ's headers, bodies, destinations and escaping."""

from __future__ import annotations

import re
import time

import pytest
from relaymq.model.destination import Destination
from relaymq.testing import wait_equal

from .conftest import BrokerThread, connect, subscribe

MESSAGE_ID = re.compile(r"^ID:[^:]+-\d+-\d+-\d+:\d+:-1:\d+:\d+$")


def test_message_headers(raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/h\nid:sub-1\nack:client-individual\n\n\x00")
    expires = int(time.time() * 1000) + 60_000
    sent_at = int(time.time() * 1000)
    c.send(f"SEND\ndestination:/queue/h\npersistent:true\npriority:7\nexpires:{expires}\n"
           "type:order\ncorrelation-id:c-42\nreply-to:/queue/replies\nJMSXGroupID:g1\n"
           "JMSXGroupSeq:3\ncolor:red\ncount:7\ncontent-type:text/plain\nreceipt:r1\n\nbody!\x00")
    frames = [c.read(), c.read()]
    (cmd, h, body), = [f for f in frames if f[0] == "MESSAGE"]
    assert [f[0] for f in frames if f[0] != "MESSAGE"] == ["RECEIPT"]
    assert body == b"body!"
    assert MESSAGE_ID.match(h["message-id"]), h["message-id"]
    assert h["destination"] == "/queue/h"
    assert h["subscription"] == "sub-1"
    assert h["ack"] and h["ack"] != h["message-id"]
    assert h["persistent"] == "true"
    assert h["priority"] == "7"
    assert h["expires"] == str(expires)
    assert h["type"] == "order"
    assert h["correlation-id"] == "c-42"
    assert h["reply-to"] == "/queue/replies"
    assert h["color"] == "red" and h["count"] == "7"
    assert h["content-type"] == "text/plain"
    received_at = int(time.time() * 1000) + 1
    assert sent_at <= int(h["timestamp"]) <= received_at  # stamped on arrival
    assert h["JMSXGroupID"] == "g1" and h["JMSXGroupSeq"] == "3"  # echoed (a bridge carries them)
    assert "redelivered" not in h
    assert "receipt" not in h and "transaction" not in h


def test_defaults_non_persistent_priority_4_expires_0(raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/d\nid:1\n\n\x00")
    c.send("SEND\ndestination:/queue/d\n\nx\x00")
    cmd, h, body = c.read()
    assert cmd == "MESSAGE"
    assert "persistent" not in h
    assert h["priority"] == "4"
    assert h["expires"] == "0"


def test_binary_body_with_stomp_py(server: BrokerThread, client) -> None:
    import stomp

    from .conftest import Collector

    body = bytes(range(256)) * 8
    cons = stomp.Connection12([(server.host, server.port)], auto_decode=False)
    col = Collector()
    cons.set_listener("c", col)
    cons.connect(wait=True)
    cons.subscribe("/queue/bin", id="1")
    prod, _ = client()
    prod.send("/queue/bin", body, headers={"content-type": "application/octet-stream"})
    m = col.wait_messages(1)[0]
    assert m.body == body
    assert m.headers["content-length"] == str(len(body))
    cons.disconnect()


def test_binary_body_raw(raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/bin2\nid:1\n\n\x00")
    body = b"\x00\x01\x02\x00\xff" * 100
    c.send(b"SEND\ndestination:/queue/bin2\ncontent-length:%d\n\n" % len(body) + body + b"\x00")
    cmd, h, got = c.read()
    assert got == body and h["content-length"] == str(len(body))


def test_text_body_without_content_length_is_text(server: BrokerThread, raw) -> None:
    c = raw()
    c.connect()
    c.send("SEND\ndestination:/queue/txt\nreceipt:r\n\nhello text\x00")
    c.read()
    c.send("SEND\ndestination:/queue/txt\ncontent-length:3\nreceipt:r2\n\nabc\x00")
    c.read()

    def kinds() -> list[str]:
        q = server.broker.region.queues[Destination.queue("txt")]
        return [e.message.body_type for e in q.pending]

    assert server.call(kinds) == ["text", "bytes"]


def test_properties_come_back_and_escaping_per_version(server: BrokerThread) -> None:
    c12, col12 = connect(server, "1.2")
    c11, col11 = connect(server, "1.1")
    c10, col10 = connect(server, "1.0")
    subscribe(c12, col12, "/topic/esc", id="a")
    subscribe(c11, col11, "/topic/esc", id="b")
    subscribe(c10, col10, "/topic/esc", id="c")
    c12.send("/topic/esc", "x", headers={"k": "a:b", "multi": "line1\nline2", "back": "c\\d"})
    for col in (col12, col11):
        h = col.wait_messages(1)[0].headers
        assert h["k"] == "a:b"
        assert h["multi"] == "line1\nline2"
        assert h["back"] == "c\\d"
    h10 = col10.wait_messages(1)[0].headers
    assert h10["k"] == "a:b"  # 1.0: no escaping; the value simply follows the first colon
    assert h10["back"] == "c\\d"
    for c in (c12, c11, c10):
        c.disconnect()


def test_a_nul_in_a_send_header_does_not_cut_the_message_frame(server: BrokerThread) -> None:
    """A NUL ends a STOMP frame and has no escape; a SEND header may still hold
    one (it is cut at the end of the line, not at NUL). Echoed as it was, it cut
    the MESSAGE short: the subscriber got no body, then garbage. Now the header
    shows U+FFFD and the frames behind it stay in step, on every version."""
    conns = [connect(server, v) for v in ("1.2", "1.1", "1.0")]
    for i, (conn, col) in enumerate(conns):
        subscribe(conn, col, "/topic/nul", id=str(i))
    sender, _ = conns[0]
    sender.send("/topic/nul", "x", headers={"k": "a\x00b", "type": "t\x00"})
    sender.send("/topic/nul", "last")
    for conn, col in conns:
        first, last = col.wait_messages(2)[:2]
        assert (first.body, first.headers["k"], first.headers["type"]) == (
            "x", "a\ufffdb", "t\ufffd")
        assert last.body == "last"
        conn.disconnect()


def test_escaped_header_from_raw_12_client(raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/e\\c1\nid:1\n\n\x00")
    c.send("SEND\ndestination:/queue/e\\c1\nweird\\nname:va\\\\lue\n\nx\x00")
    cmd, h, _ = c.read()
    assert cmd == "MESSAGE"
    assert h["destination"] == "/queue/e:1"
    assert h["weird\nname"] == "va\\lue"


def test_undefined_escape_is_fatal(raw) -> None:
    c = raw()
    c.connect()
    c.send("SEND\ndestination:/queue/x\nbad:a\\tb\n\nx\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and "escape" in h["message"]
    assert c.closed()


def test_destination_without_prefix_is_a_queue(server: BrokerThread, raw) -> None:
    c = raw()
    c.connect()
    c.send("SEND\ndestination:plain.name\nreceipt:r\n\nx\x00")
    assert c.read()[0] == "RECEIPT"
    assert server.queue_size("plain.name") == 1


@pytest.mark.parametrize("dest", ["/queue/", "/topic/", "", "  ", "/queue/  "])
def test_empty_destination_name_is_refused(raw, dest: str) -> None:
    c = raw()
    c.connect()
    c.send(f"SEND\ndestination:{dest}\nreceipt:r\n\nx\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and h["receipt-id"] == "r"
    c.send("SEND\ndestination:/queue/ok\nreceipt:r2\n\nx\x00")  # still connected
    assert c.read()[0] == "RECEIPT"


def test_missing_destination_keeps_connection(raw) -> None:
    c = raw()
    c.connect()
    c.send("SEND\nreceipt:r1\n\nx\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and "destination" in h["message"] and h["receipt-id"] == "r1"
    c.send("SUBSCRIBE\nid:1\n\n\x00")
    assert c.read()[0] == "ERROR"
    c.send("SEND\ndestination:/queue/ok\nreceipt:r2\n\nx\x00")
    assert c.read()[0] == "RECEIPT"


def test_composite_destination(server: BrokerThread, raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/topic/comp.t\nid:t\n\n\x00")
    c.send("SEND\ndestination:/queue/comp.a,/queue/comp.b,/topic/comp.t\nreceipt:r\n\nx\x00")
    frames = [c.read(), c.read()]
    assert sorted(f[0] for f in frames) == ["MESSAGE", "RECEIPT"]
    msg = next(f for f in frames if f[0] == "MESSAGE")
    assert msg[1]["destination"] == "/topic/comp.t"
    assert server.queue_size("comp.a") == 1 and server.queue_size("comp.b") == 1


def test_topic_fanout_and_same_message_id(client) -> None:
    subs = [client() for _ in range(3)]
    for i, (conn, col) in enumerate(subs):
        subscribe(conn, col, "/topic/fan", id=str(i))
    prod, _ = client()
    prod.send("/topic/fan", "to all")
    ids = set()
    for _conn, col in subs:
        m = col.wait_messages(1)[0]
        assert m.body == "to all" and m.headers["destination"] == "/topic/fan"
        ids.add(m.headers["message-id"])
    assert len(ids) == 1


def test_wildcard_topic_subscription(client) -> None:
    conn, col = client()
    subscribe(conn, col, "/topic/prices.>", id="w")
    conn.send("/topic/prices.eu.x", "1")
    conn.send("/topic/other", "2")
    conn.send("/topic/prices.us", "3")
    conn.send("/topic/prices.end", "marker")  # "2", had it matched, would come before it
    assert [m.headers["destination"] for m in col.wait_messages(3)] == [
        "/topic/prices.eu.x", "/topic/prices.us", "/topic/prices.end"]


def test_temp_queue_request_reply(client) -> None:
    requester, rcol = client()
    responder, scol = client()
    responder.subscribe("/queue/service", id="svc")
    requester.subscribe("/temp-queue/replies", id="tmp")
    requester.send("/queue/service", "ping", headers={"reply-to": "/temp-queue/replies"})
    req = scol.wait_messages(1)[0]
    reply_to = req.headers["reply-to"]
    assert reply_to.startswith("/remote-temp-queue/")
    responder.send(reply_to, "pong")
    rep = rcol.wait_messages(1)[0]
    assert rep.body == "pong"
    assert rep.headers["destination"] == "/temp-queue/replies"


def test_temp_queue_goes_away_with_its_connection(server: BrokerThread, client) -> None:
    owner, ocol = client()
    subscribe(owner, ocol, "/temp-queue/t1", id="t")

    def temps() -> list:
        return server.call(lambda: [d for d in server.broker.region.queues if d.is_temporary])

    assert len(temps()) == 1
    owner.disconnect()
    wait_equal(temps, [], "temporary queues after the owner disconnected")


def test_large_message(client) -> None:
    conn, col = client()
    conn.subscribe("/queue/large", id="1")
    body = "x" * (2 * 1024 * 1024)
    conn.send("/queue/large", body)
    m = col.wait_messages(1, timeout=10)[0]
    assert len(m.body) == len(body)


def test_many_messages_in_order(client) -> None:
    prod, _ = client()
    cons, col = client()
    cons.subscribe("/queue/order", id="1")
    n = 2000
    for i in range(n):
        prod.send("/queue/order", str(i))
    msgs = col.wait_messages(n, timeout=20)
    assert [int(m.body) for m in msgs] == list(range(n))


def test_scheduled_delay(start_broker) -> None:
    bt = start_broker(scheduler_support=True)
    conn, col = connect(bt)
    conn.subscribe("/queue/sched", id="1")
    conn.send("/queue/sched", "later", headers={"AMQ_SCHEDULED_DELAY": "300"})
    conn.send("/queue/sched", "now")
    first, second = col.wait_messages(2)
    assert (first.body, second.body) == ("now", "later"), "the delayed message comes after"
    m = second
    assert m.body == "later" and "AMQ_SCHEDULED_DELAY" not in m.headers
    conn.disconnect()


def test_expired_message_is_not_delivered(server: BrokerThread, raw) -> None:
    c = raw()
    c.connect()
    past = int(time.time() * 1000) - 1000
    c.send(f"SEND\ndestination:/queue/exp\nexpires:{past}\nreceipt:r\n\nold\x00")
    c.read()
    c.send("SEND\ndestination:/queue/exp\nreceipt:r2\n\nnew\x00")
    c.read()
    c.send("SUBSCRIBE\ndestination:/queue/exp\nid:1\n\n\x00")
    cmd, h, body = c.read()
    assert body == b"new"


def test_invalid_numeric_headers_are_errors_not_fatal(raw) -> None:
    c = raw()
    c.connect()
    for hdr in ("priority:high", "expires:soon", "JMSXGroupSeq:x"):
        c.send(f"SEND\ndestination:/queue/n\n{hdr}\nreceipt:r\n\nx\x00")
        cmd, h, _ = c.read()
        assert cmd == "ERROR" and h["receipt-id"] == "r", (hdr, h)
    c.send("SEND\ndestination:/queue/n\nreceipt:ok\n\nx\x00")
    assert c.read()[0] == "RECEIPT"


def test_client_cannot_set_the_broker_dead_letter_headers(raw) -> None:
    """`original-destination`, `originalExpiration` and `dlqDeliveryFailureCause` are
    written by the broker on a dead-lettered copy; the same names on a SEND are not
    echoed as if the broker had set them -- on the first SEND, on a repeat with the same
    headers (the per-connection header cache) and on one that needs unescaping."""
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/forged\nid:1\n\n\x00")
    forged = ("SEND\ndestination:/queue/forged\noriginal-destination:/queue/elsewhere\n"
              "originalExpiration:5\ndlqDeliveryFailureCause:made up\ncolor:red\n")
    c.send(forged + "\none\x00")
    c.send(forged + "\ntwo\x00")
    c.send(forged + "shape:a\\cb\n\nthree\x00")  # escaped: the general path
    for body in (b"one", b"two", b"three"):
        cmd, h, got = c.read()
        assert (cmd, got) == ("MESSAGE", body)
        assert h["color"] == "red"
        assert h["expires"] == "0"
        for name in ("original-destination", "originalExpiration", "dlqDeliveryFailureCause"):
            assert name not in h, (body, name, h[name])
    assert h["shape"] == "a:b"
