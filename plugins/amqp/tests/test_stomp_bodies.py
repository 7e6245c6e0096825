"""Bodies crossing STOMP <-> AMQP byte for byte, through real clients.

STOMP -> AMQP follows ActiveMQ: a SEND with `content-length` is a BytesMessage
(one data section), one without it is a TextMessage (an amqp-value string).
The wire bytes are checked on the raw transfer as well as through proton's
decoded `Message`, received with a BlockingConnection and with a
MessagingHandler container.

python-qpid-proton (0.40) decodes a binary body into a `memoryview` over memory
owned by the proton `Message`: it is valid while that message is alive and
garbage once the message is freed, so a client must keep the message (or copy,
`bytes(msg.body)`) until it is done with the body. These tests copy while
holding the message, as docs/amqp.md (Interop notes) tells users to.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import pytest
from proton import Data, Delivery, Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import BlockingConnection
from relaymq.testing import broker_config
from relaymq.testing.stomp_collector import Collector

from .conftest import BrokerThread

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")

DATA, AMQP_VALUE = 0x75, 0x77
KIB64 = bytes((i * 7 + i // 256) % 256 for i in range(65536))

#: (name, body, send content-length?, content-type, expected section, expected body)
CASES: list[tuple[str, bytes, bool, str | None, int, bytes | str]] = [
    ("text", b"hello", False, None, AMQP_VALUE, "hello"),
    ("text-utf8", "héllo wörld".encode(), False, None, AMQP_VALUE, "héllo wörld"),
    ("text-non-utf8", b"a\xff\xfeb", False, None, AMQP_VALUE, "a\ufffd\ufffdb"),
    ("text-empty", b"", False, None, AMQP_VALUE, ""),
    ("text-1", b"x", False, None, AMQP_VALUE, "x"),
    ("text-typed", b"{\"a\": 1}", False, "application/json", AMQP_VALUE, "{\"a\": 1}"),
    ("text-64k", bytes(65 + i % 26 for i in range(65536)), False, None, AMQP_VALUE,
     "".join(chr(65 + i % 26) for i in range(65536))),
    ("bytes", b"hello", True, None, DATA, b"hello"),
    ("bytes-nul", b"a\x00b\x00", True, None, DATA, b"a\x00b\x00"),
    ("bytes-non-utf8", b"\xff\xfe\x80\x00", True, None, DATA, b"\xff\xfe\x80\x00"),
    ("bytes-empty", b"", True, None, DATA, b""),
    ("bytes-1", b"\x00", True, None, DATA, b"\x00"),
    ("bytes-typed", b"\x89PNG\x00", True, "image/png", DATA, b"\x89PNG\x00"),
    ("bytes-64k", KIB64, True, None, DATA, KIB64),
    ("bytes-all-values", bytes(range(256)), True, None, DATA, bytes(range(256))),
]
IDS = [c[0] for c in CASES]


@pytest.fixture(scope="module")
def both() -> Iterator[BrokerThread]:
    bt = BrokerThread(broker_config("amqp://127.0.0.1:0", "stomp://127.0.0.1:0")).start()
    yield bt
    bt.stop()


def stomp_send(bt: BrokerThread, queue_name: str, cases: list[Any]) -> None:
    """SEND each case's body as raw frames (stomp.py would add content-length to
    every body), with a receipt on the last one."""
    host, _, port = bt.address("stomp").rpartition(":")
    conn = stomp.Connection([(host, int(port))], auto_content_length=False)
    col = Collector()
    conn.set_listener("", col)
    conn.connect(wait=True)
    try:
        for i, (name, body, with_length, ctype, _, _) in enumerate(cases):
            headers = {"case": name}
            if with_length:
                headers["content-length"] = str(len(body))
            if ctype:
                headers["content-type"] = ctype
            last = i == len(cases) - 1
            conn.send(f"/queue/{queue_name}", body, headers=headers,
                      receipt="last" if last else None)
        assert col.wait_receipt("last", timeout=10), f"no receipt; errors: {col.errors!r}"
    finally:
        conn.disconnect()


def body_section(raw: bytes) -> tuple[int, Any]:
    """The descriptor code and value of the last section of an encoded message."""
    data = Data()
    section: tuple[int, Any] = (-1, None)
    while raw:
        n = data.decode(raw)
        data.rewind()
        data.next()
        described = data.get_object()
        value = described.value
        section = (int(described.descriptor), bytes(value) if isinstance(value, memoryview)
                   else value)
        data.clear()
        raw = raw[n:]
    return section


def expect(case: tuple[Any, ...], body: Any) -> None:
    name, _, _, _, section, expected = case
    if section == DATA:
        assert isinstance(body, bytes), f"{name}: {type(body).__name__}"
    else:
        assert isinstance(body, str), f"{name}: {type(body).__name__}"
    assert body == expected, f"{name}: {body[:40]!r}"


def test_stomp_bodies_on_the_amqp_wire(both: BrokerThread) -> None:
    """The raw transfer: a data section for a SEND with content-length, an
    amqp-value string without, with exactly the bytes (text as ActiveMQ reads it)."""
    stomp_send(both, "bodies.wire", CASES)
    raws: list[bytes] = []

    class Raw(MessagingHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(auto_accept=False)

        def on_start(self, event: Any) -> None:
            self.conn = event.container.connect(both.address("amqp"))
            event.container.create_receiver(self.conn, "bodies.wire")
            self.timer = event.container.schedule(20, self)

        def on_timer_task(self, event: Any) -> None:
            self.conn.close()

        def on_delivery(self, event: Any) -> None:
            dlv = event.delivery
            if dlv.readable and not dlv.partial:
                raws.append(bytes(event.link.recv(dlv.pending)))
                event.link.advance()
                dlv.update(Delivery.ACCEPTED)
                dlv.settle()
                if len(raws) == len(CASES):
                    self.timer.cancel()
                    self.conn.close()

    Container(Raw()).run()
    assert len(raws) == len(CASES)
    for case, raw in zip(CASES, raws, strict=True):
        code, value = body_section(raw)
        assert code == case[4], f"{case[0]}: section {code:#x}"
        expect(case, value)


def test_stomp_bodies_with_blocking_connection(both: BrokerThread) -> None:
    """Each body copied while its message is held; every message is also kept,
    so its memoryview is still right after all the later receives."""
    stomp_send(both, "bodies.blocking", CASES)
    c = BlockingConnection(both.address("amqp"), timeout=10)
    try:
        r = c.create_receiver("bodies.blocking", credit=len(CASES))
        held: list[Message] = []
        for case in CASES:
            m = r.receive(timeout=10)
            r.accept()
            assert m.properties["case"] == case[0]
            expect(case, bytes(m.body) if isinstance(m.body, memoryview) else m.body)
            held.append(m)
        for case, m in zip(CASES, held, strict=True):
            expect(case, bytes(m.body) if isinstance(m.body, memoryview) else m.body)
            annotation = m.annotations["x-opt-jms-msg-type"]
            assert annotation == (3 if case[4] == DATA else 5), case[0]
            if case[3]:  # (proton shows an absent content-type as symbol('None'))
                assert m.content_type == case[3], case[0]
    finally:
        c.close()


def test_stomp_bodies_with_messaging_handler(both: BrokerThread) -> None:
    stomp_send(both, "bodies.handler", CASES)
    got: list[tuple[str, Any]] = []

    class Receive(MessagingHandler):  # type: ignore[misc]
        def on_start(self, event: Any) -> None:
            self.conn = event.container.connect(both.address("amqp"))
            event.container.create_receiver(self.conn, "bodies.handler")
            self.timer = event.container.schedule(20, self)

        def on_timer_task(self, event: Any) -> None:
            self.conn.close()

        def on_message(self, event: Any) -> None:
            body = event.message.body  # the message is alive for this call: copy now
            got.append((event.message.properties["case"],
                        bytes(body) if isinstance(body, memoryview) else body))
            if len(got) == len(CASES):
                self.timer.cancel()
                self.conn.close()

    Container(Receive()).run()
    assert [name for name, _ in got] == IDS
    for case, (_, body) in zip(CASES, got, strict=True):
        expect(case, body)


AMQP_CASES: list[tuple[str, Any, bytes, bool]] = [
    # (name, AMQP body, the STOMP body expected, content-length expected)
    ("binary", b"a\x00b\xff", b"a\x00b\xff", True),
    ("binary-empty", b"", b"", True),
    ("binary-1", b"\x00", b"\x00", True),
    ("binary-64k", KIB64, KIB64, True),
    ("text", "héllo", "héllo".encode(), True),
    ("text-empty", "", b"", True),
]


def test_amqp_bodies_to_stomp(both: BrokerThread) -> None:
    """The other way: data and amqp-value string bodies reach a STOMP consumer
    byte for byte (text as UTF-8), each with its content-length."""
    host, _, port = both.address("stomp").rpartition(":")
    frames: queue.Queue[Any] = queue.Queue()

    class Frames(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            frames.put(frame)

    conn = stomp.Connection([(host, int(port))], auto_decode=False)
    conn.set_listener("", Frames())
    conn.connect(wait=True)
    c = BlockingConnection(both.address("amqp"), timeout=10)
    try:
        conn.subscribe("/queue/bodies.back", id="1", ack="auto")
        sender = c.create_sender("bodies.back")
        for name, body, _, _ in AMQP_CASES:
            sender.send(Message(body=body, properties={"case": name}))
        for name, _, expected, with_length in AMQP_CASES:
            frame = frames.get(timeout=10)
            assert frame.headers["case"] == name
            assert frame.body == expected, name
            assert ("content-length" in frame.headers) == with_length, name
            assert int(frame.headers["content-length"]) == len(expected), name
    finally:
        c.close()
        conn.disconnect()
