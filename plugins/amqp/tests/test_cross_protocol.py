"""AMQP in, STOMP out, and back: fields and properties survive the conversion,
which happens once, at the edge that needs it."""

from __future__ import annotations

import queue
import uuid
from typing import Any

import pytest
from proton import Message, float32

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")


class Frames(stomp.ConnectionListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.q: queue.Queue[Any] = queue.Queue()
        self.receipts: queue.Queue[str] = queue.Queue()

    def on_message(self, frame: Any) -> None:
        self.q.put(frame)

    def on_receipt(self, frame: Any) -> None:
        self.receipts.put(frame.headers["receipt-id"])


@pytest.fixture
def both(make_broker: Any) -> Any:
    return make_broker("amqp://127.0.0.1:0", "stomp://127.0.0.1:0")


def stomp_to(bt: Any) -> Any:
    """A connected stomp.py client of broker `bt` and the listener that collects its frames."""
    host, _, port = bt.address("stomp").rpartition(":")
    conn = stomp.Connection([(host, int(port))], auto_content_length=False)
    frames = Frames()
    conn.set_listener("", frames)
    conn.connect(wait=True)
    return conn, frames


@pytest.fixture
def stomp_client(both: Any) -> Any:
    conn, frames = stomp_to(both)
    yield conn, frames
    conn.disconnect()


def test_amqp_to_stomp(both: Any, stomp_client: Any, connect: Any) -> None:
    conn, frames = stomp_client
    conn.subscribe(destination="/queue/x", id="1", ack="client-individual")
    c = connect(both.url())
    c.create_sender("queue://x").send(Message(
        body="héllo", id="ID:amqp-1", correlation_id="corr", subject="Order", durable=True,
        priority=8, reply_to="queue://replies", properties={"color": "red", "n": 5}))
    frame = frames.q.get(timeout=5)
    h = frame.headers
    assert frame.body == "héllo"
    assert h["message-id"] == "ID:amqp-1" and h["correlation-id"] == "corr"
    assert h["type"] == "Order" and h["priority"] == "8" and h["persistent"] == "true"
    assert h["reply-to"] == "/queue/replies"
    assert h["color"] == "red" and h["n"] == "5"
    conn.ack(h["message-id"], "1")


def test_amqp_property_values_reach_stomp_as_activemq_writes_them(
        both: Any, stomp_client: Any, connect: Any) -> None:
    """Non-string properties become headers as Java's toString() gives them."""
    conn, frames = stomp_client
    conn.subscribe(destination="/queue/jtext", id="1", ack="auto")
    c = connect(both.url())
    c.create_sender("queue://jtext").send(Message(body="x", properties={
        "f": float32(1.1), "big": 1e20, "small": 1.5e-5, "plain": 1234.5, "yes": True,
        "list": [1, "a", True, None, 2.5], "map": {"k": 1, "z": [1e20]}}))
    h = frames.q.get(timeout=5).headers
    assert (h["f"], h["big"], h["small"], h["plain"], h["yes"]) == (
        "1.1", "1.0E20", "1.5E-5", "1234.5", "true")
    assert h["list"] == "[1, a, true, null, 2.5]"
    assert h["map"] == "{k=1, z=[1.0E20]}"


def test_stomp_to_amqp(both: Any, stomp_client: Any, connect: Any) -> None:
    conn, _ = stomp_client
    c = connect(both.url())
    r = c.create_receiver("queue://y", credit=5)
    conn.send("/queue/y", "text body", headers={
        "persistent": "true", "priority": "6", "correlation-id": "c-9", "type": "Kind",
        "reply-to": "/topic/answers", "custom": "value"})
    conn.send("/queue/y", b"\x00\x01binary", headers={"content-length": "8"})
    m = r.receive(timeout=5)
    assert m.body == "text body" and m.durable and m.priority == 6
    assert m.correlation_id == "c-9" and m.subject == "Kind" and m.reply_to == "topic://answers"
    assert m.properties["custom"] == "value"
    assert m.annotations["x-opt-jms-msg-type"] == 5
    assert m.id and str(m.id).startswith("ID:")
    r.accept()
    m2 = r.receive(timeout=5)
    assert m2.body == b"\x00\x01binary"
    r.accept()


def test_round_trip_amqp_stomp_amqp(both: Any, stomp_client: Any, connect: Any) -> None:
    """AMQP -> STOMP consumer that forwards with STOMP -> AMQP consumer."""
    conn, frames = stomp_client
    conn.subscribe(destination="/queue/hop1", id="1", ack="auto")
    c = connect(both.url())
    r = c.create_receiver("queue://hop2", credit=1)
    tag = str(uuid.uuid4())
    c.create_sender("queue://hop1").send(Message(body=tag, properties={"trace": tag}, priority=3))
    frame = frames.q.get(timeout=5)
    forward = {k: v for k, v in frame.headers.items()
               if k in ("trace", "priority", "correlation-id", "type")}
    conn.send("/queue/hop2", frame.body, headers=forward)
    m = r.receive(timeout=5)
    assert m.body == tag and m.properties["trace"] == tag and m.priority == 3


def test_amq_msg_type_chooses_text_or_bytes_for_amqp(both: Any, connect: Any) -> None:
    """stomp.py adds content-length to every SEND (a BytesMessage in ActiveMQ);
    ActiveMQ's `amq-msg-type:text` makes it a TextMessage, an amqp-value string."""
    host, _, port = both.address("stomp").rpartition(":")
    conn = stomp.Connection([(host, int(port))])  # auto_content_length on, as by default
    frames = Frames()
    conn.set_listener("", frames)
    conn.connect(wait=True)
    c = connect(both.url())
    r = c.create_receiver("queue://typed", credit=5)
    conn.send("/queue/typed", "héllo", headers={"amq-msg-type": "text"})
    conn.send("/queue/typed", "raw", headers={"amq-msg-type": "bytes"})
    conn.send("/queue/typed", "default")
    text, raw, default = (r.receive(timeout=5) for _ in range(3))
    r.accept()
    assert text.body == "héllo" and text.annotations["x-opt-jms-msg-type"] == 5
    assert bytes(raw.body) == b"raw" and raw.annotations["x-opt-jms-msg-type"] == 3
    assert bytes(default.body) == b"default"  # content-length: bytes, as in ActiveMQ
    conn.disconnect()


def test_unknown_amq_msg_type_is_refused(both: Any, stomp_client: Any) -> None:
    conn, _ = stomp_client
    errors: queue.Queue[Any] = queue.Queue()

    class Errors(stomp.ConnectionListener):  # type: ignore[misc]
        def on_error(self, frame: Any) -> None:
            errors.put(frame)

    conn.set_listener("errors", Errors())
    conn.send("/queue/typed.bad", "x", headers={"amq-msg-type": "map"})
    assert "Unsupported message type 'map'" in errors.get(timeout=5).headers["message"]
    assert both.queue_size("typed.bad") == 0


def test_user_id_crosses_as_jmsxuserid(both: Any, stomp_client: Any, connect: Any) -> None:
    """AMQP user-id is JMSXUserID on STOMP (ActiveMQ); a STOMP client cannot
    claim one: the SEND's JMSXUserID header is dropped."""
    conn, frames = stomp_client
    conn.subscribe(destination="/queue/users", id="1", ack="auto")
    c = connect(both.url())
    c.create_sender("queue://users").send(Message(body="from alice", user_id=b"alice"))
    assert frames.q.get(timeout=5).headers["JMSXUserID"] == "alice"
    conn.unsubscribe("1")
    r = c.create_receiver("queue://users.back", credit=1)
    conn.send("/queue/users.back", "spoof", headers={"JMSXUserID": "mallory", "k": "v"})
    m = r.receive(timeout=5)
    r.accept()
    assert not m.user_id and m.properties == {"k": "v"}


def test_stomp_timestamp_header_is_the_jms_timestamp(both: Any, stomp_client: Any,
                                                     connect: Any) -> None:
    """ActiveMQ sets JMSTimestamp from a SEND's `timestamp` (the broker's clock
    without one); AMQP sees it as creation-time, selectors as JMSTimestamp."""
    conn, frames = stomp_client
    c = connect(both.url())
    r = c.create_receiver("queue://stamped", credit=5)
    for body in ("one", "two"):  # identical headers: the second takes the repeat-SEND path
        conn.send("/queue/stamped", body, headers={"timestamp": "1234567890123", "k": "v"})
    conn.send("/queue/stamped", "now")
    got = [r.receive(timeout=5) for _ in range(3)]
    r.accept()
    assert [m.creation_time for m in got[:2]] == [1234567890.123, 1234567890.123]
    assert got[2].creation_time > 1234567890.123
    conn.send("/queue/stamped.sel", "x", headers={"timestamp": "1234567890123"})
    conn.subscribe("/queue/stamped.sel", id="1", ack="auto",
                   headers={"selector": "JMSTimestamp = 1234567890123"})
    assert frames.q.get(timeout=5).headers["timestamp"] == "1234567890123"


def test_stomp_text_that_is_not_utf8_reaches_amqp_as_a_valid_string(both: Any,
                                                                    connect: Any) -> None:
    """A SEND without content-length is text; bytes that are not UTF-8 become
    U+FFFD (as ActiveMQ decodes STOMP text), never an invalid AMQP string."""
    import socket

    host, _, port = both.address("stomp").rpartition(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        assert s.recv(4096).startswith(b"CONNECTED")
        s.sendall(b"SEND\ndestination:/queue/latin1\nreceipt:r\n\ncaf\xe9\x00")
        assert b"RECEIPT" in s.recv(4096)
    c = connect(both.url())
    r = c.create_receiver("queue://latin1", credit=1)
    assert r.receive(timeout=5).body == "caf\ufffd"
    r.accept()


def test_dead_letters_cross_protocols(both: Any, stomp_client: Any, connect: Any) -> None:
    """A STOMP NACK dead-letters to ActiveMQ.DLQ, read over AMQP with its fields;
    an AMQP reject dead-letters, read over STOMP with ActiveMQ's DLQ headers."""
    conn, frames = stomp_client
    c = connect(both.url())
    conn.send("/queue/dl.s", "nacked", headers={
        "persistent": "true", "priority": "6", "type": "T", "correlation-id": "cc", "color": "red"})
    conn.subscribe("/queue/dl.s", id="1", ack="client-individual")
    frame = frames.q.get(timeout=5)
    conn.nack(frame.headers["message-id"], "1")
    dlq = c.create_receiver("queue://ActiveMQ.DLQ", credit=1)
    m = dlq.receive(timeout=5)
    dlq.accept()
    dlq.close()
    assert (m.body, m.id, m.durable, m.priority, m.subject, m.correlation_id) == (
        "nacked", frame.headers["message-id"], True, 6, "T", "cc")
    assert m.properties == {"color": "red"} and m.delivery_count == 0
    assert m.annotations["x-opt-original-destination"] == "queue://dl.s"

    c.create_sender("queue://dl.a").send(Message(body="rejected", id="ID:r1", durable=True,
                                                 subject="S", properties={"n": 1}))
    r = c.create_receiver("queue://dl.a", credit=1)
    r.receive(timeout=5)
    r.reject()
    r.close()  # (a blocking call: sends the disposition)
    conn.subscribe("/queue/ActiveMQ.DLQ", id="2", ack="auto")
    h = frames.q.get(timeout=5).headers
    assert (h["message-id"], h["type"], h["n"], h["persistent"]) == ("ID:r1", "S", "1", "true")
    assert h["original-destination"] == "/queue/dl.a"
    assert h["dlqDeliveryFailureCause"]


@pytest.mark.parametrize("selector", [
    "JMSPriority = 7", "JMSType = 'Kind'", "JMSCorrelationID = 'c-1'",
    "JMSDeliveryMode = 'PERSISTENT'", "JMSTimestamp > 0 AND JMSType = 'Kind'", "JMSXGroupID = 'g'", "JMSXGroupSeq = 4",
    "color = 'red'",
])
def test_jms_header_selectors_match_across_protocols(both: Any, stomp_client: Any, connect: Any,
                                                     selector: str) -> None:
    conn, frames = stomp_client
    c = connect(both.url())
    conn.subscribe("/queue/sel.a", id="1", ack="auto", headers={"selector": selector})
    s = c.create_sender("queue://sel.a")
    s.send(Message(body="miss", priority=1, subject="Other", durable=False))  # matches none
    s.send(Message(body="hit", priority=7, subject="Kind", correlation_id="c-1", durable=True,
                   group_id="g", group_sequence=4, properties={"color": "red"}))
    assert frames.q.get(timeout=5).body == "hit"
    from proton.reactor import Selector

    r = c.create_receiver("queue://sel.s", credit=5, options=Selector(selector))
    conn.send("/queue/sel.s", "miss", headers={"priority": "1", "type": "Other"})
    conn.send("/queue/sel.s", "hit", headers={
        "priority": "7", "type": "Kind", "correlation-id": "c-1", "persistent": "true",
        "JMSXGroupID": "g", "JMSXGroupSeq": "4", "color": "red"})
    assert r.receive(timeout=5).body == "hit"
    r.accept()
    # a barrier: a second match sent last arrives next, so "miss" never came
    s.send(Message(body="marker", priority=7, subject="Kind", correlation_id="c-1", durable=True,
                   group_id="g", group_sequence=4, properties={"color": "red"}))
    assert frames.q.get(timeout=5).body == "marker"
    assert frames.q.empty()


def test_temporary_reply_to_across_protocols(both: Any, stomp_client: Any, connect: Any) -> None:
    """Request/reply both ways through temporary queues."""
    conn, frames = stomp_client
    c = connect(both.url())
    replies = c.create_receiver(None, dynamic=True)
    address = replies.link.remote_source.address
    conn.subscribe("/queue/svc.s", id="1", ack="auto")
    c.create_sender("queue://svc.s").send(Message(body="req", reply_to=address, correlation_id="r1"))
    req = frames.q.get(timeout=5)
    assert req.headers["reply-to"].startswith("/remote-temp-queue/")
    conn.send(req.headers["reply-to"], "rep", headers={"correlation-id": req.headers["correlation-id"]})
    m = replies.receive(timeout=5)
    replies.accept()
    assert (m.body, m.correlation_id) == ("rep", "r1")

    conn.subscribe("/temp-queue/mine", id="2", ack="auto")
    r = c.create_receiver("queue://svc.a", credit=1)
    conn.send("/queue/svc.a", "req2", headers={"reply-to": "/temp-queue/mine"})
    req2 = r.receive(timeout=5)
    r.accept()
    assert req2.reply_to.startswith("temp-queue://")
    assert req2.annotations["x-opt-jms-reply-to"] == 2
    c.create_sender(req2.reply_to).send(Message(body="rep2"))
    got = frames.q.get(timeout=5)
    assert (got.body, got.headers["destination"]) == ("rep2", "/temp-queue/mine")


def test_virtual_topic_across_protocols(both: Any, stomp_client: Any, connect: Any) -> None:
    pytest.importorskip("relaymq_virtual_topic", reason="relaymq-virtual-topic is not installed")
    conn, frames = stomp_client
    c = connect(both.url())
    a = c.create_receiver("queue://Consumer.A.VirtualTopic.Orders", credit=5)
    conn.subscribe("/queue/Consumer.B.VirtualTopic.Orders", id="1", ack="auto")
    conn.send("/topic/VirtualTopic.Orders", "from stomp", headers={"type": "T", "color": "red"})
    c.create_sender("topic://VirtualTopic.Orders").send(
        Message(body="from amqp", subject="U", properties={"n": 1}))
    got_a = sorted((m.body, m.subject) for m in (a.receive(timeout=5), a.receive(timeout=5)))
    a.accept()
    got_b = sorted((f.body, f.headers["type"]) for f in (frames.q.get(timeout=5),
                                                          frames.q.get(timeout=5)))
    assert got_a == got_b == [("from amqp", "U"), ("from stomp", "T")]


def test_durable_messages_cross_protocols_after_a_restart(make_broker: Any, connect: Any,
                                                          tmp_path: Any) -> None:
    pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")
    from relaymq.testing import broker_config, plugin_element

    def kaha() -> Any:
        cfg = broker_config("amqp://127.0.0.1:0", "stomp://127.0.0.1:0", persistent=True,
                            data_directory=str(tmp_path))
        cfg.persistence_adapter = plugin_element("kahaDB")
        return cfg

    first = make_broker(config=kaha())
    conn, sent = stomp_to(first)
    conn.send("/queue/keep.s", "from stomp", headers={
        "persistent": "true", "priority": "7", "type": "T", "correlation-id": "c1",
        "reply-to": "/topic/rt", "JMSXGroupID": "g", "content-type": "text/plain",
        "color": "red"}, receipt="r1")
    assert sent.receipts.get(timeout=5) == "r1"  # stored
    conn.disconnect()
    c = connect(first.url())
    c.create_sender("queue://keep.a").send(Message(
        body="from amqp", id="ID:a1", durable=True, priority=2, subject="S", correlation_id="c2",
        reply_to="topic://rt2", group_id="ga", user_id=b"alice",
        properties={"i": 5, "d": 2.5, "b": True}))
    c.close()
    first.stop()

    second = make_broker(config=kaha())
    c = connect(second.url())
    r = c.create_receiver("queue://keep.s", credit=1)
    m = r.receive(timeout=5)
    r.accept()
    assert (m.body, m.durable, m.priority, m.subject, m.correlation_id, m.reply_to, m.group_id,
            m.content_type, m.properties) == ("from stomp", True, 7, "T", "c1", "topic://rt", "g",
                                              "text/plain", {"color": "red"})
    conn, frames = stomp_to(second)
    conn.subscribe("/queue/keep.a", id="1", ack="auto")
    f = frames.q.get(timeout=5)
    h = f.headers
    assert f.body == "from amqp"
    assert (h["message-id"], h["priority"], h["type"], h["correlation-id"], h["reply-to"],
            h["JMSXUserID"], h["persistent"], h["i"], h["d"], h["b"]) == (
        "ID:a1", "2", "S", "c2", "/topic/rt2", "alice", "true", "5", "2.5", "true")
    conn.disconnect()


def test_stomp_selector_sees_amqp_property_types(both: Any, stomp_client: Any,
                                                 connect: Any) -> None:
    """An AMQP int property is a Java int to a STOMP subscriber's selector too."""
    from proton import float32, int32

    conn, frames = stomp_client
    conn.subscribe(destination="/queue/typed", id="1", ack="auto", headers={
        "selector": "i + 1 < 0 OR f = 16777217", "receipt": "sub"})
    assert frames.receipts.get(timeout=5) == "sub"
    s = connect(both.url()).create_sender("queue://typed")
    s.send(Message(body="int", properties={"i": int32(2147483647)}))
    s.send(Message(body="long", properties={"i": 2147483647}))
    s.send(Message(body="float", properties={"f": float32(16777216.0)}))
    s.send(Message(body="double", properties={"f": 16777216.0}))
    s.send(Message(body="end", properties={"i": int32(2147483647)}))
    got = [frames.q.get(timeout=5).body for _ in range(3)]
    assert got == ["int", "float", "end"]


def test_a_send_to_a_temporary_queue_whose_connection_closed_is_refused(
        both: Any, stomp_client: Any, connect: Any) -> None:
    """ActiveMQ refuses a send to a temporary queue that is gone: an AMQP transfer on
    a link attached while it existed is rejected (amqp:not-found), a STOMP SEND gets
    an ERROR; each send fails alone and both connections stay usable."""
    from proton import Disposition
    from proton.utils import SendException
    from relaymq.model.destination import Destination
    from relaymq.testing import wait_until

    owner = connect(both.url())
    address = owner.create_receiver(None, dynamic=True).link.remote_source.address
    assert address.startswith("temp-queue://")
    dest = Destination.parse(address)
    c = connect(both.url())
    sender = c.create_sender(address)  # attached while the queue exists
    owner.close()
    wait_until(lambda: both.broker.temporary_owner(dest) is None, "the temporary queue removed")

    with pytest.raises(SendException) as refused:
        sender.send(Message(body="late"))
    assert refused.value.state == Disposition.REJECTED
    conn, frames = stomp_client
    errors: queue.Queue[Any] = queue.Queue()
    conn.set_listener("errors", type("E", (stomp.ConnectionListener,), {
        "on_error": lambda self, frame: errors.put(frame)})())
    conn.send(f"/remote-temp-queue/{dest.name}", "late", headers={"receipt": "t1"})
    error = errors.get(timeout=10)
    assert "does not exist" in error.headers.get("message", ""), error.headers
    assert frames.receipts.empty()  # no RECEIPT for the refused SEND

    # both connections still work
    c.create_sender("queue://after.temp").send(Message(body="amqp ok"))
    conn.send("/queue/after.temp", "stomp ok", headers={"receipt": "t2"})
    assert frames.receipts.get(timeout=10) == "t2"
    r = c.create_receiver("queue://after.temp", credit=2)
    got = [r.receive(timeout=10).body for _ in range(2)]
    r.accept()
    assert got == ["amqp ok", "stomp ok"]
