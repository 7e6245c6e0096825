"""AMQP fields and annotations whose value the kernel cannot keep in its
fixed-width fields (the stored record's 64-bit fields, the AMQP header an
AMQP consumer gets): the transfer is rejected with amqp:invalid-field when it
arrives, before a store write could fail with it (that write may carry other
producers' sends); the link, the connection and every other sender go on."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from proton import Delivery, Message, symbol, ulong
from relaymq.config.model import BrokerConfig
from relaymq.testing import broker_config, plugin_element
from relaymq_amqp import encode as enc
from relaymq_amqp.types import ULong

pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")

LONG_MAX = (1 << 63) - 1


def kaha(tmp_path: Path) -> BrokerConfig:
    c = broker_config("amqp://127.0.0.1:0", persistent=True, scheduler_support=True,
                      data_directory=str(tmp_path))
    c.persistence_adapter = plugin_element("kahaDB")
    return c


def raw_message(header: list[Any] | None = None, properties: list[Any] | None = None) -> bytes:
    """A message's bytes as a sender's own encoder may write them (field types too)."""
    out = b""
    if header is not None:
        out += enc.section(0x70, header)
    if properties is not None:
        out += enc.section(0x73, properties)
    return out + enc.section(0x77, "raw")


def send_raw(conn: Any, sender: Any, data: bytes) -> Any:
    """Transfer `data` unsettled and wait for the broker's outcome."""
    d = sender.link.delivery(str(uuid.uuid4()))
    sender.link.stream(data)
    sender.link.advance()
    conn.wait(lambda: d.remote_state != 0, timeout=10, msg="no outcome for the transfer")
    return d


#: (what, the transfer) that no fixed-width field can keep
OUT_OF_RANGE: list[tuple[str, Any]] = [
    ("x-opt-delivery-time", Message(body="bad", durable=True,
                                    annotations={symbol("x-opt-delivery-time"): ulong((1 << 64) - 1)})),
    ("x-opt-delivery-delay", Message(body="bad", durable=True,
                                     annotations={symbol("x-opt-delivery-delay"): ulong(1 << 63)})),
    ("AMQ_SCHEDULED_DELAY", Message(body="bad", durable=True,
                                    properties={"AMQ_SCHEDULED_DELAY": "9" * 25})),
    ("AMQ_SCHEDULED_PERIOD", Message(body="bad", durable=True,
                                     properties={"AMQ_SCHEDULED_PERIOD": float("inf")})),
    ("group-sequence", raw_message([True], [None] * 11 + [ULong(1 << 40)])),
    ("absolute-expiry-time", raw_message([True], [None] * 8 + [ULong(1 << 63)])),
    ("creation-time", raw_message([True], [None] * 9 + [ULong((1 << 64) - 1)])),
    ("header ttl", raw_message([True, None, ULong(1 << 40)])),
    ("header priority", raw_message([True, 300])),
]


def test_an_out_of_range_field_rejects_only_its_transfer(
        make_broker: Any, connect: Any, tmp_path: Path) -> None:
    bt = make_broker(config=kaha(tmp_path))
    c = connect(bt.url())
    s = c.create_sender("queue://N")
    for what, bad in OUT_OF_RANGE:
        if isinstance(bad, bytes):
            d = send_raw(c, s, bad)
        else:
            d = s.send(bad, error_states=[])
        assert d.remote_state == Delivery.REJECTED, (what, d.remote_state)
        cond = d.remote.condition
        assert cond is not None and cond.name == "amqp:invalid-field", (what, cond)
        assert what in cond.description and "out of range" in cond.description, cond
        s.send(Message(body=f"after {what}", durable=True))  # the link goes on
    r = c.create_receiver("queue://N", credit=100)
    got = []
    for _ in OUT_OF_RANGE:
        got.append(r.receive(timeout=10).body)
        r.accept()
    assert got == [f"after {what}" for what, _ in OUT_OF_RANGE]
    s.send(Message(body="end", durable=True))
    assert r.receive(timeout=10).body == "end"  # nothing else was stored before it
    r.accept()


def test_the_longest_delays_are_stored(make_broker: Any, connect: Any, tmp_path: Path) -> None:
    """A delay of 2^63-1 ms is in range: the job is due at the latest time the
    store keeps rather than past it, and its store write succeeds."""
    bt = make_broker(config=kaha(tmp_path))
    c = connect(bt.url())
    s = c.create_sender("queue://LONGEST")
    for m in (Message(body="p", durable=True, properties={"AMQ_SCHEDULED_DELAY": LONG_MAX}),
              Message(body="a", durable=True,
                      annotations={symbol("x-opt-delivery-delay"): LONG_MAX})):
        d = s.send(m, error_states=[])
        assert d.remote_state == Delivery.ACCEPTED, d.remote.condition
    s.send(Message(body="now", durable=True))
    r = c.create_receiver("queue://LONGEST", credit=10)
    assert r.receive(timeout=10).body == "now"
    r.accept()  # (the two scheduled ones wait in the scheduler)


GOOD = 300


def test_a_rejected_transfer_does_not_fail_another_producers_sends(
        make_broker: Any, connect: Any, tmp_path: Path) -> None:
    bt = make_broker(config=kaha(tmp_path))
    good_conn = connect(bt.url())
    bad_conn = connect(bt.url())
    good = good_conn.create_sender("queue://MIX")
    bad = bad_conn.create_sender("queue://MIX")
    failures: list[BaseException] = []

    def produce() -> None:
        try:
            for i in range(GOOD):
                good.send(Message(body=f"good-{i}", durable=True))  # raises unless accepted
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            failures.append(exc)

    t = threading.Thread(target=produce)
    t.start()
    rejected = 0
    while t.is_alive() or rejected < 20:
        what, m = OUT_OF_RANGE[rejected % 4]  # the ones proton encodes itself
        d = bad.send(m, error_states=[])
        assert d.remote_state == Delivery.REJECTED, what
        rejected += 1
    t.join(60)
    assert failures == []
    r = good_conn.create_receiver("queue://MIX", credit=GOOD)
    got = []
    for _ in range(GOOD):
        got.append(r.receive(timeout=10).body)
        r.accept()
    assert got == [f"good-{i}" for i in range(GOOD)]
