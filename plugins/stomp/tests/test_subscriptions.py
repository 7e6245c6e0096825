"""SUBSCRIBE options: durable subscriptions, exclusive consumers, browsing,
selectors with ActiveMQ's STOMP string conversion, message groups."""

from __future__ import annotations

import pytest
from relaymq.testing import wait_equal, wait_until
from relaymq.testing.barriers import stomp_before_marker

from .conftest import BrokerThread, connect, subscribe

DURABLE = {"activemq.subscriptionName": "sub-1"}


def test_durable_subscription_across_reconnects(server: BrokerThread) -> None:
    conn, col = connect(server, headers={"client-id": "app"})
    conn.subscribe("/topic/news", id="1", ack="client-individual", headers=DURABLE)
    conn.send("/topic/news", "while here")
    m = col.wait_messages(1)[0]
    conn.ack(m.headers["ack"])
    conn.disconnect()
    prod, pcol = connect(server)
    for i in range(3):
        prod.send("/topic/news", f"away {i}", receipt=f"r{i}")
    assert pcol.wait_receipt("r2")  # all three stored for the durable subscription
    conn2, col2 = connect(server, headers={"client-id": "app"})
    conn2.subscribe("/topic/news", id="1", ack="auto", headers=DURABLE)
    assert [m.body for m in col2.wait_messages(3)] == ["away 0", "away 1", "away 2"]
    conn2.disconnect()
    prod.disconnect()


def test_non_durable_topic_subscription_misses_messages_while_away(client) -> None:
    conn, col = client()
    conn.subscribe("/topic/nd", id="1")
    conn.unsubscribe("1")
    conn.send("/topic/nd", "missed")
    subscribe(conn, col, "/topic/nd", id="2")
    conn.send("/topic/nd", "seen")
    conn.send("/topic/nd", "marker")  # anything else would come before it
    assert [m.body for m in col.wait_messages(2)] == ["seen", "marker"]


def test_unsubscribe_durable_in_use_then_delete(server: BrokerThread, raw) -> None:
    c = raw()
    c.connect("accept-version:1.2\nhost:x\nclient-id:dur\n")
    c.send("SUBSCRIBE\ndestination:/topic/d\nid:1\nactivemq.subscriptionName:s\nreceipt:s\n\n\x00")
    assert c.read()[0] == "RECEIPT"
    c.send("UNSUBSCRIBE\nactivemq.subscriptionName:s\nreceipt:u1\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and h["message"] == "Durable consumer is in use" and h["receipt-id"] == "u1"
    c.send("UNSUBSCRIBE\nid:1\nreceipt:u2\n\n\x00")  # detach; the subscription stays
    assert c.read()[0] == "RECEIPT"
    assert server.call(lambda: len(server.broker.region.subscriptions)) == 1
    c.send("UNSUBSCRIBE\nactivemq.subscriptionName:s\nreceipt:u3\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "u3"})
    assert server.call(lambda: len(server.broker.region.subscriptions)) == 0


def test_unsubscribe_with_id_and_name_while_attached_is_refused(server: BrokerThread,
                                                                raw) -> None:
    """ActiveMQ: with `activemq.subscriptionName` UNSUBSCRIBE only deletes the durable
    subscription; its consumer (the `id`) stays and must be unsubscribed first."""
    c = raw()
    c.connect("accept-version:1.2\nhost:x\nclient-id:dur2\n")
    c.send("SUBSCRIBE\ndestination:/topic/d2\nid:1\nactivemq.subscriptionName:s\n\n\x00")
    c.send("UNSUBSCRIBE\nid:1\nactivemq.subscriptionName:s\nreceipt:u\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and h["message"] == "Durable consumer is in use"
    assert h["receipt-id"] == "u"
    c.send("SEND\ndestination:/topic/d2\nreceipt:s\n\nstill here\x00")  # still subscribed
    frames = [c.read(), c.read()]
    assert {f[0] for f in frames} == {"MESSAGE", "RECEIPT"}
    assert next(f for f in frames if f[0] == "MESSAGE")[2] == b"still here"
    c.send("UNSUBSCRIBE\nid:1\nreceipt:u2\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "u2"})
    c.send("UNSUBSCRIBE\nid:1\nactivemq.subscriptionName:s\nreceipt:u3\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "u3"})
    assert server.call(lambda: len(server.broker.region.subscriptions)) == 0


def test_durable_subscription_on_a_queue_is_an_error(raw) -> None:
    c = raw()
    c.connect("accept-version:1.2\nhost:x\nclient-id:dq\n")
    c.send("SUBSCRIBE\ndestination:/queue/q\nid:1\nactivemq.subscriptionName:s\nreceipt:r\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and h["receipt-id"] == "r"
    c.send("SEND\ndestination:/queue/q\nreceipt:ok\n\nx\x00")
    assert c.read()[0] == "RECEIPT"


def test_durable_subscription_needs_client_id(raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/topic/t\nid:1\nactivemq.subscriptionName:s\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and "client-id" in h["message"]


def test_exclusive_consumer(server: BrokerThread, client) -> None:
    a, cola = client()
    b, colb = client()
    subscribe(a, cola, "/queue/excl", id="1", ack="auto", headers={"activemq.exclusive": "true"})
    subscribe(b, colb, "/queue/excl", id="1", ack="auto", headers={"activemq.exclusive": "true"})
    for i in range(10):
        b.send("/queue/excl", str(i))
    # all ten reached the exclusive consumer, in order, and each was dispatched once,
    # so none went to b (b's path orders nothing against a's: count instead)
    assert [m.body for m in cola.wait_messages(10)] == [str(i) for i in range(10)]
    assert server.stats("queue://excl")["dispatched"] == 10
    a.unsubscribe("1", receipt="u")
    assert cola.wait_receipt("u")
    b.send("/queue/excl", "failover")
    assert stomp_before_marker(b, colb, "/queue/excl") == ["failover"]
    assert len(cola.messages) == 10  # unsubscribed before: nothing more can come
    assert server.stats("queue://excl")["dispatched"] == 12  # and the marker
    assert server.wait_queue_size("excl", 0) == 0


def test_competing_consumers_without_exclusive(server: BrokerThread, client) -> None:
    a, cola = client()
    b, colb = client()
    subscribe(a, cola, "/queue/rr", id="1", headers={"activemq.prefetchSize": "1"}, ack="client")
    subscribe(b, colb, "/queue/rr", id="1", headers={"activemq.prefetchSize": "1"}, ack="client")
    for i in range(4):
        a.send("/queue/rr", str(i))
    # prefetch 1 and nothing acknowledged: each consumer holds exactly one message
    first_a = cola.wait_messages(1)[0]
    first_b = colb.wait_messages(1)[0]
    assert {first_a.body, first_b.body} == {"0", "1"}
    assert server.wait_queue_size("rr", 4) == 4  # two in flight, two waiting
    assert server.stats("queue://rr")["dispatched"] == 2  # so each holds only the one
    assert (len(cola.messages), len(colb.messages)) == (1, 1)
    # each ack frees one slot on that consumer only
    a.ack(first_a.headers["ack"], receipt="ra")
    assert cola.wait_receipt("ra")
    b.ack(first_b.headers["ack"], receipt="rb")
    assert colb.wait_receipt("rb")
    second = [cola.wait_messages(2)[1], colb.wait_messages(2)[1]]
    assert sorted(m.body for m in second) == ["2", "3"]
    for conn, col, m in ((a, cola, second[0]), (b, colb, second[1])):
        conn.ack(m.headers["ack"], receipt="r" + m.body)
        assert col.wait_receipt("r" + m.body)
    assert server.wait_queue_size("rr", 0) == 0
    assert server.stats("queue://rr")["dispatched"] == 4  # each message went out once
    assert (len(cola.messages), len(colb.messages)) == (2, 2)


def test_browser(server: BrokerThread, raw) -> None:
    c = raw()
    c.connect()
    for i in range(3):
        c.send(f"SEND\ndestination:/queue/browse\nreceipt:r{i}\n\nm{i}\x00")
        c.read()
    c.send("SUBSCRIBE\ndestination:/queue/browse\nid:b\nbrowser:true\n\n\x00")
    frames = [c.read() for _ in range(4)]
    assert [f[2] for f in frames[:3]] == [b"m0", b"m1", b"m2"]
    cmd, h, body = frames[3]
    assert cmd == "MESSAGE"
    assert h["browser"] == "end" and h["message-id"] == "0" and body == b""
    assert h["subscription"] == "b" and h["destination"] == "/queue/browse"
    assert server.queue_size("browse") == 3  # nothing consumed


def test_browser_on_empty_queue_and_with_selector(raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/empty.b\nid:b\nbrowser:true\n\n\x00")
    assert c.read()[1]["browser"] == "end"
    c.send("SEND\ndestination:/queue/sel.b\nkind:a\nreceipt:1\n\nA\x00")
    c.send("SEND\ndestination:/queue/sel.b\nkind:b\nreceipt:2\n\nB\x00")
    c.read(), c.read()
    c.send("SUBSCRIBE\ndestination:/queue/sel.b\nid:s\nbrowser:true\nselector:kind = 'b'\n\n\x00")
    assert c.read()[2] == b"B"
    assert c.read()[1]["browser"] == "end"


def test_browser_on_topic_is_an_error(raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/topic/t\nid:b\nbrowser:true\n\n\x00")
    assert c.read()[0] == "ERROR"


@pytest.mark.parametrize(("selector", "matching"), [
    ("count > 5", ["7", "10"]),
    ("count = 7", ["7"]),
    ("count BETWEEN 2 AND 8", ["3", "7"]),
    ("price < 2.5", ["3"]),  # price 1.5 only on count 3
    ("vip = true", ["10"]),
    ("count + 1 > 5", []),  # arithmetic on a string header never matches
    ("color = 'red'", ["3", "10"]),
    ("JMSXGroupID = 'g7'", ["7"]),
    ("JMSPriority > 4", ["10"]),
    ("JMSType = 'special'", ["3"]),
])
def test_selectors_with_stomp_string_conversion(server: BrokerThread, client, selector: str,
                                                matching: list[str]) -> None:
    conn, col = client()
    dest = "/queue/sel." + str(abs(hash(selector)))
    subscribe(conn, col, dest, id="1", headers={"selector": selector})
    prod, pcol = client()
    prod.send(dest, "3", headers={"count": "3", "price": "1.5", "color": "red", "type": "special"})
    prod.send(dest, "7", headers={"count": "7", "price": "9", "JMSXGroupID": "g7"})
    prod.send(dest, "10", headers={"count": "10", "vip": "true", "color": "red", "priority": "9"},
              receipt="done")
    assert pcol.wait_receipt("done")
    # all three routed; what matches was dispatched as it came, the rest waits
    key = "queue://" + dest.removeprefix("/queue/")
    wait_equal(lambda: (server.stats(key)["enqueued"], server.stats(key)["dispatched"]),
               (3, len(matching)), "messages routed and dispatched")
    col.wait_messages(len(matching))
    assert sorted((m.body for m in col.messages), key=int) == matching


@pytest.mark.parametrize(("selector", "matching"), [
    # a header compared with an integer literal is parsed as a Java int: "123.0" fails
    ("n = 123", ["a", "c"]),
    # with a decimal literal it is parsed as a double
    ("n = 123.0", ["a", "b", "c"]),
    ("n > 2147483647", []),  # "2147483648" is no Java int: FALSE
    ("n > 2147483647L", ["d"]),  # a long literal: Long.valueOf
    # a header used as a condition is no boolean: FALSE, so NOT matches it
    ("NOT flag", ["a", "b"]),
    ("flag", []),
    ("flag = TRUE", ["a"]),
    ("flag = FALSE", ["b"]),
    # literals are Java ints: int + int wraps
    ("2147483647 + 1 < 0", ["a", "b", "c", "d"]),
])
def test_stomp_header_typing_in_selectors(server: BrokerThread, client, selector: str,
                                          matching: list[str]) -> None:
    conn, col = client()
    dest = "/queue/typing." + str(abs(hash(selector)))
    subscribe(conn, col, dest, id="1", headers={"selector": selector})
    prod, pcol = client()
    prod.send(dest, "a", headers={"n": "123", "flag": "true"})
    prod.send(dest, "b", headers={"n": "123.0", "flag": "false"})
    prod.send(dest, "c", headers={"n": "+123"})
    prod.send(dest, "d", headers={"n": "2147483648"}, receipt="done")
    assert pcol.wait_receipt("done")
    key = "queue://" + dest.removeprefix("/queue/")
    wait_equal(lambda: (server.stats(key)["enqueued"], server.stats(key)["dispatched"]),
               (4, len(matching)), "messages routed and dispatched")
    col.wait_messages(len(matching))
    assert sorted(m.body for m in col.messages) == matching


def test_topic_selector(client) -> None:
    conn, col = client()
    subscribe(conn, col, "/topic/tsel", id="1", headers={"selector": "level >= 3"})
    for lvl in (1, 3, 5):
        conn.send("/topic/tsel", str(lvl), headers={"level": str(lvl)})
    assert [m.body for m in col.wait_messages(2)] == ["3", "5"]


def test_invalid_selector_keeps_connection(raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/x\nid:1\nselector:count >>> 5\nreceipt:r\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and h["receipt-id"] == "r"
    c.send("SUBSCRIBE\ndestination:/queue/x\nid:1\nreceipt:r2\n\n\x00")  # id reusable
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "r2"})


def test_duplicate_subscription_id(raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/a\nid:1\n\n\x00")
    c.send("SUBSCRIBE\ndestination:/queue/b\nid:1\nreceipt:r\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and "already" in h["message"]


def test_unsubscribe_unknown_id(raw) -> None:
    c = raw()
    c.connect()
    c.send("UNSUBSCRIBE\nid:nope\nreceipt:r\n\n\x00")
    assert c.read()[0] == "ERROR"
    c.send("SEND\ndestination:/queue/ok\nreceipt:ok\n\nx\x00")
    assert c.read()[0] == "RECEIPT"


def test_message_groups_stick_to_one_consumer(server: BrokerThread, client) -> None:
    a, cola = client()
    b, colb = client()
    subscribe(a, cola, "/queue/grp", id="1")
    subscribe(b, colb, "/queue/grp", id="1")
    for i in range(10):
        a.send("/queue/grp", f"{i % 2}-{i}", headers={"JMSXGroupID": f"g{i % 2}"})
    wait_until(lambda: len(cola.messages) + len(colb.messages) >= 10, "all ten messages")
    assert server.stats("queue://grp")["dispatched"] == 10  # none twice, none on its way
    assert len(cola.messages) + len(colb.messages) == 10
    groups_a = {m.body.split("-")[0] for m in cola.messages}
    groups_b = {m.body.split("-")[0] for m in colb.messages}
    assert not groups_a & groups_b
    # each MESSAGE says its group
    assert all(m.headers["JMSXGroupID"] == "g" + m.body.split("-")[0]
               for m in cola.messages + colb.messages)


def test_a_group_owner_gets_only_what_its_selector_selects(server: BrokerThread, client) -> None:
    """A consumer with `region = 'eu'` owns group g after its first eu message; a
    `us` message of group g is not handed to it (ActiveMQ selects, then assigns
    the group): it waits for a consumer whose selector takes it, once the group's
    consumer is gone."""
    eu, coleu = client()
    subscribe(eu, coleu, "/queue/grpsel", id="1", headers={"selector": "region = 'eu'"})
    eu.send("/queue/grpsel", "eu-1", headers={"JMSXGroupID": "g", "region": "eu"})
    eu.send("/queue/grpsel", "us-1", headers={"JMSXGroupID": "g", "region": "us"})
    eu.send("/queue/grpsel", "eu-2", headers={"JMSXGroupID": "g", "region": "eu"}, receipt="s")
    assert coleu.wait_receipt("s")
    wait_until(lambda: len(coleu.messages) >= 2, "the eu messages")
    assert [m.body for m in coleu.messages] == ["eu-1", "eu-2"]
    wait_until(lambda: server.stats("queue://grpsel")["pending"] == 1, "us-1 left waiting")
    assert [m.body for m in coleu.messages] == ["eu-1", "eu-2"]
    eu.disconnect()  # the group is free again
    us, colus = client()
    subscribe(us, colus, "/queue/grpsel", id="1", headers={"selector": "region = 'us'"})
    wait_until(lambda: len(colus.messages) >= 1, "the us message")
    assert [m.body for m in colus.messages] == ["us-1"]


def test_composite_subscribe_consumes_every_part(server: BrokerThread, raw) -> None:
    """ActiveMQ: a consumer on `/queue/a,/topic/b` receives from each part, under one
    subscription id, and each MESSAGE names the part it came from."""
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/ca,/topic/cb\nid:both\nack:client-individual\n"
           "receipt:r\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "r"})
    p = raw()
    p.connect()
    p.send("SEND\ndestination:/queue/ca\n\nto a\x00SEND\ndestination:/topic/cb\n\nto b\x00")
    got = {}
    for _ in range(2):
        cmd, h, body = c.read()
        assert cmd == "MESSAGE" and h["subscription"] == "both"
        got[h["destination"]] = (body, h["ack"])
    assert {d: b for d, (b, _) in got.items()} == {"/queue/ca": b"to a", "/topic/cb": b"to b"}
    for _body, ack in got.values():
        c.send(f"ACK\nid:{ack}\nreceipt:a-{ack}\n\n\x00")
        assert c.read()[:2] == ("RECEIPT", {"receipt-id": f"a-{ack}"})
    assert server.queue_size("ca") == 0
    c.send("UNSUBSCRIBE\nid:both\nreceipt:u\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "u"})
    p.send("SEND\ndestination:/queue/ca\nreceipt:s\n\nlater\x00")
    assert p.read()[0] == "RECEIPT"
    assert server.wait_queue_size("ca", 1) == 1  # nobody consumes it any more
    c.send("SUBSCRIBE\ndestination:/queue/ca,/queue/cc\nid:again\nbrowser:true\n"
           "receipt:b\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and h["receipt-id"] == "b"


def test_subscribe_receipt_comes_before_the_first_message(server: BrokerThread, raw) -> None:
    """ActiveMQ answers a SUBSCRIBE's receipt before delivering to it, so a client
    that waits for the RECEIPT never sees a MESSAGE of the subscription first."""
    c = raw()
    c.connect()
    for queue, body in (("waiting", "m0"), ("waiting", "m1"), ("waiting.b", "b")):
        c.send(f"SEND\ndestination:/queue/{queue}\nreceipt:s\n\n{body}\x00")
        assert c.read()[0] == "RECEIPT"
    c.send("SUBSCRIBE\ndestination:/queue/waiting\nid:1\nack:client\nreceipt:sub1\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "sub1"})
    assert [c.read()[2] for _ in range(2)] == [b"m0", b"m1"]
    c.send("SUBSCRIBE\ndestination:/queue/waiting.b\nid:2\nbrowser:true\nreceipt:sub2\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "sub2"})
    assert c.read()[2] == b"b"
    cmd, h, _ = c.read()
    assert cmd == "MESSAGE" and h["browser"] == "end"


def test_wildcard_queue_subscription_consumes_matching_queues(server: BrokerThread,
                                                              raw) -> None:
    """ActiveMQ: a consumer on `/queue/orders.>` receives from every matching queue,
    those that exist when it subscribes and those created afterwards."""
    c = raw()
    c.connect()
    c.send("SEND\ndestination:/queue/orders.eu\nreceipt:a\n\nbefore\x00")
    assert c.read()[0] == "RECEIPT"
    c.send("SUBSCRIBE\ndestination:/queue/orders.>\nid:all\nack:client-individual\n"
           "receipt:s\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "s"})
    cmd, h, body = c.read()
    assert (cmd, h["destination"], h["subscription"], body) == (
        "MESSAGE", "/queue/orders.eu", "all", b"before")
    p = raw()
    p.connect()
    p.send("SEND\ndestination:/queue/orders.us\n\nnew queue\x00"
           "SEND\ndestination:/queue/elsewhere\n\nnot matching\x00")
    cmd, h, body = c.read()
    assert (cmd, h["destination"], body) == ("MESSAGE", "/queue/orders.us", b"new queue")
    c.send(f"ACK\nid:{h['ack']}\nreceipt:k\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "k"})
    assert server.wait_queue_size("orders.us", 0) == 0
    assert server.queue_size("elsewhere") == 1
    c.send("UNSUBSCRIBE\nid:all\nreceipt:u\n\n\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "u"})
    p.send("SEND\ndestination:/queue/orders.asia\nreceipt:z\n\nlater\x00")
    assert p.read()[0] == "RECEIPT"
    assert server.wait_queue_size("orders.asia", 1) == 1
    assert server.wait_queue_size("orders.eu", 1) == 1  # unacknowledged: returned


def test_the_stomp_barrier_returns_what_came_before_its_marker(client) -> None:
    conn, col = client()
    subscribe(conn, col, "/queue/barrier", id="b")
    conn.send("/queue/barrier", "before")
    assert stomp_before_marker(conn, col, "/queue/barrier", subscription="b") == ["before"]
    seen = len(col.messages)
    assert stomp_before_marker(conn, col, "/queue/barrier", since=seen) == []
