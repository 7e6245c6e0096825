"""AMQP in, STOMP out, and back: fields and properties survive the conversion,
which happens once, at the edge that needs it."""

from __future__ import annotations

import queue
import uuid
from typing import Any

import pytest
from proton import Message

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")


class Frames(stomp.ConnectionListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.q: queue.Queue[Any] = queue.Queue()

    def on_message(self, frame: Any) -> None:
        self.q.put(frame)


@pytest.fixture
def both(make_broker: Any) -> Any:
    return make_broker("amqp://127.0.0.1:0", "stomp://127.0.0.1:0")


@pytest.fixture
def stomp_client(both: Any) -> Any:
    host, _, port = both.address("stomp").rpartition(":")
    conn = stomp.Connection([(host, int(port))], auto_content_length=False)
    frames = Frames()
    conn.set_listener("", frames)
    conn.connect(wait=True)
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
