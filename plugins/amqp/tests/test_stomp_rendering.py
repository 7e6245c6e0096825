"""AMQP messages of every shape reach a STOMP subscriber as MESSAGE frames.

Application properties of any AMQP type arrive as their text (ActiveMQ writes a
non-string property as its `toString()`), ids of every AMQP id type with Qpid
JMS' `AMQP_*:` prefixes, and bodies byte for byte. Fields a sender's encoder
typed wrongly (a non-string application-property key, a numeric subject,
content-type or group-id) and values holding a NUL (which would end a STOMP
frame) used to break the delivery: the dispatch raised, the AMQP transfer was
rejected although the message stayed queued and held by the subscriber, or the
frame was cut short and the STOMP stream went out of step. Each case is sent
over a real AMQP connection and read by stomp.py; the last message proves the
subscriber got every one in order and its stream is intact."""

from __future__ import annotations

import queue
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from proton import UNDESCRIBED, Array, Data, Described, Message, char, symbol, timestamp, ulong
from proton.utils import BlockingConnection
from relaymq.testing import broker_config
from relaymq.testing.waits import wait_until

from .conftest import BrokerThread

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")

UUID = uuid.UUID("12345678-1234-5678-1234-567812345678")


class RawMessage:
    """An encoded message sent as-is: what a client's own encoder may produce
    (proton's `Message` refuses some of it)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def send(self, sender: Any, tag: Any = None) -> Any:
        dlv = sender.delivery(tag or sender.delivery_tag())
        sender.stream(self.data)
        sender.advance()
        return dlv


def section(code: int, fill: Callable[[Data], Any]) -> bytes:
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(code)
    fill(d)
    d.exit()
    return d.encode()


def properties(*fill: Callable[[Data], Any]) -> bytes:
    """A properties section whose fields are put by `fill`, in order."""
    def put(d: Data) -> None:
        d.put_list()
        d.enter()
        for f in fill:
            f(d)
        d.exit()
    return section(0x73, put)


def app_properties(*pairs: tuple[Callable[[Data], Any], Callable[[Data], Any]]) -> bytes:
    def put(d: Data) -> None:
        d.put_map()
        d.enter()
        for k, v in pairs:
            k(d)
            v(d)
        d.exit()
    return section(0x74, put)


def encoded(value: Any) -> bytes:
    d = Data()
    d.put_object(value)
    return d.encode()


NULL = Data.put_null
TEXT_BODY = section(0x77, lambda d: d.put_string("x"))
CASE = (lambda d: d.put_string("case"), lambda d: d.put_string("raw"))

#: (what is sent, the headers the STOMP MESSAGE must carry (and the body))
CASES: list[tuple[Message | RawMessage, dict[str, str], bytes]] = [
    (Message(body="x", properties={"v": ulong(2**64 - 1), "s": symbol("sym"),
                                   "t": timestamp(1700000000000), "c": char("c"),
                                   "u": UUID, "b": b"\x00\x01\n:", "f": 1.5, "yes": True}),
     {"v": "-1", "s": "sym", "t": "1700000000000", "c": "c", "u": str(UUID),
      "b": "00010a3a", "f": "1.5", "yes": "true"}, b"x"),
    (Message(body="x", properties={"l": [1, "a"], "m": {"a": 1},
                                   "arr": Array(UNDESCRIBED, Data.INT, 1, 2),
                                   "d": Described(symbol("d"), "v")}),
     {"l": "[1, a]", "m": "{a=1}", "arr": "[1, 2]"}, b"x"),  # Java's toString
    (Message(body="x", properties={"v": "a\nb:c\\d\re", "k\n:": "1"}),
     {"v": "a\nb:c\\d\re", "k\n:": "1"}, b"x"),
    (Message(body="x", id=ulong(5), correlation_id=ulong(2**64 - 1)),
     {"message-id": "AMQP_ULONG:5", "correlation-id": "AMQP_ULONG:18446744073709551615"}, b"x"),
    (Message(body="x", id=UUID, correlation_id=UUID),
     {"message-id": f"AMQP_UUID:{UUID}", "correlation-id": f"AMQP_UUID:{UUID}"}, b"x"),
    (Message(body="x", id=b"\x00\xff", correlation_id=b"\n:"),
     {"message-id": "AMQP_BINARY:00FF", "correlation-id": "AMQP_BINARY:0A3A"}, b"x"),
    (Message(body="x", id="a:b\nc", correlation_id="AMQP_ULONG:99999999999999999999999"),
     {"message-id": "a:b\nc", "correlation-id": "AMQP_ULONG:99999999999999999999999"}, b"x"),
    (Message(body="x", properties={"huge": "h" * (1 << 20)}, subject="s" * 100000),
     {"huge": "h" * (1 << 20), "type": "s" * 100000}, b"x"),
    # other amqp-value and amqp-sequence bodies: their encoded value
    (Message(body=5), {}, encoded(5)),
    (Message(body={"a": 1, "b": [1, 2]}), {}, encoded({"a": 1, "b": [1, 2]})),
    (Message(body=UUID), {}, encoded(UUID)),
    (Message(body=Described(symbol("d"), [1])), {}, encoded(Described(symbol("d"), [1]))),
    (Message(body=[1, 2], inferred=True), {}, section(0x76, lambda d: d.put_object([1, 2]))),
    (Message(body=None), {}, b""),
    (Message(body=b"\x00\x01"), {}, b"\x00\x01"),
    # a NUL ends a STOMP frame and has no escape: it becomes U+FFFD
    (Message(body="x", user_id=b"\xff\x00u", properties={"n": "a\x00b"}),
     {"JMSXUserID": "\ufffd\ufffdu", "n": "a\ufffdb"}, b"x"),
    # a non-string application-property key, as its text
    (RawMessage(app_properties(CASE, (lambda d: d.put_int(7), lambda d: d.put_string("v")))
                + TEXT_BODY), {"7": "v"}, b"x"),
    # subject, content-type and group-id of other types than string
    (RawMessage(properties(NULL, NULL, NULL, lambda d: d.put_int(5), NULL, NULL,
                           lambda d: d.put_int(6), NULL, NULL, NULL, lambda d: d.put_ulong(9))
                + app_properties(CASE) + TEXT_BODY),
     {"type": "5", "content-type": "6", "JMSXGroupID": "9"}, b"x"),
    (Message(body="last"), {}, b"last"),
]


@pytest.fixture(scope="module")
def both() -> Iterator[BrokerThread]:
    bt = BrokerThread(broker_config("amqp://127.0.0.1:0", "stomp://127.0.0.1:0")).start()
    yield bt
    bt.stop()


@pytest.mark.parametrize("version", ["1.2", "1.1"])
def test_amqp_messages_of_every_shape_reach_a_stomp_subscriber(both: BrokerThread,
                                                               version: str) -> None:
    host, _, port = both.address("stomp").rpartition(":")
    frames: queue.Queue[Any] = queue.Queue()

    class Frames(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            frames.put(frame)

        def on_error(self, frame: Any) -> None:
            frames.put(frame)

    cls = stomp.Connection12 if version == "1.2" else stomp.Connection11
    conn = cls([(host, int(port))], auto_decode=False)
    conn.set_listener("", Frames())
    conn.connect(wait=True)
    address = f"shapes.{version}"
    c = BlockingConnection(both.address("amqp"), timeout=10)
    try:
        conn.subscribe(f"/queue/{address}", id="1", ack="client-individual")
        sender = c.create_sender(address)
        for i, (message, _, _) in enumerate(CASES):
            if isinstance(message, Message):
                message.properties = {**(message.properties or {}), "case": str(i)}
            sender.send(message)  # accepted (it used to be rejected, yet stay queued)
        for i, (_, expected, body) in enumerate(CASES):
            frame = frames.get(timeout=10)
            assert frame.cmd == "MESSAGE", (i, frame.cmd, frame.headers)
            headers = dict(frame.headers)
            assert headers.get("case") in (str(i), "raw"), (i, headers)
            if i < len(CASES) - 1:
                got = {k: headers.get(k) for k in expected}
                assert got == expected, i
            assert frame.body == body, i
            assert int(headers["content-length"]) == len(body), i
            if version == "1.2":
                conn.ack(headers["ack"])
            else:
                conn.ack(headers["message-id"], "1")
        # every one acknowledged: none is left held or queued
        wait_until(lambda: both.queue_size(address) == 0, "the queue to empty")
        assert frames.empty()
    finally:
        c.close()
        conn.disconnect()
