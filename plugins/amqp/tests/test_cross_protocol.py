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
